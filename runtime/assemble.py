"""Putting a pool and a scheduler together for a TinyMamba (tests, demo, verification)."""

from __future__ import annotations

from slotwarden.kernels.layer import TinyMamba

from .config import PoolConfig
from .pool import StatePool
from .scheduler import Scheduler, SchedulerConfig


def pool_for(model: TinyMamba, slots: int, *, check: str = "strict", device=None) -> StatePool:
    """A pool whose conv and SSM state have exactly the model's shapes and dtype."""
    mc = model.config
    return StatePool(
        PoolConfig(
            num_slots=slots,
            layers=mc.layers,
            conv_dims=(mc.conv_dim,),
            conv_kernel=mc.conv_kernel,
            heads=mc.heads,
            head_dim=mc.head_dim,
            state_size=mc.dstate,
            conv_dtype=mc.dtype,
            ssm_dtype=mc.dtype,
            device=device or "cpu",
        ),
        check=check,
    )


def scheduler_for(model: TinyMamba, slots: int, cls=Scheduler, *, check: str = "strict", device=None, **config) -> Scheduler:
    return cls(pool_for(model, slots, check=check, device=device), model, SchedulerConfig(**config))
