"""`install()`: SGLang's classes wrapped at their Mamba call sites, `uninstall()` undoing it.

It imports SGLang's modules (which must be importable), puts a descriptor on
`HybridReqToTokenPool.mamba_allocator` so that every `MambaSlotAllocator` a pool is given is
wrapped in `GuardedSlots` when it is assigned (pools built before `install()` stay bare), and
replaces each method named in `hooks.HOOKS` by its wrapper. Installing twice is one install.
`first_read=True` also judges each step's first reads (`GuardedSlots(fills=True)`): off by
default, as SGLang fills slots on paths the adapter does not see (a PD decode server's transfer,
LMCache's external loads), which it would refuse.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from slotwarden.adapters.sglang.hooks import HOOKS
from slotwarden.adapters.sglang.slots import GuardedSlots

MODULES = {
    "HybridReqToTokenPool": "sglang.srt.mem_cache.memory_pool",
    "MambaSlotAllocator": "sglang.srt.mem_cache.allocator.mamba",
    "MambaComponent": "sglang.srt.mem_cache.unified_cache.components.mamba",
    "UnifiedRadixCache": "sglang.srt.mem_cache.unified_radix_cache",
    "StreamingSession": "sglang.srt.session.streaming_session",
    "ScheduleBatch": "sglang.srt.managers.schedule_batch",
    "Scheduler": "sglang.srt.managers.scheduler",
    "SchedulerBatchResultProcessor": "sglang.srt.managers.scheduler_components.batch_result_processor",
}
"""Where each SGLang class the adapter wraps is defined."""


class Patch(NamedTuple):
    cls: type
    name: str
    original: object


class Installed:
    """What `install()` did: the patches (to undo), the classes it could not import (their
    hooks are not installed: `missing`, with the import error), and the pools it guards."""

    def __init__(self, trace=None, first_read: bool = False):
        self.trace, self.first_read, self.patches, self.missing, self.pools = trace, first_read, [], {}, []

    def guard(self, value):
        """The allocator a pool is given, guarded if it is SGLang's plain slot allocator."""
        raw = MODULES_LOADED.get("MambaSlotAllocator")
        if raw is None or type(value) is not raw:
            return value
        trace = None if self.trace is None else f"{self.trace}.{len(self.pools)}" if self.pools else self.trace
        slots = GuardedSlots(value, trace=trace, fills=self.first_read)
        self.pools.append(slots)
        return slots


MODULES_LOADED: dict[str, type] = {}
_INSTALLED: list[Installed] = []


class _Allocator:
    """`HybridReqToTokenPool.mamba_allocator`: guards what is assigned, keeps it in the
    instance's own dict under the same name (so it survives `uninstall()`)."""

    def __init__(self, installed: Installed):
        self.installed = installed

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        try:
            return obj.__dict__["mamba_allocator"]
        except KeyError:
            raise AttributeError("mamba_allocator") from None

    def __set__(self, obj, value):
        obj.__dict__["mamba_allocator"] = self.installed.guard(value)


def install(trace=None, first_read: bool = False) -> Installed:
    """Guard every SGLang Mamba slot pool built from now on in this process (see module doc)."""
    if _INSTALLED:
        return _INSTALLED[0]
    done = Installed(trace, first_read)
    for name, module in MODULES.items():
        try:
            MODULES_LOADED[name] = getattr(importlib.import_module(module), name)
        except ImportError as exc:
            done.missing[name] = f"{type(exc).__name__}: {exc}"
    pool = MODULES_LOADED.get("HybridReqToTokenPool")
    if pool is None or "MambaSlotAllocator" not in MODULES_LOADED:
        raise ImportError(f"SGLang's Mamba pool could not be imported: {done.missing}")
    done.patches.append(Patch(pool, "mamba_allocator", pool.__dict__.get("mamba_allocator")))
    pool.mamba_allocator = _Allocator(done)
    for site, make in HOOKS.items():
        cls = MODULES_LOADED.get(site.split(".")[0])
        if cls is None:
            continue
        name = site.split(".", 1)[1]
        original = cls.__dict__[name]
        wrapper = make(original)
        wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = name, site, original.__doc__
        wrapper.__wrapped__ = original
        done.patches.append(Patch(cls, name, original))
        setattr(cls, name, wrapper)
    _INSTALLED.append(done)
    return done


def uninstall() -> None:
    """Put SGLang's own methods back (pools already guarded keep their guard)."""
    if not _INSTALLED:
        return
    for patch in reversed(_INSTALLED.pop().patches):
        if patch.original is None:
            delattr(patch.cls, patch.name)
        else:
            setattr(patch.cls, patch.name, patch.original)


def installed() -> Installed | None:
    return _INSTALLED[0] if _INSTALLED else None
