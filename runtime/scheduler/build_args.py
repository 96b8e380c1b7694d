"""What `build()` accepts: each argument checked before anything is made, or refused with
`BadBuild` (a `BadConfig`) naming the argument and its bad value. A device the scheduler cannot
step on (the meta device, which holds no values; a backend this torch cannot reach) is refused
here, not at the first step."""

from __future__ import annotations

import os

import torch

from slotwarden.kernels.layer import TinyMambaConfig
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.scheduler.config import SchedulerConfig
from slotwarden.runtime.scheduler.errors import BadConfig
from slotwarden.runtime.trace import TraceWriter


class BadBuild(BadConfig):
    """An argument of `build()` of the wrong kind, or a device it cannot step on; nothing made."""

    def __init__(self, argument: str, value, want: str):
        self.field, self.value, self.want = argument, value, want
        ValueError.__init__(self, f"bad build({argument}={value!r:.60}): {want}")


def check_build_args(model, pool, device, config, trace, cls) -> None:
    """Refuse the first argument of `build()` that it cannot use (see `BadBuild`)."""
    if not (model is None or isinstance(model, TinyMambaConfig) or _is_model(model)):
        raise BadBuild("model", model, "a TinyMambaConfig, a model with a TinyMambaConfig `config`, or None")
    if pool is not None and not isinstance(pool, PoolConfig):
        raise BadBuild("pool", pool, "a PoolConfig or None")
    if config is not None and not isinstance(config, SchedulerConfig):
        raise BadBuild("config", config, "a SchedulerConfig or None")
    if not (
        trace is None or isinstance(trace, (str, os.PathLike, TraceWriter)) or callable(getattr(trace, "write", None))
    ):
        raise BadBuild("trace", trace, "a path, a text file, a TraceWriter or None")
    if not (isinstance(cls, type) and _is_scheduler(cls)):
        raise BadBuild("cls", cls, "the Scheduler class or a subclass of it")
    if device is not None:
        known_device(device, "device")  # steppable: checked by build() once the pool agrees
    if pool is not None:
        steppable(pool.device, "pool")


def steppable(device, argument: str) -> torch.device:
    """`device` as a torch.device the scheduler can step on, or `BadBuild`."""
    dev = known_device(device, argument)
    if dev.type == "meta":
        raise BadBuild(argument, device, "a device with values to step on (the meta device has none)")
    if dev.type != "cpu":
        backend = getattr(torch, dev.type, None)
        available = getattr(backend, "is_available", None)
        if available is None or not available():
            raise BadBuild(argument, device, f"a device this torch can reach ({dev.type} is not available)")
    return dev


def known_device(device, argument: str) -> torch.device:
    """`device` as a torch.device (a name torch parses, or a torch.device), or `BadBuild`."""
    if not isinstance(device, (str, torch.device)):
        raise BadBuild(argument, device, "a device name or a torch.device")
    try:
        return torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise BadBuild(argument, device, "a device torch knows ('cpu', 'cuda', 'cuda:1', ...)") from None


def _is_model(model) -> bool:
    return isinstance(getattr(model, "config", None), TinyMambaConfig)


def _is_scheduler(cls) -> bool:
    from slotwarden.runtime.scheduler.scheduler import Scheduler

    return issubclass(cls, Scheduler)
