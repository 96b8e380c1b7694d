"""The SGLang slot bugs as runtime mutants: each a `Scheduler` subclass that overrides one hook
of the seam (`runtime/scheduler/moves.py`) or one step to do what the buggy engine did, through
the same pool API. Production code has no mutant branches.

A mutant whose bug is a wrong move raises at the call that makes it (`IllegalMove`,
`BadSlotId`, `FenceError`); one whose bug is an omission (a slot never released) is caught by
the idle audit (`AuditFailed`), which names the slot, its owner and the event that left it.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import Actor
from slotwarden.runtime.scheduler.request import Phase, Request, Session, SessionStatus
from slotwarden.runtime.scheduler.scheduler import Scheduler


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


class RollbackFreesAdmittedTurn(Scheduler):
    """PR 16067 in a session: the rollback also gives back the slot of a turn already in the
    running batch, as if it had never run."""

    def rollback_candidate(self, req: Request) -> None:
        turns = [r for r in self.running if r.lent]
        super().rollback_candidate(req)
        if turns:
            self.pool.rollback([turns[-1].slot], Actor.request(turns[-1].rid))


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


class RequeueNearCeiling(Scheduler):
    """vLLM #52520: a plain request whose prefill lands with no free slot left (admitted at the
    ceiling) is requeued, its output dropped, to be prefilled again: the same each time, forever."""

    def _process(self, done) -> None:
        ran = [row[0] for row in done.rows if row[1] == row[0].generation and done.kind != "verify"]
        super()._process(done)
        for req in ran:
            first = req.phase is Phase.RUNNING and len(req.output) == 1 and all(r is not req for r in self.finishing)
            if first and req.session is None and self.pool.available() == 0:
                self.batches.retract(req)
                req.output.clear()
                req.input = list(req.prompt)
