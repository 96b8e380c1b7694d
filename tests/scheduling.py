"""Shared builders for scheduler tests: a TinyMamba and a pool whose shapes match it."""

import torch

from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.scheduler import Scheduler, SchedulerConfig

MODEL = TinyMamba(TinyMambaConfig(dtype=torch.float64))


def make_pool(slots: int) -> StatePool:
    mc = MODEL.config
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
        )
    )


def make_scheduler(slots: int = 4, model=MODEL, **config) -> Scheduler:
    return Scheduler(make_pool(slots), model, SchedulerConfig(**config))


def fresh_state(tokens):
    """(conv, ssm) of slot 1 after feeding `tokens` from zero, and the next token."""
    conv, ssm = MODEL.new_state(1)
    nxt = MODEL.prefill([torch.tensor(tokens, dtype=torch.int64)], torch.tensor([1]), conv, ssm)
    return conv[:, 1], ssm[:, 1], int(nxt[0])
