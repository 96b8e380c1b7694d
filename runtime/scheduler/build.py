"""`build()`: the one way to put the tiny engine together (a TinyMamba, a `StatePool` sized
from it, and a `Scheduler` over both).

    from slotwarden import build
    sched = build(slots=4, max_running=4)   # the default TinyMamba, 4 slots, on the CPU

The tests, the demo, the benchmarks and the verification machines all build through here.
"""

from __future__ import annotations

import dataclasses

import torch

from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig

from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.scheduler.build_args import BadBuild, check_build_args, steppable
from slotwarden.runtime.scheduler.scheduler import Scheduler, SchedulerConfig
from slotwarden.runtime.scheduler.shapes import PoolMismatch, check_fits, pool_config

__all__ = ["build", "BadBuild", "PoolMismatch"]

DEFAULT_SLOTS = 8


def build(
    model: TinyMamba | TinyMambaConfig | None = None,
    *,
    slots: int | None = None,
    pool: PoolConfig | None = None,
    device: str | torch.device | None = None,
    config: SchedulerConfig | None = None,
    check: str = "strict",
    trace=None,
    cls: type[Scheduler] = Scheduler,
    **settings,
) -> Scheduler:
    """A `Scheduler` over a TinyMamba and a pool whose state has exactly the layer's shapes.

    - `model`: a `TinyMambaConfig` (a TinyMamba is made from it, its weights on `device`), a
      model already made (used as it is), or None for `TinyMambaConfig()`.
    - `slots` (default 8) sizes the pool from the layer; or `pool`, a `PoolConfig` of your own,
      which must fit the layer: otherwise `PoolMismatch`, naming every field that differs, here
      and not at the first step. Give one of the two.
    - `device`: where the state (and the weights) live; default the pool's device, else "cpu".
    - `config`, or `SchedulerConfig`'s fields as keywords (`max_running=4, overlap=True`; they
      override `config`'s).
    - `check`: the ledger's checking ("strict", or "off" to measure what checking costs);
      `trace`: a slot-event trace to write (a path, a text file or a `TraceWriter`;
      docs/traces.md); `cls`: a `Scheduler` subclass to build (a mutant, say).
    """
    check_build_args(model, pool, device, config, trace, cls)
    if pool is not None and slots is not None:
        raise ValueError(f"give slots ({slots}) or a pool config ({pool.num_slots} slots), not both")
    if pool is not None and device is not None and torch.device(device) != torch.device(pool.device):
        raise PoolMismatch([("device", str(pool.device), str(device))])
    if device is not None:
        steppable(device, "device")
    if pool is None:
        pool = pool_config(_layer(model), DEFAULT_SLOTS if slots is None else slots, device=device or "cpu")
    check_fits(pool, _layer(model))
    config = dataclasses.replace(config or SchedulerConfig(), **settings)
    if isinstance(model, TinyMambaConfig) or model is None:
        model = TinyMamba(model, device=torch.device(pool.device))
    return cls(StatePool(pool, check=check, trace=trace), model, config)


def _layer(model) -> TinyMambaConfig:
    if model is None:
        return TinyMambaConfig()
    return model if isinstance(model, TinyMambaConfig) else model.config
