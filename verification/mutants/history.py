"""The real bug history (SGLang's slot bugs, by PR) as injectable faults: each mutant is a `Scheduler`
subclass that overrides one policy method to do what the buggy engine did, expressed through
the same pool API. Production code has no mutant branches.

With the runtime's enforcement on, a mutant whose bug is a wrong move raises at the call that
makes it (`IllegalMove`, `BadSlotId`, `FenceError`); a mutant whose bug is an omission (a
slot never released) makes no call to refuse, and is caught by the idle audit (`AuditFailed`)
at the first idle step, which names the slot, its owner and the event that left it there.

Each `Mutant` names the catch it must get: the checker's violated property and the runtime
error's type. `verify` counts a catch for another reason as a failure: a mutant caught by a
crash elsewhere does not show that the check meant for its bug works.

A bug in the state's numbers rather than in who holds a slot (SGLang #40252: a retracted
session turn's partial state is kept as the session's checkpoint) makes only legal moves: the
checker's model, which holds no state, cannot see it (`policy` None), and the continuity
machine, which compares every finished turn's tokens and state with its transcript's, catches
it (`machine="continuity"`).

The prefix cache's bugs (`verification/mutants/cache.py`) run with the cache on and are hunted
by the cached scheduler machine, whose follow-ups share donated prefixes.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.scheduler.request import Phase, Request, Session, SessionStatus
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.verification import abstract as A
from slotwarden.verification.abstract import Bounds, Fire, Policy, req_actor, session_of
from slotwarden.verification.mutants.cache import (
    CowPublishedBeforeCopy,
    CowUnlockOverDecrements,
    EvictIgnoresPin,
    MatchLeaksOnQueueAbort,
    PublishAtSchedule,
    TombstoneLockSkipped,
)


class LentRollbackFrees(Scheduler):
    """PR 21404 -> 23327: the batch builder's rollback frees the slot of every rejected
    candidate, a session's lent slot included (released as if the request were done)."""

    def rollback_candidate(self, req: Request) -> None:
        if req.lent:
            self.pool.finish([req.slot], Actor.request(req.rid))
            req.slot, req.lent = None, False
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


class QueuedTurnAbortBricks(Scheduler):
    """SGLang #31765 / #31767: aborting a session turn still in the queue drops the request
    but never ends the session's turn, so the session waits for it forever: its later turns
    never start (the session is bricked)."""

    def abort(self, rid: int) -> None:
        req = self.requests.get(rid)
        s = None if req is None or req.session is None else self.sessions.get(req.session)
        if s is not None and req.phase is Phase.WAITING and s.turn == rid:
            if req in self.waiting:
                self.waiting.remove(req)
            req.phase = Phase.DONE  # out of the queue, but never finalised as the session's turn
            return
        super().abort(rid)


class AbortPinsLentSlot(Scheduler):
    """SGLang #40251: an abort that is not stamped as the turn's finish skips the release, so
    the slot lent to an aborted turn is never given back to its session: it stays pinned to a
    request that is gone."""

    def release_aborted(self, req: Request) -> None:
        if not req.lent:
            super().release_aborted(req)


class RejectedTurnClearsLive(Scheduler):
    """SGLang #36503: a turn sent while the session's turn is in flight is refused (aborted
    from the queue), and its clean-up clears the session's in-flight mark, which belongs to
    the live turn: the session then starts a turn (here the live one, again) while one is in
    flight. Caught by the machine's invariant that a session has one turn queued or running."""

    def _turn_ended(self, req: Request) -> None:
        s = None if req.session is None else self.sessions.get(req.session)
        if s is not None and s.status is SessionStatus.OPEN and s.turn not in (None, req.rid):
            s.turn = None  # the live turn's in-flight mark, cleared by a turn that never started
        super()._turn_ended(req)


class OverlengthAbortRestores(Scheduler):
    """SGLang #22273: a turn aborted before it runs (over-length, in the queue) goes through the
    finish path, which restores the session's slot for the turn and writes the turn's one-token
    prefix into it: a write into a slot the request never borrowed."""

    def abort(self, rid: int) -> None:
        req = self.requests.get(rid)
        s = None if req is None or req.session is None else self.sessions.get(req.session)
        if s is not None and req.phase is Phase.WAITING and s.turn == rid and s.slot is not None:
            self.pool.zero([s.slot], Actor.request(rid))
        super().abort(rid)


