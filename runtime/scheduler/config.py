"""The scheduler's settings, checked when made: a bad field raises `BadConfig` naming it."""

from __future__ import annotations

from dataclasses import dataclass

from slotwarden.runtime.scheduler import intake
from slotwarden.runtime.scheduler.errors import BadConfig


@dataclass(frozen=True)
class SchedulerConfig:
    max_running: int = 8  # requests in the running batch
    token_budget: int = 64  # input tokens a prefill step may feed
    chunk_size: int = 32  # input tokens one request may feed in one step
    overlap: bool = False  # build and launch step N+1 while step N is in flight
    retract_after: int | None = 3  # a head of queue starved this many steps retracts a running request
    session_timeout: int | None = None  # steps an idle session lives before the reaper closes it
    audit_when_idle: bool = True
    prefix_cache: bool = False  # plain requests share recurrent state by prefix (runtime/radix/cache.py)
    pad_to_captured: bool = False  # pad decode batches to a captured size (1, 2, 4, ... max_running) with pad rows

    def __post_init__(self):
        for name in ("max_running", "token_budget", "chunk_size"):
            _check_field(self, name, lambda v: v >= 1, "a positive int")
        for name in ("retract_after", "session_timeout"):
            _check_field(self, name, lambda v: v >= 0, "an int >= 0, or None", optional=True)
        for name in ("overlap", "audit_when_idle", "prefix_cache", "pad_to_captured"):
            if type(getattr(self, name)) is not bool:
                raise BadConfig(name, getattr(self, name), "True or False")


def _check_field(config, name: str, ok, want: str, optional: bool = False) -> None:
    value = getattr(config, name)
    if optional and value is None:
        return
    if not (intake.is_int(value) and ok(value)):
        raise BadConfig(name, value, want)
