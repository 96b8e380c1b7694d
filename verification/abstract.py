"""The abstract scheduler: requests, streaming sessions and overlapped steps over the model pool.

A pure, finite model of the scheduler that the bounded model checker (`checker.py`) explores
breadth-first. Worlds are immutable and hashable. Every change to a slot goes through the
declared lifecycle (`slotwarden.model.pool.apply / alloc / fence`); nothing here restates a
transition. An `IllegalMove` or `BadSlotId` the model raises during an action is a violation.

Every "which event does the scheduler fire here" decision is a method of `Policy`; the default
`Policy` is the correct scheduler. A mutant (a bug of the SGLang history) subclasses `Policy` and
overrides one method; the checker runs it unchanged.

The workload is fixed by `Bounds`:

- all requests but the last are session turns, dealt session by session, at most `turns` per
  session (session 0 gets requests 0 and 1, session 1 the next two, ...); the last request and
  any surplus are plain. E.g. 3 requests, 1 session: s0 = (r0, r1), r2 plain; 4 requests,
  2 sessions: s0 = (r0, r1), s1 = (r2,), r3 plain. Sessions left without turns only open and close.
- plain requests start WAITING; a session's turns start PENDING and are submitted in order,
  one in flight at a time, while the session is OPEN.
- without overlap at most one step is in flight and it completes before anything else
  happens; with overlap up to two are in flight (the next batch is built while one runs).

Time: the scheduler fences whatever the device has finished after every action (a release
while nothing is in flight is free at once). Epochs are kept relative to the last completed
step (`completed` is always 0 in a stored world): shifting every epoch by the same amount
changes nothing the lifecycle can see, since it only compares epochs, and it keeps the state
space finite.

A request finishes any time after it has been in one completed step. Only submitted requests
(WAITING, CANDIDATE, RUNNING) can be aborted; a PENDING turn is not known to the scheduler yet,
and becomes DONE when its session closes. Only plain requests are retracted, so the lifecycle
rule LENT_RUNNING --RETRACT--> PARKED is the one declared rule no action here fires.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from slotwarden.model import pool as model_pool
from slotwarden.model.errors import LifecycleError
from slotwarden.model.pool import Pool, new_pool
from slotwarden.model.properties import (
    conserved,
    exclusive,
    fence_respected,
    freed_once,
    handles_match,
    no_orphans,
    quiescent,
    session_kept,
)
from slotwarden.model.registry import text, texts
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Slot, State

# -- phases of a request, statuses of a session (plain ints: cheap to hash) --------------------
PENDING, WAITING, CANDIDATE, RUNNING, DONE = range(5)
PHASES = ("PENDING", "WAITING", "CANDIDATE", "RUNNING", "DONE")
OPEN, CLOSING, CLOSED = range(3)
STATUSES = ("OPEN", "CLOSING", "CLOSED")


class Bounds(NamedTuple):
    """The size of the world: slots in the pool, requests, sessions, and overlap on or off."""

    slots: int
    requests: int
    sessions: int
    overlap: bool = False
    turns: int = 2  # at most this many turns per session

    def assignment(self) -> tuple:
        """The session of each request (None: plain), as the module docstring says."""
        n_turns = min(max(self.requests - 1, 0), self.sessions * self.turns)
        return tuple(i // self.turns if i < n_turns else None for i in range(self.requests))

    def __str__(self) -> str:
        return (
            f"slots={self.slots} requests={self.requests} sessions={self.sessions} "
            f"overlap={'on' if self.overlap else 'off'}"
        )


class Request(NamedTuple):
    id: int
    session: int | None  # the session it is a turn of; None: a plain request
    phase: int  # PENDING, WAITING, CANDIDATE, RUNNING, DONE
    handle: int | None = None  # the slot id it believes it holds
    lent: bool = False  # its slot is borrowed from its session
    ran: bool = False  # it has been in a completed step (it may finish)


class Session(NamedTuple):
    id: int
    status: int  # OPEN, CLOSING (close requested while a turn is in flight), CLOSED
    handle: int | None = None  # the slot id it owns
    turn: int | None = None  # the request id of its turn in flight
    turns: tuple = ()  # its requests, in submission order (fixed by the bounds)


class Step(NamedTuple):
    """A step launched on the device and not yet completed."""

    epoch: int
    slots: frozenset  # the slot ids it reads and writes
    requests: frozenset  # the still-running requests whose run it advances


class World(NamedTuple):
    pool: Pool
    requests: tuple  # tuple[Request, ...], indexed by id
    sessions: tuple  # tuple[Session, ...], indexed by id
    launched: int  # the newest launched step (relative to `completed`)
    completed: int  # the newest completed step (always 0 once normalised)
    steps: tuple  # tuple[Step, ...], oldest first: launched, not completed


class Fire(NamedTuple):
    """A decision: fire `event` by `actor` on slots `ids` (with `target` for LEND and PARK)."""

    event: Event
    actor: Actor
    ids: tuple
    target: int = NOBODY


class Alloc(NamedTuple):
    """A decision: `actor` takes `n` slots from the head of the free list (no free slot: the
    action is not enabled)."""

    actor: Actor
    n: int = 1


class Move(NamedTuple):
    """What one slot went through during an action: the checker judges every move."""

    slot_id: int
    before: Slot
    event: Event
    actor: Actor
    after: Slot


class Action(NamedTuple):
    """An action of the abstract scheduler: `kind` on request/session `id` (None: the scheduler)."""

    kind: str
    id: int | None = None

    def __str__(self) -> str:
        if self.id is None:
            return self.kind
        who = "s" if self.kind == "close" else "r"
        return f"{self.kind}({who}{self.id})"


class Outcome(NamedTuple):
    """One enabled action and what it led to: the next world, or the error the model raised."""

    action: Action
    world: World | None
    moves: tuple  # tuple[Move, ...], in the order they happened
    error: LifecycleError | None = None


# -- the scheduler's decisions --------------------------------------------------------------
def req_actor(r: Request) -> Actor:
    return Actor.request(r.id)


def ses_actor(s: Session) -> Actor:
    return Actor.session(s.id)


class Policy:
    """What the scheduler fires at each decision point. The default is the correct scheduler.

    Each `*_events` method returns a tuple of `Fire` / `Alloc` decisions, applied in order;
    `world` is the world before the action, `r`/`s` the current record of the request or
    session concerned. The bookkeeping of phases and handles is the abstract scheduler's;
    the two places where a handle is a decision (`handle_after_park`) are here too.
    A mutant subclasses this and overrides one method.
    """

    name = "correct"

    def release_epoch(self, world: World) -> int:
        """The step whose fence frees a slot released now: the newest launched one, which may
        still use it."""
        return world.launched

    def take_events(self, world: World, r: Request) -> tuple:
        """A WAITING request becomes a candidate: a turn borrows its session's parked slot,
        anything else takes a free one."""
        if r.session is not None:
            s = world.sessions[r.session]
            if s.handle is not None:
                return (Fire(Event.LEND, ses_actor(s), (s.handle,), target=r.id),)
        return (Alloc(req_actor(r), 1),)

    def admit_events(self, world: World, r: Request) -> tuple:
        return (Fire(Event.ADMIT, req_actor(r), (r.handle,)),)

    def rollback_events(self, world: World, r: Request) -> tuple:
        """The candidate did not fit: ROLLBACK gives back what it took, to where it came from
        (a lent slot to its session)."""
        return (Fire(Event.ROLLBACK, req_actor(r), (r.handle,)),)

    def finish_events(self, world: World, r: Request) -> tuple:
        """A plain request or a lent turn finishes (a lent slot goes back to its session); a
        session's fresh turn parks its state in the session."""
        if r.session is not None and not r.lent:
            return (Fire(Event.PARK, req_actor(r), (r.handle,), target=r.session),)
        return (Fire(Event.FINISH, req_actor(r), (r.handle,)),)

    def handle_after_park(self, world: World, r: Request, slot: int) -> int | None:
        """The handle a request keeps after parking `slot` in its session: none."""
        return None

    def can_retract(self, world: World, r: Request) -> bool:
        """Only plain requests are retracted (retracting a turn frees no slot)."""
        return r.session is None

    def retract_events(self, world: World, r: Request) -> tuple:
        return (Fire(Event.RETRACT, req_actor(r), (r.handle,)),)

    def abort_events(self, world: World, r: Request) -> tuple:
        """A waiting request holds nothing; anything else gives back what it holds."""
        if r.phase == WAITING or r.handle is None:
            return ()
        return (Fire(Event.ABORT, req_actor(r), (r.handle,)),)

    def close_events(self, world: World, s: Session) -> tuple:
        """A session closes: it releases exactly the slot it owns, if any."""
        if s.handle is None:
            return ()
        return (Fire(Event.CLOSE, ses_actor(s), (s.handle,)),)


