"""The abstract scheduler's actions and the successors of a world.

Every change to a slot goes through the declared lifecycle (`slotwarden.model.pool.apply /
alloc / fence`, memoised in `memo`); nothing here restates a transition. An `IllegalMove` or
`BadSlotId` the model raises during an action is a violation, reported as an `Outcome` with
its error. What the model allows when (steps in flight, time, aborts, the prefix cache,
retraction) is in the comment below the imports.
"""

from __future__ import annotations

from functools import partial
from typing import Iterator

from slotwarden.model.errors import LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import Actor, Event, State

from slotwarden.verification.abstract import windows
from slotwarden.verification.abstract.memo import _FORGETTERS, alloc, apply, fence
from slotwarden.verification.abstract.records import Action, Move, Outcome
from slotwarden.verification.abstract.windows import speculating as _speculating
from slotwarden.verification.abstract.policy import Alloc, Fire, Policy
from slotwarden.verification.abstract.world import (
    CANDIDATE,
    CLOSED,
    CLOSING,
    DONE,
    OPEN,
    PENDING,
    RUNNING,
    SESSION_BASE,
    WAITING,
    Request,
    Session,
    Step,
    World,
    cached_ids,
    session_of,
)

# The model's rules:
# - without overlap at most one step is in flight and it completes before anything else
#   happens; with overlap up to two are in flight (the next batch is built while one runs).
# - Time: the scheduler fences whatever the device has finished after every action (a release
#   while nothing is in flight is free at once). Epochs are kept relative to the last completed
#   step (`completed` is always 0 in a stored world): shifting every epoch by the same amount
#   changes nothing the lifecycle can see, since it only compares epochs, and it keeps the state
#   space finite.
# - A request finishes any time after it has been in one completed step. Any request not done
#   can be aborted: a PENDING turn is one queued behind its session's turn in flight (or not yet
#   sent); it becomes DONE, and so do the session's queued turns when it closes.
# - The prefix cache (`Bounds.nodes` > 0): a request taking a fresh slot may instead match a
#   published node (`match`: a fresh slot and a lock on the cached one, as `Request.src`); its
#   first launched step performs the copy (`Step.copies`) and the lock is let go at that step's
#   fence. A request leaving before then lets go at once. A plain request that may finish may
#   donate its slot to a new node instead (`donate`), published at the fence of the step in
#   flight; the cache may evict any unlocked node at any time (`evict`: a CACHING one is an
#   aborted write, dropped unread).
# - Any running request can be retracted (the runtime retracts for a slot or for a seat in the
#   running batch, which this model does not count): it waits again, holding nothing. A session
#   turn keeps its place as its session's turn in flight; its lent slot goes back to the session
#   (LENT_RUNNING --RETRACT--> PARKED) and is lent to it again when it is taken again.
# - Speculative windows (`Bounds.drafts` > 0, `windows.py`): a launch verifies the DRAFT window
#   of each request it runs, and runs no request whose window awaits its commit or rollback.


_new = tuple.__new__  # a record built from its values, without `_replace`'s keyword parsing
_AT = {rec: {f: i for i, f in enumerate(rec._fields)} for rec in (Request, Session)}


def _renewed(rec, changes: dict):
    """`rec._replace(**changes)`, faster (the search's hottest record update)."""
    values = list(rec)
    at = _AT[type(rec)]
    for name, v in changes.items():
        values[at[name]] = v
    return _new(type(rec), values)


