"""One decision vocabulary, tried: the runtime's scheduler asking the checker's `Policy`.

`asking(policy)` is a `Scheduler` whose event decisions (roll a candidate back, release a
finished, aborted or retracted request, close a session) ask `policy` (a
verification/abstract/policy.py `Policy`, a history mutant's or the default) what to fire, on a
view of the runtime as a checker world, and fire that on the real pool. So a history bug written
once as a `Policy` subclass runs in the checker and in the Hypothesis machines alike.

What it covers: the decisions whose answer is a list of events. What it does not: the decisions
whose answer is bookkeeping (`handle_after_park`, `turn_after_abort`, `release_epoch`,
`can_evict`), the prefix cache's moves, and the runtime's own record of a move after a fault;
their mutants keep a runtime variant of their own (`runtime.py`, `cache.py`).
"""

from __future__ import annotations

from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import Actor, ActorKind, Event
from slotwarden.runtime.scheduler.request import Phase
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.verification import abstract as A
from slotwarden.verification.abstract import Fire, Policy

_PHASE = {Phase.WAITING: A.WAITING, Phase.RUNNING: A.RUNNING, Phase.DONE: A.DONE}


def world_of(sched: Scheduler) -> A.World:
    """The runtime as a checker world: requests by id, sessions by `SESSION_BASE` + id, the pool's
    records (the prefix cache is not viewed)."""
    ledger = sched.pool.ledger
    slots = tuple(ledger.record(i) for i in range(1, sched.pool.capacity + 1))
    pool = Pool(slots, tuple(ledger.free_list().tolist()))
    requests = tuple(_request(sched, sched.requests.get(rid), rid) for rid in range(sched.submitted))
    sessions = tuple(_session(sched.sessions.get(sid), sid) for sid in range(sched.opened))
    return A.World(pool, requests, sessions, ledger.launched, ledger.completed, ())


def _request(sched: Scheduler, req, rid: int) -> A.Request:
    if req is None:
        return A.Request(rid, None, A.DONE)
    session = None if req.session is None else A.SESSION_BASE + req.session
    phase = A.CANDIDATE if req.phase is Phase.WAITING and req.slot is not None else _PHASE[req.phase]
    return A.Request(rid, session, phase, req.slot, req.lent, ran=bool(req.output))


def _session(s, sid: int) -> A.Session:
    if s is None:
        return A.Session(A.SESSION_BASE + sid, A.CLOSED)
    return A.Session(A.SESSION_BASE + sid, A.OPEN, s.slot, s.turn, tuple(s.turns))


def _actor(actor: Actor) -> Actor:
    """A checker actor as the runtime names it (sessions count from 0 there)."""
    return Actor.session(actor.id - A.SESSION_BASE) if actor.kind is ActorKind.SESSION else actor


def fire(sched: Scheduler, decisions: tuple) -> None:
    """Fire the policy's `Fire` decisions on the real pool, in order."""
    for d in decisions:
        target = d.target - A.SESSION_BASE if d.event is Event.PARK else d.target
        sched.pool.fire(d.event, list(d.ids), _actor(d.actor), target)


def asking(policy: type[Policy] = Policy) -> type[Scheduler]:
    """A `Scheduler` whose event decisions are `policy`'s."""
    ask = policy()

    class Asking(Scheduler):
        def rollback_candidate(self, req) -> None:
            fire(self, ask.rollback_events(world_of(self), _request(self, req, req.rid)))
            req.slot, req.lent = None, False

        def release_finished(self, req) -> None:
            decisions = ask.finish_events(world_of(self), _request(self, req, req.rid))
            fire(self, decisions)
            if any(d.event is Event.PARK for d in decisions):
                self.sessions[req.session].slot = req.slot

        def release_aborted(self, req) -> None:
            fire(self, ask.abort_events(world_of(self), _request(self, req, req.rid)))

        def release_retracted(self, req) -> None:
            fire(self, ask.retract_events(world_of(self), _request(self, req, req.rid)))

        def release_session(self, s) -> None:
            fire(self, ask.close_events(world_of(self), _session(s, s.sid)))

        def _abort_one(self, req) -> None:
            """A waiting request's abort (a candidate holding a slot, or one holding none) is
            the policy's too; a running one's goes through `release_aborted`."""
            if req.phase is not Phase.WAITING:
                return super()._abort_one(req)
            try:
                fire(self, ask.abort_events(world_of(self), _request(self, req, req.rid)))
                req.slot, req.lent = None, False
                if req in self.waiting:
                    self.waiting.remove(req)
                self._leave(req, "abort")
            finally:
                if req.done:
                    self._turn_ended(req)

    Asking.__name__ = Asking.__qualname__ = f"Asking{policy.__name__}"
    return Asking


__all__ = ["Fire", "asking", "fire", "world_of"]