# -- the model's pool operations, memoised (pure functions; the same pools recur in many worlds)
_APPLY: dict = {}
_ALLOC: dict = {}
_FENCE: dict = {}


def apply(pool: Pool, ids: tuple, event: Event, actor: Actor, target: int, epoch: int) -> Pool:
    """`slotwarden.model.pool.apply`, memoised (a refusal is raised again, never cached)."""
    key = (pool, ids, event, actor, target, epoch)
    try:
        return _APPLY[key]
    except KeyError:
        _APPLY[key] = found = model_pool.apply(pool, ids, event, actor, target, epoch)
        return found
    except TypeError:  # an unhashable id: let the model refuse it
        return model_pool.apply(pool, ids, event, actor, target, epoch)


def alloc(pool: Pool, n: int, actor: Actor):
    """`slotwarden.model.pool.alloc`, memoised."""
    key = (pool, n, actor)
    try:
        return _ALLOC[key]
    except KeyError:
        _ALLOC[key] = found = model_pool.alloc(pool, n, actor)
        return found


def fence(pool: Pool, completed: int) -> Pool:
    """`slotwarden.model.pool.fence`, memoised."""
    key = (pool, completed)
    try:
        return _FENCE[key]
    except KeyError:
        _FENCE[key] = found = model_pool.fence(pool, completed)
        return found


