"""The real bug history (BRIEF section 1) as injectable faults: each mutant is a `Scheduler`
subclass that overrides one policy method to do what the buggy engine did, expressed through
the same pool API. Production code has no mutant branches.

With the runtime's enforcement on, a mutant whose bug is a wrong move raises at the call that
makes it (`IllegalMove`, `BadSlotId`, `FenceError`); a mutant whose bug is an omission (a
slot never released) makes no call to refuse, and is caught by the idle audit (`AuditFailed`)
at the first idle step, which names the slot, its owner and the event that left it there.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.vocabulary import Actor
from slotwarden.runtime.request import Request, Session
from slotwarden.runtime.scheduler import Scheduler


class LentRollbackFrees(Scheduler):
    """PR 21404 -> 23327: the batch builder's rollback frees the slot of every rejected
    candidate, a session's lent slot included (released as if the request were done)."""

    def rollback_candidate(self, req: Request) -> None:
        if req.lent:
            self.pool.finish([req.slot], Actor.request(req.rid))
            req.slot, req.lent = None, False
            self.rolled_back += 1
        else:
            super().rollback_candidate(req)


class RollbackFreesAdmitted(Scheduler):
    """PR 16067 (reverted by 18910): the rollback also frees the slot of a request that had
    already been added to the running batch."""

    def rollback_candidate(self, req: Request) -> None:
        admitted = [r for r in self.running if r.session is None and not r.lent]
        super().rollback_candidate(req)
        if admitted:
            self.pool.rollback([admitted[-1].slot], Actor.request(admitted[-1].rid))


class CloseLeaks(Scheduler):
    """PR 23496: closing a session never frees its slot."""

    def release_session(self, s: Session) -> None:
        pass


class StaleHandleAfterPark(Scheduler):
    """PR 26941: after its state is saved to the session the request keeps its slot handle,
    and its teardown frees the slot the session now owns."""

    def release_finished(self, req: Request) -> None:
        super().release_finished(req)
        if req.session is not None and not req.lent:
            self.pool.finish([req.slot], Actor.request(req.rid))


class SentinelFreed(Scheduler):
    """PRs 40044 / 40250: a `-1` "no slot" sentinel is freed into the free list."""

    def release_aborted(self, req: Request) -> None:
        super().release_aborted(req)
        self.pool.rollback([-1], Actor.request(req.rid))


class AbortLeaks(Scheduler):
    """PR 12693: a request aborted between taking its slot and finishing leaks the slot."""

    def release_aborted(self, req: Request) -> None:
        pass


class EarlyFence(Scheduler):
    """Overlap scheduling: a released slot is made free while the step that used it still
    runs on the device (the fence is taken at launch, not at completion)."""

    def fence_finished(self) -> None:
        self.pool.fence(self.pool.ledger.launched)


class Mutant(NamedTuple):
    name: str
    cls: type
    bug: str  # the SGLang pull request(s)
    rule: str  # the lifecycle rule it breaks
    needs: dict  # scheduler settings that make the bug's path likely (overlap; a budget tight enough to reject)


MUTANTS = (
    Mutant("lent_rollback_frees", LentRollbackFrees, "21404 -> 23327", "a lent slot returns to its session", {"token_budget": 2, "chunk_size": 2}),
    Mutant("rollback_frees_admitted", RollbackFreesAdmitted, "16067 / 18910", "a slot in the running batch is never freed by the batch builder", {}),
    Mutant("close_leaks", CloseLeaks, "23496", "session close releases exactly the slots it owns", {}),
    Mutant("stale_handle_after_park", StaleHandleAfterPark, "26941", "after hand-over the previous holder keeps no handle", {}),
    Mutant("sentinel_freed", SentinelFreed, "40044 / 40250", "only real slot ids can be freed", {}),
    Mutant("abort_leaks", AbortLeaks, "12693", "every path out of a request releases what it holds", {}),
    Mutant("early_fence", EarlyFence, "overlap scheduling", "a released slot is free only after its step's fence", {"overlap": True}),
)