class RetractKeepsPartialTurn(Scheduler):
    """SGLang #40252: a session turn retracted mid-way is treated like one that finished: the
    state its partial run wrote into the lent slot is kept as the session's checkpoint (the
    session is not marked stale), so the turn's recomputation continues from that state and
    feeds its input a second time on top of it."""

    def turn_retracted(self, s: Session, req: Request, lent: bool) -> None:
        pass


# -- the same bugs in the abstract scheduler, for the exhaustive checker -------------------------
class AbstractLentRollbackFrees(Policy):
    """PR 21404: after the rollback, the request releases the lent slot as if it were done."""

    def rollback_events(self, world, r):
        plan = super().rollback_events(world, r)
        return plan + ((Fire(Event.FINISH, req_actor(r), (r.handle,)),) if r.lent else ())


class AbstractRollbackFreesAdmitted(Policy):
    """PR 16067: the rollback also frees the slot of a request already in the running batch
    (the one with the lowest id: a choice by number, so the checker explores it unreduced)."""

    symmetric = False

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


class AbstractQueuedTurnAbortBricks(Policy):
    """SGLang #31765 / #31767: an aborted turn still waiting in the queue stays its session's
    turn in flight."""

    def turn_after_abort(self, world, s, r):
        return s.turn if r.phase == A.WAITING else super().turn_after_abort(world, s, r)


class AbstractAbortPinsLentSlot(Policy):
    """SGLang #40251: an aborted lent turn never gives its slot back."""

    def abort_events(self, world, r):
        return () if r.lent else super().abort_events(world, r)


class AbstractRejectedTurnClearsLive(Policy):
    """SGLang #36503: an aborted queued turn clears its session's turn in flight."""

    def turn_after_abort(self, world, s, r):
        return None


class AbstractOverlengthAbortRestores(Policy):
    """SGLang #22273: a waiting turn's abort acts on its session's parked slot."""

    def abort_events(self, world, r):
        if r.phase == A.WAITING and r.session is not None and session_of(world, r.session).handle is not None:
            return (Fire(Event.ABORT, req_actor(r), (session_of(world, r.session).handle,)),)
        return super().abort_events(world, r)


# -- the prefix cache's bugs (2025-2026), in the abstract scheduler ------------------------------
class AbstractTombstoneLockSkipped(Policy):
    """SGLang #27147: the match's lock on a tombstoned node is skipped (the inc does nothing),
    yet the request copies from the node and its copy's fence lets go of a lock never taken."""

    def match_events(self, world, r, slot):
        return tuple(d for d in super().match_events(world, r, slot) if not isinstance(d, Fire))


class AbstractCowUnlockOverDecrements(Policy):
    """SGLang #27038: the copy-on-write temp lock is released when the copy's step is launched,
    and again at its fence: the count runs ahead of the locks taken, and the source can be
    evicted while the copy from it is in flight."""

    def launch_events(self, world, copies):
        return tuple(Fire(Event.UNLOCK, Actor.request(rid), (i,)) for rid, i in sorted(copies))


class AbstractCowPublishedBeforeCopy(Policy):
    """SGLang #30986: a donated slot is published at once, before the step still writing it
    (its copy or load) has landed: a reader can match state that is not there yet."""

    def donate_events(self, world, r):
        return tuple(d._replace(epoch=world.completed) for d in super().donate_events(world, r))


class AbstractMatchLeaksOnQueueAbort(Policy):
    """SGLang #20182: a candidate aborted before it runs gives back its fresh slot but not the
    lock its prefix match took: the matched node stays pinned by a request that is gone."""

    def abort_events(self, world, r):
        plan = super().abort_events(world, r)
        if r.phase == A.CANDIDATE:
            return tuple(d for d in plan if d.event is not Event.UNLOCK)
        return plan


class AbstractEvictIgnoresPin(Policy):
    """LMDeploy #4700: eviction goes by another count (the KV blocks' references) and drops a
    node whose state is still locked by a reader."""

    def can_evict(self, world, slot):
        return True


