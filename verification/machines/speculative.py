"""The scheduler machines with speculative requests: `Speculating`, mixed in before a scheduler
machine, makes each plain request and session turn draw `spec_k` 0..3 and the scheduler draft
with n-grams or with the target model itself (every draft it proposes is accepted, up to the
budget). The machines' invariants and audits judge the windows too (a request's handles are its
committed slot and its window); the continuity machine replays every request's transcript, so a
wrong commit shows in its tokens and states. `hunter(name)` gives the machine factory a history
mutant names (`Mutant.machine`).
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from slotwarden.runtime.scheduler.drafter import ModelDrafter
from slotwarden.verification.machines.continuity import (
    CachedContinuityMachine,
    ContinuityMachine,
    continuity_machine_for,
    recording,
)
from slotwarden.verification.machines.scheduler import (
    CachedSchedulerMachine,
    SchedulerMachine,
    _scheduler_draws,
    machine_for,
    marks_broken,
)
from slotwarden.verification.machines.shared import MODEL


class Speculating:
    """Speculative requests (mixed in before a `SchedulerMachine`)."""

    @initialize(**_scheduler_draws([3, 2, 4, 1]), drafter=st.sampled_from(["ngram", "target"]))
    def setup(self, slots, overlap, budget, chunk, max_running, retract_after, features, drafter):
        super().setup(slots, overlap, budget, chunk, max_running, retract_after, features)
        if drafter == "target":
            self.sched.drafter = ModelDrafter(MODEL)

    def _speculating(self, k: int, submit) -> None:
        self.spec_k = k
        try:
            submit()
        finally:
            self.spec_k = 0

    @precondition(lambda self: self._has("plain"))
    @rule(n=st.integers(1, 6), new=st.integers(1, 6), first=st.integers(0, 63), k=st.integers(0, 3))
    @marks_broken
    def submit(self, n, new, first, k):
        self._speculating(k, lambda: super(Speculating, self).submit(n, new, first))

    @precondition(lambda self: self._has("sessions"))
    @rule(data=st.data(), n=st.integers(1, 4), new=st.integers(1, 6), k=st.integers(0, 3))
    @marks_broken
    def submit_turn(self, data, n, new, k):
        self._speculating(k, lambda: super(Speculating, self).submit_turn(data, n, new))


def _machine(base: type, scheduler_cls: type, **settings) -> type:
    return type(
        f"{scheduler_cls.__name__}Speculating{base.__name__}",
        (Speculating, base),
        {"scheduler_cls": scheduler_cls, "settings_override": {**base.settings_override, **settings}},
    )


def speculative_machine_for(scheduler_cls: type, **settings) -> type:
    """The scheduler machine with speculative requests, driving `scheduler_cls`."""
    base = CachedSchedulerMachine if settings.get("prefix_cache") else SchedulerMachine
    return _machine(base, scheduler_cls, **settings)


def speculative_continuity_for(scheduler_cls: type, **settings) -> type:
    """The continuity machine with speculative requests, driving `scheduler_cls`."""
    base = CachedContinuityMachine if settings.get("prefix_cache") else ContinuityMachine
    return _machine(base, recording(scheduler_cls), **settings)


def hunter(machine: str):
    """The machine factory for `Mutant.machine`: "scheduler", "continuity", "speculative" or
    "speculative continuity"."""
    return {
        "scheduler": machine_for,
        "continuity": continuity_machine_for,
        "speculative": speculative_machine_for,
        "speculative continuity": speculative_continuity_for,
    }[machine]