def forget() -> None:
    """Drop the memo tables (the checker calls it after each run to give the memory back)."""
    _APPLY.clear()
    _ALLOC.clear()
    _FENCE.clear()
    _MOVE_FAULTS.clear()
    _POOL_FAULTS.clear()
    _HOLDER_FAULTS.clear()


# -- the world -------------------------------------------------------------------------------
def initial(bounds: Bounds) -> World:
    owners = bounds.assignment()
    requests = tuple(Request(i, s, WAITING if s is None else PENDING) for i, s in enumerate(owners))
    sessions = tuple(
        Session(j, OPEN, turns=tuple(i for i, s in enumerate(owners) if s == j)) for j in range(bounds.sessions)
    )
    return World(new_pool(bounds.slots), requests, sessions, 0, 0, ())


def is_final(world: World) -> bool:
    """Every request done, every session closed, no step in flight."""
    return (
        not world.steps
        and all(r.phase == DONE for r in world.requests)
        and all(s.status == CLOSED for s in world.sessions)
    )


class _Txn:
    """The next world under construction during one action."""

    def __init__(self, world: World, policy: Policy):
        self.world = world
        self.policy = policy
        self.pool = world.pool
        self.requests = list(world.requests)
        self.sessions = list(world.sessions)
        self.steps = list(world.steps)
        self.launched = world.launched
        self.completed = world.completed
        self.moves: list = []
        self.epoch = policy.release_epoch(world)

    def fire(self, plan) -> tuple | None:
        """Apply the decisions in order; return the slot ids they named (None: an Alloc found
        too few free slots, the action is not enabled)."""
        named: list = []
        for d in plan:
            before = self.pool
            if isinstance(d, Alloc):
                got = alloc(before, d.n, d.actor)
                if got is None:
                    return None
                after, ids = got
                event, actor = Event.ALLOC, d.actor
            else:
                after = apply(before, d.ids, d.event, d.actor, d.target, self.epoch)
                ids, event, actor = d.ids, d.event, d.actor
            for i in ids:
                self.moves.append(Move(i, before.slots[i - 1], event, actor, after.slots[i - 1]))
            named.extend(ids)
            self.pool = after
        return tuple(named)

    def set_request(self, rid: int, **changes) -> Request:
        self.requests[rid] = r = self.requests[rid]._replace(**changes)
        return r

    def set_session(self, sid: int, **changes) -> Session:
        self.sessions[sid] = s = self.sessions[sid]._replace(**changes)
        return s

    def leave_steps(self, rid: int) -> None:
        """The request stopped running: no step in flight advances it any more."""
        self.steps = [st._replace(requests=st.requests - {rid}) if rid in st.requests else st for st in self.steps]

    def turn_over(self, r: Request) -> None:
        """A session's turn is done: the session has no turn in flight; a deferred close runs now."""
        if r.session is None:
            return
        s = self.set_session(r.session, turn=None)
        if s.status == CLOSING:
            self.close(s)

    def close(self, s: Session) -> None:
        self.fire(self.policy.close_events(self.world, s))
        self.set_session(s.id, status=CLOSED, handle=None)

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
            pool = Pool(
                tuple(s._replace(fence=s.fence - base) if s.state is State.RELEASED else s for s in pool.slots),
                pool.free,
            )
            steps = tuple(st._replace(epoch=st.epoch - base) for st in steps)
        return World(pool, tuple(self.requests), tuple(self.sessions), self.launched - base, 0, steps)