class AbstractPublishAtSchedule(Policy):
    """vLLM #56525: donated state is committed when the next step is scheduled, not at the fence
    of the step writing it: if that write is aborted, a retry loads what was never written."""

    def launch_events(self, world, copies):
        caching = tuple(i + 1 for i, s in enumerate(world.pool.slots) if s.state is State.CACHING)
        return (Fire(Event.FENCE, Actor.fence(world.launched), caching),) if caching else ()


class Mutant(NamedTuple):
    name: str
    cls: type | None  # the Scheduler subclass (runtime); None: its runtime variant is not written yet
    policy: type | None  # the Policy subclass (exhaustive checker); None: a bug its model cannot hold
    bounds: Bounds  # the checker bounds the bug needs
    bug: str  # the SGLang pull request(s)
    rule: str  # the lifecycle rule it breaks
    needs: dict  # scheduler settings fixed for this mutant (none: the machines find every mutant untuned)
    checker_catch: tuple = ()  # the checker properties that count as catching it
    runtime_catch: tuple = ()  # the runtime error types that count as catching it
    machine: str = "scheduler"  # the Hypothesis machine that hunts it: "scheduler" or "continuity"

    def caught_for_the_right_reason(self, prop: str | None, error: str) -> tuple[bool, bool]:
        """(checker, runtime): whether each caught it with an expected property / error type
        (`error` as the campaign reports it: "Type: message"; "" when it passed). A mutant
        the checker cannot see (`policy` None) is not checked there: that half holds when no
        property is reported; likewise a mutant with no runtime variant in this catalogue
        (`cls` None) holds its runtime half when no error is reported."""
        kind = error.split(":")[0] if error else None
        checker = prop is None if self.policy is None else prop in self.checker_catch
        runtime = kind is None if self.cls is None else kind in self.runtime_catch
        return checker, runtime


_SESSION = Bounds(slots=1, requests=3, sessions=1, overlap=False)  # s0 = r0, r1; r2 plain
_PAIR = Bounds(slots=2, requests=3, sessions=1, overlap=False)
_OVERLAP = Bounds(slots=2, requests=3, sessions=1, overlap=True)
_CACHE = Bounds(slots=2, requests=3, sessions=0, overlap=False, nodes=1)  # a donor and two readers
_CACHE_OVERLAP = Bounds(slots=2, requests=2, sessions=0, overlap=True, nodes=1)

