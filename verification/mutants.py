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

from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.request import Request, Session
from slotwarden.runtime.scheduler import Scheduler
from slotwarden.verification import abstract as A
from slotwarden.verification.abstract import Bounds, Fire, Policy, req_actor


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


# -- the same bugs in the abstract scheduler, for the exhaustive checker -------------------------
class AbstractLentRollbackFrees(Policy):
    """PR 21404: after the rollback, the request releases the lent slot as if it were done."""

    def rollback_events(self, world, r):
        plan = super().rollback_events(world, r)
        return plan + ((Fire(Event.FINISH, req_actor(r), (r.handle,)),) if r.lent else ())


class AbstractRollbackFreesAdmitted(Policy):
    """PR 16067: the rollback also frees the slot of a request already in the running batch."""

    def rollback_events(self, world, r):
        plan = super().rollback_events(world, r)
        admitted = [q for q in world.requests if q.phase == A.RUNNING and q.handle is not None]
        return plan + ((Fire(Event.ROLLBACK, req_actor(admitted[0]), (admitted[0].handle,)),) if admitted else ())


class AbstractCloseLeaks(Policy):
    """PR 23496: closing a session never frees its slot."""

    def close_events(self, world, s):
        return ()


class AbstractStaleHandleAfterPark(Policy):
    """PR 26941: the request keeps its handle after its state is saved to the session."""

    def handle_after_park(self, world, r, slot):
        return slot


class AbstractSentinelFreed(Policy):
    """PRs 40044 / 40250: a waiting request, which has no slot, frees the `-1` sentinel."""

    def abort_events(self, world, r):
        if r.phase == A.WAITING:
            return (Fire(Event.ABORT, req_actor(r), (-1,)),)
        return super().abort_events(world, r)


class AbstractAbortLeaks(Policy):
    """PR 12693: a candidate aborted before it joins the batch forgets its slot."""

    def abort_events(self, world, r):
        return () if r.phase == A.CANDIDATE else super().abort_events(world, r)


class AbstractEarlyFence(Policy):
    """Overlap: a release waits for the last completed step, not the one in flight."""

    def release_epoch(self, world):
        return world.completed


class Mutant(NamedTuple):
    name: str
    cls: type  # the Scheduler subclass (runtime)
    policy: type  # the Policy subclass (exhaustive checker)
    bounds: Bounds  # the checker bounds the bug needs
    bug: str  # the SGLang pull request(s)
    rule: str  # the lifecycle rule it breaks
    needs: dict  # scheduler settings that make the bug's path likely (overlap; a budget tight enough to reject)


_SESSION = Bounds(slots=1, requests=3, sessions=1, overlap=False)  # s0 = r0, r1; r2 plain
_PAIR = Bounds(slots=2, requests=3, sessions=1, overlap=False)
_OVERLAP = Bounds(slots=2, requests=3, sessions=1, overlap=True)

MUTANTS = (
    Mutant("lent_rollback_frees", LentRollbackFrees, AbstractLentRollbackFrees, _SESSION, "21404 -> 23327",
           "a lent slot returns to its session", {"token_budget": 2, "chunk_size": 2}),
    Mutant("rollback_frees_admitted", RollbackFreesAdmitted, AbstractRollbackFreesAdmitted, _PAIR, "16067 / 18910",
           "a slot in the running batch is never freed by the batch builder", {}),
    Mutant("close_leaks", CloseLeaks, AbstractCloseLeaks, _SESSION, "23496",
           "session close releases exactly the slots it owns", {}),
    Mutant("stale_handle_after_park", StaleHandleAfterPark, AbstractStaleHandleAfterPark, _SESSION, "26941",
           "after hand-over the previous holder keeps no handle", {}),
    Mutant("sentinel_freed", SentinelFreed, AbstractSentinelFreed, _SESSION, "40044 / 40250",
           "only real slot ids can be freed", {}),
    Mutant("abort_leaks", AbortLeaks, AbstractAbortLeaks, _SESSION, "12693",
           "every path out of a request releases what it holds", {}),
    Mutant("early_fence", EarlyFence, AbstractEarlyFence, _OVERLAP, "overlap scheduling",
           "a released slot is free only after its step's fence", {"overlap": True}),
)