class _Txn:
    """The next world under construction during one action. The sessions and the steps stay the
    world's tuples until an action changes them (`set_session`, `leave_steps`, launch, complete)."""

    def __init__(self, world: World, policy: Policy):
        self.world = world
        self.policy = policy
        self.pool = world.pool
        self.requests = list(world.requests)
        self.sessions = world.sessions  # the world's own until `set_session` copies them
        self._sessions_copied = False
        self.steps = world.steps
        self.launched = world.launched
        self.completed = world.completed
        self.windows = world.windows
        self.behind = world.behind
        self.moves: list = []
        self.epoch = None  # the policy's `release_epoch`, asked when a decision needs it

    def fire(self, plan) -> tuple | None:
        """Apply the decisions in order; return the slot ids they named (None: an Alloc found
        too few free slots, the action is not enabled)."""
        named: list = []
        moves = self.moves
        for d in plan:
            before = self.pool
            if isinstance(d, Alloc):
                got = alloc(before, d.n, d.actor)
                if got is None:
                    return None
                after, ids = got
                event, actor = Event.ALLOC, d.actor
            else:
                epoch = d.epoch
                if epoch is None:
                    epoch = self.epoch
                    if epoch is None:
                        epoch = self.epoch = self.policy.release_epoch(self.world)
                ids, event, actor = d.ids, d.event, d.actor
                after = apply(before, event, ids, actor, d.target, epoch)
            b, a = before.slots, after.slots
            for i in ids:
                moves.append(_new(Move, (i, b[i - 1], event, actor, a[i - 1])))
            named.extend(ids)
            self.pool = after
        return tuple(named)

    def set_request(self, rid: int, **changes) -> Request:
        self.requests[rid] = r = _renewed(self.requests[rid], changes)
        return r

    def put_request(self, r: Request) -> None:
        """Replace the request with id `r.id` by `r` (a record built whole by the action)."""
        self.requests[r[0]] = r

    def session(self, sid: int) -> Session:
        return self.sessions[sid - SESSION_BASE]

    def set_session(self, sid: int, **changes) -> Session:
        if not self._sessions_copied:  # never written into the world's own (a caller's list)
            self.sessions, self._sessions_copied = list(self.sessions), True
        self.sessions[sid - SESSION_BASE] = s = _renewed(self.sessions[sid - SESSION_BASE], changes)
        return s

    def drop_window(self, rid: int) -> None:
        """The request no longer believes it holds a window, nor that its state is behind."""
        if self.windows:
            self.windows = frozenset(p for p in self.windows if p[0] != rid)
        if rid in self.behind:
            self.behind = self.behind - {rid}

    def leave_steps(self, rid: int) -> None:
        """The request stopped running: no step in flight advances it any more."""
        for st in self.steps:
            if rid in st.requests:
                break
        else:
            return
        self.steps = tuple(
            _new(Step, (st.epoch, st.slots, st.requests - {rid}, st.copies)) if rid in st.requests else st
            for st in self.steps
        )

    def turn_over(self, sid: int, turn: int | None) -> None:
        """The session's turn in flight is now `turn`; with none left, a deferred close runs."""
        s = self.set_session(sid, turn=turn)
        if turn is None and s.status == CLOSING:
            self.close(s)

    def close(self, s: Session) -> None:
        self.fire(self.policy.close_events(self.world, s))
        self.set_session(s.id, status=CLOSED, handle=None)

    def frozen_world(self) -> World:
        """The world as this action has left it so far (no fence, no normalisation)."""
        w = self.world
        return w._replace(
            pool=self.pool, requests=tuple(self.requests), sessions=tuple(self.sessions), launched=self.launched,
            completed=self.completed, steps=tuple(self.steps), windows=self.windows, behind=self.behind,
        )  # fmt: skip

    def freeze(self) -> World:
        """Fence what the device has finished, normalise epochs, freeze."""
        before = self.pool
        self.pool = fence(before, self.completed)
        if self.pool is not before:
            actor = Actor.fence(self.completed)
            for i, (a, b) in enumerate(zip(before.slots, self.pool.slots)):
                if a != b:
                    self.moves.append(Move(i + 1, a, Event.FENCE, actor, b))
        base = self.completed
        pool, steps = self.pool, tuple(self.steps)
        if base:
            pool = _shifted(pool, base)
            steps = tuple([_new(Step, (st.epoch - base, st.slots, st.requests, st.copies)) for st in steps])
        w = self.world
        values = (pool, tuple(self.requests), tuple(self.sessions), self.launched - base, 0, steps, w.nodes, w.drafts)
        return _new(World, values + (self.windows, self.behind))


def _shifted(pool: Pool, base: int) -> Pool:
    """`pool` with every fenced slot's fence moved `base` steps earlier (memoised: `forget`)."""
    key = (pool, base)
    found = _SHIFTED.get(key)
    if found is None:
        slots = tuple(s._replace(fence=s.fence - base) if s.state in _FENCED else s for s in pool.slots)
        found = _SHIFTED[key] = Pool(slots, pool.free, pool.locks)
    return found


_SHIFTED: dict = {}
_FORGETTERS.append(_SHIFTED.clear)
_FENCED = tuple(spec.state for spec in LIFECYCLE.states if spec.fenced)


