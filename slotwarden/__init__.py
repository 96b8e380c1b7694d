"""slotwarden: the lifecycle of recurrent-state slots, declared once, enforced and verified.

The names a user needs, importable from here:

- the model's words: `Actor`, `Event`, `State`, and `IllegalMove` (every refused move raises it,
  or another `LifecycleError`);
- the library for an engine: `StatePool` with its `PoolConfig`; `LedgerGuard` in front of an
  engine's own allocator; `GuardedAllocator`, a drop-in for SGLang's `MambaSlotAllocator`;
  `check_step`, the check of a step's index tensor before launch (refusing with `IllegalStep`);
- the tiny engine: `build()`, `Scheduler`, `SchedulerConfig` (and `PoolMismatch`, which
  `build()` raises for a pool that does not fit the layer).

`import slotwarden` loads none of them (nor torch): each is imported on first use, so the CLI
and the pure model stay light.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_HOME = {
    "Actor": "slotwarden.model.vocabulary",
    "Event": "slotwarden.model.vocabulary",
    "State": "slotwarden.model.vocabulary",
    "IllegalMove": "slotwarden.model.errors",
    "IllegalStep": "slotwarden.model.errors",
    "LifecycleError": "slotwarden.model.errors",
    "SlotwardenError": "slotwarden.model.errors",
    "StatePool": "slotwarden.runtime.pool",
    "PoolConfig": "slotwarden.runtime.config",
    "LedgerGuard": "slotwarden.runtime.guard",
    "GuardedAllocator": "slotwarden.runtime.guarded_allocator",
    "check_step": "slotwarden.runtime.launch",
    "Scheduler": "slotwarden.runtime.scheduler.scheduler",
    "SchedulerConfig": "slotwarden.runtime.scheduler.scheduler",
    "build": "slotwarden.runtime.scheduler.build",
    "PoolMismatch": "slotwarden.runtime.scheduler.shapes",
}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'slotwarden' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