MUTANTS = (
    Mutant(
        "lent_rollback_frees",
        LentRollbackFrees,
        AbstractLentRollbackFrees,
        _SESSION,
        "21404 -> 23327",
        "a lent slot returns to its session",
        {},
        checker_catch=("legal",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "rollback_frees_admitted",
        RollbackFreesAdmitted,
        AbstractRollbackFreesAdmitted,
        _PAIR,
        "16067 / 18910",
        "a slot in the running batch is never freed by the batch builder",
        {},
        checker_catch=("legal",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "close_leaks",
        CloseLeaks,
        AbstractCloseLeaks,
        _SESSION,
        "23496",
        "session close releases exactly the slots it owns",
        {},
        checker_catch=("no_orphans",),
        runtime_catch=("AuditFailed",),
    ),
    Mutant(
        "stale_handle_after_park",
        StaleHandleAfterPark,
        AbstractStaleHandleAfterPark,
        _SESSION,
        "26941",
        "after hand-over the previous holder keeps no handle",
        {},
        checker_catch=("handles_match",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "sentinel_freed",
        SentinelFreed,
        AbstractSentinelFreed,
        _SESSION,
        "40044 / 40250",
        "only real slot ids can be freed",
        {},
        checker_catch=("legal",),
        runtime_catch=("BadSlotId",),
    ),
    Mutant(
        "abort_leaks",
        AbortLeaks,
        AbstractAbortLeaks,
        _SESSION,
        "12693",
        "every path out of a request releases what it holds",
        {},
        # a leaked plain slot shows at the idle audit; a leaked lent slot already at its
        # session's next lend, which the ledger refuses (the slot is still LENT_RUNNING)
        checker_catch=("no_orphans",),
        runtime_catch=("AuditFailed", "IllegalMove"),
    ),
    Mutant(
        "early_fence",
        EarlyFence,
        AbstractEarlyFence,
        _OVERLAP,
        "overlap scheduling",
        "a released slot is free only after its step's fence",
        {},
        checker_catch=("in_flight_not_free",),
        runtime_catch=("FenceError",),
    ),
    Mutant(
        "queued_turn_abort_bricks",
        QueuedTurnAbortBricks,
        AbstractQueuedTurnAbortBricks,
        _SESSION,
        "31765 / 31767",
        "an aborted turn ends its session's turn",
        {},
        checker_catch=("deadlock",),
        runtime_catch=("AssertionError",),
    ),
    Mutant(
        "abort_pins_lent_slot",
        AbortPinsLentSlot,
        AbstractAbortPinsLentSlot,
        _SESSION,
        "40251",
        "an aborted lent turn gives the slot back to its session",
        {},
        checker_catch=("no_orphans",),
        runtime_catch=("AssertionError", "IllegalMove", "AuditFailed"),
    ),
    Mutant(
        "rejected_turn_clears_live",
        RejectedTurnClearsLive,
        AbstractRejectedTurnClearsLive,
        _SESSION,
        "36503",
        "a session has one turn in flight",
        {},
        checker_catch=("no_orphans", "legal", "handles_match"),
        runtime_catch=("IllegalMove", "AssertionError", "AuditFailed"),
    ),
    Mutant(
        "overlength_abort_restores",
        OverlengthAbortRestores,
        AbstractOverlengthAbortRestores,
        _SESSION,
        "22273",
        "only the borrower of a lent slot writes it",
        {},
        checker_catch=("legal",),
        runtime_catch=("IllegalCopy",),
    ),
    Mutant(
        "retract_keeps_partial_turn",
        RetractKeepsPartialTurn,
        None,
        _SESSION,
        "40252",
        "a retraction does not advance the session's checkpoint",
        {},
        runtime_catch=("AssertionError",),  # the continuity machine: tokens or state differ from the transcript's
        machine="continuity",
    ),
    # the prefix cache: the runtime variants run with the cache on (verification/mutants/cache.py);
    # the checker's on bounds with cache nodes
    Mutant(
        "tombstone_lock_skipped",
        TombstoneLockSkipped,
        AbstractTombstoneLockSkipped,
        _CACHE,
        "SGLang #27147",
        "every unlock matches a lock by the same request",
        {"prefix_cache": True},
        checker_catch=("locks_match", "legal"),
        runtime_catch=("IllegalCopy", "IllegalMove"),
    ),
    Mutant(
        "cow_unlock_over_decrements",
        CowUnlockOverDecrements,
        AbstractCowUnlockOverDecrements,
        _CACHE,
        "SGLang #27038",
        "a cached slot is never evicted while a copy from it is in flight",
        {"prefix_cache": True},
        checker_catch=("evict_unlocked",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "cow_published_before_copy",
        CowPublishedBeforeCopy,
        AbstractCowPublishedBeforeCopy,
        _CACHE_OVERLAP,
        "SGLang #30986",
        "a slot is published only once the step writing it is fenced",
        {"prefix_cache": True, "overlap": True},
        checker_catch=("reads_published",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "match_leaks_on_queue_abort",
        MatchLeaksOnQueueAbort,
        AbstractMatchLeaksOnQueueAbort,
        _CACHE,
        "SGLang #20182",
        "every path out of a request (abort included) lets go of what its match holds",
        {"prefix_cache": True},
        checker_catch=("locks_match",),
        runtime_catch=("IllegalMove", "AuditFailed"),
    ),
    Mutant(
        "evict_ignores_pin",
        EvictIgnoresPin,
        AbstractEvictIgnoresPin,
        _CACHE,
        "LMDeploy #4700",
        "only an unlocked node is evicted",
        {"prefix_cache": True},
        checker_catch=("legal",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "publish_at_schedule",
        PublishAtSchedule,
        AbstractPublishAtSchedule,
        _CACHE_OVERLAP,
        "vLLM #56525",
        "a donated slot is published at the fence of the step that wrote it, not when the next is scheduled",
        {"prefix_cache": True},
        checker_catch=("reads_published",),
        runtime_catch=("FenceError",),
    ),
)