# -- the actions: each returns the finished transaction, or None when not enabled -------------
def _submit(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != PENDING:
        return None
    s = session_of(world, r.session)
    if s.status != OPEN or s.turn is not None:
        return None
    if next(i for i in s.turns if world.requests[i].phase == PENDING) != rid:
        return None
    t = _Txn(world, policy)
    t.put_request(_new(Request, (rid, r.session, WAITING, r.handle, r.lent, r.ran, r.src)))
    t.set_session(s.id, turn=rid)
    return t


def _take(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != WAITING:
        return None
    t = _Txn(world, policy)
    plan = policy.take_events(world, r)
    ids = t.fire(plan)
    if ids is None:
        return None
    lent = any(isinstance(d, Fire) and d.event is Event.LEND for d in plan)
    t.put_request(_new(Request, (rid, r.session, CANDIDATE, ids[0] if ids else None, lent, r.ran, r.src)))
    return t


def _match(world: World, rid: int, policy: Policy, slot: int):
    r = world.requests[rid]
    if r.phase != WAITING or not policy.can_match(world, r, slot):
        return None
    if r.session is not None and session_of(world, r.session).handle is not None:
        return None  # a turn runs on its session's slot
    t = _Txn(world, policy)
    ids = t.fire(policy.match_events(world, r, slot))
    if ids is None:
        return None
    t.put_request(_new(Request, (rid, r.session, CANDIDATE, ids[-1], False, r.ran, slot)))  # the fresh slot
    return t


def _admit(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != CANDIDATE:
        return None
    t = _Txn(world, policy)
    t.fire(policy.admit_events(world, r))
    t.put_request(_new(Request, (rid, r.session, RUNNING, r.handle, r.lent, False, r.src)))
    return t


def _rollback(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != CANDIDATE or not policy.can_rollback(world, r):
        return None
    t = _Txn(world, policy)
    t.fire(policy.rollback_events(world, r))
    t.put_request(_new(Request, (rid, r.session, WAITING, None, False, r.ran, None)))
    return t


def _finish(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != RUNNING or not r.ran or _speculating(world, rid):
        return None
    t = _Txn(world, policy)
    plan = policy.finish_events(world, r)
    t.fire(plan)
    handle = None
    for d in plan:
        if isinstance(d, Fire) and d.event is Event.PARK:
            t.set_session(d.target, handle=d.ids[0])
            handle = policy.handle_after_park(world, r, d.ids[0])
    t.put_request(_new(Request, (rid, r.session, DONE, handle, False, False, r.src)))
    t.leave_steps(rid)
    if r.session is not None:
        t.turn_over(r.session, None)
    return t


def _donate(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != RUNNING or not r.ran or _speculating(world, rid) or not policy.can_donate(world, r):
        return None
    if len(cached_ids(world)) >= world.nodes:
        return None
    t = _Txn(world, policy)
    t.fire(policy.donate_events(world, r))
    t.put_request(_new(Request, (rid, r.session, DONE, None, False, False, r.src)))
    t.leave_steps(rid)
    return t


def _evict(world: World, slot: int, policy: Policy):
    if not policy.can_evict(world, slot):
        return None
    t = _Txn(world, policy)
    t.fire(policy.evict_events(world, slot))
    return t


def _retract(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != RUNNING or not policy.can_retract(world, r):
        return None
    t = _Txn(world, policy)
    t.fire(policy.retract_events(world, r))
    t.put_request(_new(Request, (rid, r.session, WAITING, None, False, False, None)))
    t.leave_steps(rid)
    t.drop_window(rid)
    return t


def _abort(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase == DONE:
        return None
    t = _Txn(world, policy)
    t.fire(policy.abort_events(world, r))
    t.put_request(_new(Request, (rid, r.session, DONE, None, False, False, None)))
    t.leave_steps(rid)
    t.drop_window(rid)
    if r.session is not None:
        t.turn_over(r.session, policy.turn_after_abort(world, t.session(r.session), r))
    return t


def _close(world: World, sid: int, policy: Policy):
    s = session_of(world, sid)
    if s.status != OPEN:
        return None
    t = _Txn(world, policy)
    for i in s.turns:  # its turns not yet submitted will never be
        if world.requests[i].phase == PENDING:
            t.set_request(i, phase=DONE)
    if s.turn is None:
        t.close(s)
    else:
        t.set_session(sid, status=CLOSING)
    return t


def _launch(world: World, policy: Policy, overlap: bool):
    if len(world.steps) >= (2 if overlap else 1):
        return None
    if world.windows:
        running = [r for r in world.requests if r.phase == RUNNING and policy.runs_in_step(world, r)]
    else:
        running = [r for r in world.requests if r.phase == RUNNING]
    if not running:
        return None
    t = _Txn(world, policy)
    t.launched = world.launched + 1
    used = frozenset(r.handle for r in running if r.handle is not None)
    if world.windows:
        used |= frozenset(i for rid, i in world.windows if rid in {r.id for r in running})
    copies = frozenset((r.id, r.src) for r in running if r.src is not None)
    for rid, _ in copies:  # the step performs the copy: its fence lets go of the lock
        t.set_request(rid, src=None)
    t.steps = tuple(t.steps) + (Step(t.launched, used, frozenset(r.id for r in running), copies),)
    t.fire(policy.launch_events(t.frozen_world(), copies))
    for r in running if world.windows else ():
        t.fire(policy.verify_events(world, r))
    return t


def _complete(world: World, policy: Policy):
    if not world.steps:
        return None
    t = _Txn(world, policy)
    done, t.steps = t.steps[0], t.steps[1:]
    for rid in sorted(done.requests):
        r = t.requests[rid]
        if policy.requeued_at_fence(world, r):  # never, in the correct scheduler
            t.fire(policy.retract_events(world, r))
            t.set_request(rid, phase=WAITING, handle=None, lent=False, ran=False, src=None)
            t.leave_steps(rid)
        else:
            t.set_request(rid, ran=True)
            if t.windows and any((rid, i) in t.windows for i in done.slots):  # it verified: state in its window
                t.behind = t.behind | {rid}
    for rid, slot in sorted(done.copies):
        t.fire(policy.copy_done_events(world, rid, slot))
    t.completed = done.epoch
    return t


_BY_PHASE = {  # the actions a request may take in each phase, in a fixed order
    PENDING: (("submit", _submit), ("abort", _abort)),
    WAITING: (("take", _take), ("abort", _abort)),
    CANDIDATE: (("admit", _admit), ("rollback", _rollback), ("abort", _abort)),
    RUNNING: (("finish", _finish), ("donate", _donate), ("retract", _retract), ("abort", _abort)),
    DONE: (),
}
_SPECULATIVE = tuple((kind, partial(fn, txn=_Txn)) for kind, fn in windows.ACTIONS)
"""A running request's actions in speculative decoding (`Bounds.drafts` > 0), after `_BY_PHASE`'s."""


def _attempt(kind: str, who: int | None, fn, *args, slot: int | None = None) -> Outcome | None:
    """Run action `fn(*args)`: its outcome, or None when it is not enabled."""
    try:
        t = fn(*args)
        if t is None:
            return None
        world = t.freeze()
    except LifecycleError as e:  # the model refused a move the policy decided on
        return Outcome(Action(kind, who, slot), None, (), e)
    return _new(Outcome, (_new(Action, (kind, who, slot)), world, tuple(t.moves), None))


def successors(world: World, policy: Policy, overlap: bool) -> Iterator[Outcome]:
    """Every enabled action of `world` and its outcome, in a fixed order: each request's (by
    id; a waiting one's matches by cached slot id), the cache's evictions (by slot id),
    launch, complete, each session's close (by id)."""
    if world.steps and not overlap:  # the one step in flight completes before anything else
        out = _attempt("complete", None, _complete, world, policy)
        if out is not None:
            yield out
        return
    cached = cached_ids(world) if world.pool.locks is not None else ()
    published = [i for i in cached if world.pool.slots[i - 1].state is State.CACHED]
    for r in world.requests:
        for kind, fn in _BY_PHASE[r.phase]:
            out = _attempt(kind, r.id, fn, world, r.id, policy)
            if out is not None:
                yield out
        if r.phase == RUNNING and world.drafts:
            for kind, fn in _SPECULATIVE:
                out = _attempt(kind, r.id, fn, world, r.id, policy)
                if out is not None:
                    yield out
        if r.phase == WAITING:
            for i in published:
                out = _attempt("match", r.id, _match, world, r.id, policy, i, slot=i)
                if out is not None:
                    yield out
    for i in cached:
        out = _attempt("evict", None, _evict, world, i, policy, slot=i)
        if out is not None:
            yield out
    out = _attempt("launch", None, _launch, world, policy, overlap)
    if out is not None:
        yield out
    out = _attempt("complete", None, _complete, world, policy)
    if out is not None:
        yield out
    for s in world.sessions:
        if s.status == OPEN:
            out = _attempt("close", s.id, _close, world, s.id, policy)
            if out is not None:
                yield out


ACTIONS = {  # every action by name, for callers that drive the model one action at a time
    "submit": _submit, "take": _take, "admit": _admit, "rollback": _rollback, "finish": _finish,
    "retract": _retract, "abort": _abort, "close": _close, "donate": _donate, **dict(_SPECULATIVE),
}  # fmt: skip


def perform(
    world: World, policy: Policy, kind: str, who: int | None = None, overlap: bool = True, slot: int | None = None
) -> Outcome | None:
    """The outcome of one named action (`launch`, `complete`, `evict` of `slot`, or a request's
    or session's action on `who`; `match` of `who` on cached `slot`), or None when it is not
    enabled."""
    if kind == "match":
        return _attempt(kind, who, _match, world, who, policy, slot, slot=slot)
    if kind == "evict":
        return _attempt(kind, None, _evict, world, slot, policy, slot=slot)
    if kind == "launch":
        return _attempt(kind, None, _launch, world, policy, overlap)
    if kind == "complete":
        return _attempt(kind, None, _complete, world, policy)
    return _attempt(kind, who, ACTIONS[kind], world, who, policy)