# -- the actions: each returns the finished transaction, or None when not enabled -------------
def _submit(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != PENDING:
        return None
    s = world.sessions[r.session]
    if s.status != OPEN or s.turn is not None:
        return None
    if next(i for i in s.turns if world.requests[i].phase == PENDING) != rid:
        return None
    t = _Txn(world, policy)
    t.set_request(rid, phase=WAITING)
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
    t.set_request(rid, phase=CANDIDATE, handle=ids[0] if ids else None, lent=lent)
    return t


def _admit(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != CANDIDATE:
        return None
    t = _Txn(world, policy)
    t.fire(policy.admit_events(world, r))
    t.set_request(rid, phase=RUNNING, ran=False)
    return t


def _rollback(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != CANDIDATE:
        return None
    t = _Txn(world, policy)
    t.fire(policy.rollback_events(world, r))
    t.set_request(rid, phase=WAITING, handle=None, lent=False)
    return t


def _finish(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != RUNNING or not r.ran:
        return None
    t = _Txn(world, policy)
    plan = policy.finish_events(world, r)
    t.fire(plan)
    handle = None
    for d in plan:
        if isinstance(d, Fire) and d.event is Event.PARK:
            t.set_session(d.target, handle=d.ids[0])
            handle = policy.handle_after_park(world, r, d.ids[0])
    t.set_request(rid, phase=DONE, handle=handle, lent=False, ran=False)
    t.leave_steps(rid)
    t.turn_over(r)
    return t


def _retract(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase != RUNNING or not policy.can_retract(world, r):
        return None
    t = _Txn(world, policy)
    t.fire(policy.retract_events(world, r))
    t.set_request(rid, phase=WAITING, handle=None, lent=False, ran=False)
    t.leave_steps(rid)
    return t


def _abort(world: World, rid: int, policy: Policy):
    r = world.requests[rid]
    if r.phase not in (WAITING, CANDIDATE, RUNNING):
        return None
    t = _Txn(world, policy)
    t.fire(policy.abort_events(world, r))
    t.set_request(rid, phase=DONE, handle=None, lent=False, ran=False)
    t.leave_steps(rid)
    t.turn_over(r)
    return t


def _close(world: World, sid: int, policy: Policy):
    s = world.sessions[sid]
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
    running = [r for r in world.requests if r.phase == RUNNING]
    if not running:
        return None
    t = _Txn(world, policy)
    t.launched = world.launched + 1
    used = frozenset(r.handle for r in running if r.handle is not None)
    t.steps.append(Step(t.launched, used, frozenset(r.id for r in running)))
    return t


def _complete(world: World, policy: Policy):
    if not world.steps:
        return None
    t = _Txn(world, policy)
    done = t.steps.pop(0)
    for rid in done.requests:
        t.set_request(rid, ran=True)
    t.completed = done.epoch
    return t


_BY_PHASE = {  # the actions a request may take in each phase, in a fixed order
    PENDING: (("submit", _submit),),
    WAITING: (("take", _take), ("abort", _abort)),
    CANDIDATE: (("admit", _admit), ("rollback", _rollback), ("abort", _abort)),
    RUNNING: (("finish", _finish), ("retract", _retract), ("abort", _abort)),
    DONE: (),
}


def _attempt(kind: str, who: int | None, fn, *args) -> Outcome | None:
    """Run action `fn(*args)`: its outcome, or None when it is not enabled."""
    try:
        t = fn(*args)
        if t is None:
            return None
        world = t.freeze()
    except LifecycleError as e:  # the model refused a move the policy decided on
        return Outcome(Action(kind, who), None, (), e)
    return Outcome(Action(kind, who), world, tuple(t.moves))


def successors(world: World, policy: Policy, overlap: bool) -> Iterator[Outcome]:
    """Every enabled action of `world` and its outcome, in a fixed order: each request's (by
    id), launch, complete, each session's close (by id)."""
    if world.steps and not overlap:  # the one step in flight completes before anything else
        out = _attempt("complete", None, _complete, world, policy)
        if out is not None:
            yield out
        return
    for r in world.requests:
        for kind, fn in _BY_PHASE[r.phase]:
            out = _attempt(kind, r.id, fn, world, r.id, policy)
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


# -- the properties --------------------------------------------------------------------------
STATE_PROPERTIES = texts(("conserved", "exclusive", "no_orphans", "handles_match", "in_flight_not_free", "quiescent"))
MOVE_PROPERTIES = texts(("legal", "session_kept", "freed_once", "fence_respected"))
PROPERTIES = {**STATE_PROPERTIES, **MOVE_PROPERTIES, "deadlock": text("deadlock")}
"""The properties the checker judges, in the registry's words (`slotwarden.model.registry`)."""


def _handles(world: World) -> dict:
    found = {}
    for r in world.requests:
        found[Actor.request(r.id)] = () if r.handle is None else (r.handle,)
    for s in world.sessions:
        found[Actor.session(s.id)] = () if s.handle is None else (s.handle,)
    return found


def state_fault(world: World) -> tuple[str, str] | None:
    """The first state property `world` breaks, as (name, message), or None."""
    slots = world.pool.slots
    found = _pool_fault(world.pool) or _holder_fault(world)
    if found:
        return found
    for st in world.steps:
        for i in sorted(st.slots):
            if slots[i - 1].state in _NOT_UNDER_A_STEP:
                return "in_flight_not_free", (
                    f"slot {i} is {_show_slot(slots[i - 1])} while a step in flight still uses it "
                    f"(in flight: {len(world.steps)})"
                )
    if is_final(world) and not quiescent(slots):
        return "quiescent", f"everything done and fenced, yet slots {_show_slots(slots)}"
    return None


def _pool_fault(pool: Pool) -> tuple[str, str] | None:
    """Conservation and exclusive ownership: properties of the pool alone (memoised)."""
    try:
        return _POOL_FAULTS[pool]
    except KeyError:
        pass
    slots, free, found = pool.slots, pool.free, None
    if not conserved(slots, free):
        found = "conserved", f"slots {_show_slots(slots)} with free list {free}"
    else:
        for i, s in enumerate(slots):
            if not exclusive(s):
                found = "exclusive", f"slot {i + 1} is {_show_slot(s)}"
                break
    _POOL_FAULTS[pool] = found
    return found


def _holder_fault(world: World) -> tuple[str, str] | None:
    """No orphans and matching handles: the pool against who is alive and what each holds
    (memoised on exactly those)."""
    slots = world.pool.slots
    key = (
        slots,
        tuple(r.handle if r.phase != DONE else -2 - (r.handle or 0) for r in world.requests),
        tuple(s.handle if s.status != CLOSED else -2 - (s.handle or 0) for s in world.sessions),
    )
    try:
        return _HOLDER_FAULTS[key]
    except KeyError:
        pass
    found = None
    live_r = [r.id for r in world.requests if r.phase != DONE]
    live_s = [s.id for s in world.sessions if s.status != CLOSED]
    handles = _handles(world)
    if not no_orphans(slots, live_r, live_s):
        found = "no_orphans", f"slots {_show_slots(slots)}; live requests {live_r}, live sessions {live_s}"
    elif not handles_match(slots, handles):
        found = "handles_match", f"slots {_show_slots(slots)}; handles {_show_handles(handles)}"
    _HOLDER_FAULTS[key] = found
    return found


_NOT_UNDER_A_STEP = (State.FREE, State.TAKEN)  # TAKEN: freed under the step and taken again
_POOL_FAULTS: dict = {}
_HOLDER_FAULTS: dict = {}


def move_fault(move: Move) -> tuple[str, str] | None:
    """The first per-transition property `move` breaks, as (name, message), or None."""
    try:
        return _MOVE_FAULTS[move]
    except KeyError:
        pass
    b, e, a, x = move.before, move.event, move.actor, move.after
    found = None
    for name, holds in (
        ("session_kept", lambda: session_kept(b, e, a, x)),
        ("freed_once", lambda: freed_once(b, e, x)),
        ("fence_respected", lambda: fence_respected(b, a, x)),
    ):
        if not holds():
            found = name, f"{e.name} by {a} on slot {move.slot_id}: {_show_slot(b)} -> {_show_slot(x)}"
            break
    _MOVE_FAULTS[move] = found
    return found


_MOVE_FAULTS: dict = {}  # moves repeat across worlds: judge each distinct one once


# -- words -----------------------------------------------------------------------------------
def _show_slot(s: Slot) -> str:
    text = s.state.name
    if s.owner != NOBODY:
        text += f"(owner {s.owner}"
        text += f", lent to r{s.borrower})" if s.borrower != NOBODY else ")"
    elif s.borrower != NOBODY:
        text += f"(lent to r{s.borrower})"
    if s.state is State.RELEASED:
        text += f"(fence +{s.fence})"
    return text


def _show_slots(slots: tuple) -> str:
    return "[" + ", ".join(f"{i + 1}:{_show_slot(s)}" for i, s in enumerate(slots)) + "]"


def _show_handles(handles: dict) -> str:
    parts = []
    for actor, ids in handles.items():
        short = ("r" if actor.kind is ActorKind.REQUEST else "s") + str(actor.id)
        parts.append(f"{short}:{list(ids)}")
    return "{" + ", ".join(parts) + "}"


def show_move(m: Move) -> str:
    if m.actor.kind is ActorKind.SCHEDULER:
        text = f"{m.event.name} slot {m.slot_id}"
    else:
        actor = "r" if m.actor.kind is ActorKind.REQUEST else "s"
        text = f"{m.event.name} slot {m.slot_id} by {actor}{m.actor.id}"
    if m.event is Event.LEND:
        text += f" to r{m.after.borrower}"
    elif m.event is Event.PARK:
        text += f" into s{m.after.owner}"
    return text + f" ({m.before.state.name}->{m.after.state.name})"


def describe(outcome: Outcome) -> str:
    """One line of a trace: the action and every slot move it made (or the model's refusal)."""
    text = str(outcome.action)
    if outcome.error is not None:
        return f"{text}: REFUSED by the model: {outcome.error}"
    if outcome.moves:
        text += ": " + "; ".join(show_move(m) for m in outcome.moves)
    return text


def show_world(world: World) -> str:
    reqs = ", ".join(
        f"r{r.id}{'' if r.session is None else f'@s{r.session}'}:{PHASES[r.phase]}"
        + ("" if r.handle is None else f"[{r.handle}{'L' if r.lent else ''}]")
        for r in world.requests
    )
    sess = ", ".join(
        f"s{s.id}:{STATUSES[s.status]}" + ("" if s.handle is None else f"[{s.handle}]") for s in world.sessions
    )
    return f"pool {_show_slots(world.pool.slots)} free {world.pool.free}; {reqs}; {sess}; in flight {len(world.steps)}"
