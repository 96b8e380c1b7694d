"""A Hypothesis machine that throws junk at every public entry point and checks the error
contract: each call succeeds or raises a typed error (a `LifecycleError`), and a call that
raised changed nothing.

- `BadInputMachine`: a `StatePool` (its ledger called directly too) and an engine allocator
  behind a `LedgerGuard`, given junk arguments (wrong types, out-of-range and duplicate ids, junk
  events and actors, NaN, huge ints, strings, None, 2-D, non-contiguous, bool and float tensors)
  between legal moves. On an error the ledger, the state tensors, the recorder and the engine's
  free list are as they were; on success both audits pass and the engine's free list is the
  guard's FREE set.
- `SchedulerBadInputMachine`: junk prompts, token counts, session and request ids at the
  scheduler's `submit`, `abort` and `close_session`, between legal submits and steps; an error
  (a refusal at the door) changed no request, session, queue or slot.
`TestX = Machine.TestCase` binds one in a test; `slotwarden verify` runs both as a stage.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from slotwarden.model.errors import LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, State
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.free_list import FreeList as TensorFreeList
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.scheduler.errors import BadRequest, SessionClosed, UnknownRequest, UnknownSession
from slotwarden.runtime.scheduler.shapes import pool_config
from slotwarden.verification.machines import paths
from slotwarden.verification.machines.shared import MODEL

# -- junk --------------------------------------------------------------------------------------
small = st.integers(-2, 6)
huge = st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64, -(2**63), 2**70])
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, 1.0, 1.5, -0.0]))
tensors = st.one_of(
    st.lists(small, max_size=4).map(lambda v: torch.tensor(v, dtype=torch.int64)),
    st.lists(small, min_size=1, max_size=3).map(lambda v: torch.tensor([v, v])),  # 2-D
    st.lists(small, min_size=2, max_size=6).map(lambda v: torch.tensor(v)[::2]),  # non-contiguous
    st.lists(st.booleans(), max_size=3).map(lambda v: torch.tensor(v, dtype=torch.bool)),
    st.lists(floats, min_size=1, max_size=3).map(lambda v: torch.tensor(v, dtype=torch.float32)),
    st.lists(small, min_size=1, max_size=3).map(lambda v: torch.tensor(v, dtype=torch.uint8)),
    small.map(torch.tensor),  # 0-d
)
arrays = st.one_of(
    st.lists(small, min_size=1, max_size=4).map(lambda v: np.array(v)[::-1]),  # negative strides
    st.just(np.array([2**63, 1], dtype=np.uint64)),
    st.lists(floats, min_size=1, max_size=3).map(np.array),
    st.lists(small, min_size=1, max_size=2).map(lambda v: np.array([v])),
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    small,
    huge,
    floats,
    st.text(max_size=3),
    st.binary(max_size=2),
    st.lists(st.one_of(small, st.booleans(), floats, st.none()), max_size=4),
    st.lists(small, max_size=3).map(tuple),
    st.lists(small, max_size=3).map(set),
    st.just([1, [2, 3]]),
    st.just({1: 2}),
    st.builds(object),
    tensors,
    arrays,
)
good_ids = st.lists(st.integers(1, 4), min_size=1, max_size=3)
good_actors = st.builds(Actor, st.sampled_from(list(ActorKind)), st.integers(0, 3))
junk_actors = st.one_of(
    st.builds(Actor, st.one_of(small, junk), st.integers(0, 3)),
    st.builds(Actor, st.sampled_from(list(ActorKind)), st.one_of(small, huge, floats, junk)),
    junk,
)
# each argument: what a call may legally take (events also as their number), and junk for it
GOOD = dict(
    event=st.one_of(st.sampled_from(list(Event)), st.integers(0, len(Event) - 1)),
    ids=st.one_of(good_ids, good_ids.map(torch.tensor), good_ids.map(np.array)),
    actor=good_actors,
    to=st.sampled_from([NOBODY, 0, 1, 2, 3]),
    n=st.integers(1, 3),
    step=st.one_of(st.none(), st.integers(0, 3)),
    slot=st.integers(1, 4),
    done=st.none(),
    limit=st.integers(0, 3),
    live=st.one_of(st.none(), st.lists(st.integers(0, 3), max_size=3).map(set)),
)
JUNK = dict(
    event=st.one_of(st.integers(-2, 12), huge, junk),
    ids=junk,
    actor=junk_actors,
    to=junk,
    n=junk,
    step=junk,
    slot=junk,
    done=junk.filter(lambda v: not callable(v)),
    limit=junk,
    live=junk,
)


def arguments(data, *names):
    """Values for `names`: all legal, one of them junk, or (now and then) all junk."""
    mode = data.draw(st.sampled_from(["good", "one", "one", "one", "all"]))
    bad = data.draw(st.sampled_from(names)) if mode == "one" else None
    return [data.draw(JUNK[n] if mode == "all" or n == bad else GOOD[n]) for n in names]


NAMED = ("admit", "rollback", "finish", "retract", "abort")


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


class BadInputMachine(RuleBasedStateMachine):
    """Junk and legal moves at a pool, its ledger and a guard; the error contract after each."""

    @initialize(capacity=st.integers(1, 4), small=st.integers(0, 5), batch=st.sampled_from(paths.PATHS[1:]))
    def setup(self, capacity, small, batch):
        self.pool = StatePool(pool_config(MODEL, capacity))
        self.engine = TensorFreeList(capacity)
        self.guard = LedgerGuard(self.engine, capacity)
        # the ledgers' batch path, and their switch-over batch size, on both sides of every
        # batch size drawn here
        for ledger in (self.pool.ledger, self.guard.ledger):
            paths.use(ledger, batch)
            ledger.small = small

    # -- the contract ----------------------------------------------------------------------------
    def snapshot(self):
        led, gled = self.pool.ledger, self.guard.ledger
        return (
            led.snapshot(),
            [t.clone() for t in self.pool.tensors],
            led.recorder.seq,
            gled.snapshot(),
            self.engine.free_slots.clone(),
            gled.recorder.seq,
        )

    def call(self, what: str, thunk) -> None:
        before = self.snapshot()
        try:
            thunk()
        except LifecycleError as err:
            assert _same(before, self.snapshot()), f"{what} raised {err!r} and changed the pool, ledger or engine"
            return
        except Exception as err:  # noqa: BLE001 - the contract: typed errors only
            raise AssertionError(f"{what} raised an untyped {type(err).__name__}: {err}") from err
        self.consistent(what)

    def consistent(self, what: str) -> None:
        for name, ledger in (("pool", self.pool.ledger), ("guard", self.guard.ledger)):
            audit = ledger.audit()
            assert audit.free_list_ok and not audit.problems, f"after {what}, the {name}'s audit: {audit.problems}"
        engine = sorted(self.engine.free_slots.tolist())
        free = (np.flatnonzero(self.guard.ledger.cols.state[1:] == int(State.FREE)) + 1).tolist()
        assert engine == free, f"after {what}, the engine's free list {engine} is not the guard's FREE set {free}"

    # -- legal moves: the slots reach every state -------------------------------------------------
    @rule(data=st.data(), times=st.integers(1, 12))
    def legal_moves(self, data, times):
        """A few moves the lifecycle allows, on the pool or the guard: an alloc, a held slot
        moved by its owner or borrower, a launch and a fence."""
        for _ in range(times):
            where = data.draw(st.sampled_from(["pool", "guard"]))
            front = self.pool if where == "pool" else self.guard
            ledger = front.ledger
            held = (np.flatnonzero(ledger.cols.state[1:] != int(State.FREE)) + 1).tolist()
            move = data.draw(st.sampled_from(["alloc", "step"] + ["fire"] * 4 if held else ["alloc", "step"]))
            if move == "alloc":
                n, rid = data.draw(st.integers(1, 2)), data.draw(st.integers(0, 3))
                self.call("alloc", lambda: front.alloc(n, Actor.request(rid)))
            elif move == "step":
                back = data.draw(st.integers(0, 1))
                self.call("launch", front.launch)
                self.call("fence", lambda: front.fence(max(0, ledger.launched - back)))
            else:
                self.legal_fire(front, data.draw(st.sampled_from(held)), data)

    def legal_fire(self, front, slot: int, data) -> None:
        rec = front.ledger.record(slot)
        ruled = sorted({r.event for r in LIFECYCLE.rules_from(rec.state)} - {Event.ALLOC, Event.FENCE})
        if not ruled:
            return
        deeper = [e for e in ruled if e in (Event.ADMIT, Event.PARK, Event.LEND)]  # towards the rarer states
        event = data.draw(st.sampled_from(ruled + deeper * 2))
        kind = LIFECYCLE.event(event).actor
        claims = [Actor(kind, rec.owner)] if rec.owner != NOBODY else []
        claims += [Actor.request(rec.borrower)] if rec.borrower != NOBODY and kind is ActorKind.REQUEST else []
        actor = data.draw(st.sampled_from(claims or [Actor(kind, 0)]))
        to = data.draw(st.integers(0, 3))
        if front is self.pool:
            self.call("a legal fire", lambda: self.pool.fire(event, [slot], actor, to))
        else:
            self.call("a legal fire", lambda: self.guard.fire(event, torch.tensor([slot]), actor, to))

    # -- the pool ----------------------------------------------------------------------------------
    @rule(data=st.data())
    def pool_alloc(self, data):
        n, actor = arguments(data, "n", "actor")
        self.call(f"pool.alloc({n!r}, {actor!r})", lambda: self.pool.alloc(n, actor))

    @rule(data=st.data())
    def pool_fire(self, data):
        event, ids, actor, to = arguments(data, "event", "ids", "actor", "to")
        self.call(f"pool.fire({event!r}, {ids!r}, {actor!r}, {to!r})", lambda: self.pool.fire(event, ids, actor, to))

    @rule(data=st.data(), name=st.sampled_from(NAMED))
    def pool_named(self, data, name):
        ids, actor = arguments(data, "ids", "actor")
        self.call(f"pool.{name}({ids!r}, {actor!r})", lambda: getattr(self.pool, name)(ids, actor))

    @rule(data=st.data(), name=st.sampled_from(["park", "lend"]))
    def pool_with_target(self, data, name):
        ids, actor, to = arguments(data, "ids", "actor", "to")
        self.call(f"pool.{name}({ids!r}, {actor!r}, {to!r})", lambda: getattr(self.pool, name)(ids, actor, to))

    @rule(data=st.data())
    def pool_close(self, data):
        (actor,) = arguments(data, "actor")
        self.call(f"pool.close({actor!r})", lambda: self.pool.close(actor))

    @rule(data=st.data())
    def pool_launch_and_fence(self, data):
        done, step = arguments(data, "done", "step")
        self.call(f"pool.launch({done!r})", lambda: self.pool.launch(done))
        self.call(f"pool.fence({step!r})", lambda: self.pool.fence(step))

    @rule(data=st.data())
    def pool_copy(self, data):
        src, dst, actor = arguments(data, "ids", "ids", "actor")
        self.call(f"pool.copy({src!r}, {dst!r}, {actor!r})", lambda: self.pool.copy(src, dst, actor))

    @rule(data=st.data())
    def pool_zero(self, data):
        ids, actor = arguments(data, "ids", "actor")
        self.call(f"pool.zero({ids!r}, {actor!r})", lambda: self.pool.zero(ids, actor))

    @rule(data=st.data())
    def pool_fork(self, data):
        src, actor = arguments(data, "slot", "actor")
        self.call(f"pool.fork({src!r}, {actor!r})", lambda: self.pool.fork(src, actor))

    @rule(data=st.data())
    def pool_queries(self, data):
        p = self.pool
        ids, actor, slot, limit, live = arguments(data, "ids", "actor", "slot", "limit", "live")
        self.call(f"pool.state_of({ids!r})", lambda: p.state_of(ids))
        self.call(f"pool.held_by({actor!r})", lambda: p.held_by(actor))
        self.call(f"pool.history({slot!r}, {limit!r})", lambda: p.history(slot, limit))
        self.call(f"pool.on_device({ids!r})", lambda: p.on_device(ids))
        self.call(f"pool.audit({live!r}, {live!r})", lambda: p.audit(live, live))
        self.call("pool.available()", p.available)

    # -- the ledger, directly ----------------------------------------------------------------------
    @rule(data=st.data())
    def ledger_calls(self, data):
        led = self.pool.ledger
        n, actor, event, ids, to, slot, step = arguments(data, "n", "actor", "event", "ids", "to", "slot", "step")
        self.call(f"ledger.alloc({n!r}, {actor!r})", lambda: led.alloc(n, actor))
        self.call(f"ledger.apply({event!r}, {ids!r}, {actor!r}, {to!r})", lambda: led.apply(event, ids, actor, to))
        self.call(f"ledger.record({slot!r})", lambda: led.record(slot))
        self.call(f"ledger.state_of({ids!r})", lambda: led.state_of(ids))
        self.call(f"ledger.fence({step!r})", lambda: led.fence(step))

    # -- the guard ---------------------------------------------------------------------------------
    @rule(data=st.data())
    def guard_alloc(self, data):
        n, actor = arguments(data, "n", "actor")
        self.call(f"guard.alloc({n!r}, {actor!r})", lambda: self.guard.alloc(n, actor))

    @rule(data=st.data())
    def guard_fire(self, data):
        event, ids, actor, to = arguments(data, "event", "ids", "actor", "to")
        self.call(f"guard.fire({event!r}, {ids!r}, {actor!r}, {to!r})", lambda: self.guard.fire(event, ids, actor, to))

    @rule(data=st.data())
    def guard_launch_and_fence(self, data):
        done, step = arguments(data, "done", "step")
        self.call(f"guard.launch({done!r})", lambda: self.guard.launch(done))
        self.call(f"guard.fence({step!r})", lambda: self.guard.fence(step))


# -- the scheduler's edge ------------------------------------------------------------------------
prompts = st.one_of(
    st.lists(st.integers(0, 63), min_size=1, max_size=4), junk, st.lists(st.integers(-5, 100), max_size=3)
)
token_counts = st.one_of(st.integers(1, 3), junk)
request_ids = st.one_of(st.integers(-1, 8), junk)


class SchedulerBadInputMachine(RuleBasedStateMachine):
    """Junk at the scheduler's user-facing calls, between legal submits and steps."""

    scheduler_errors: tuple = (
        LifecycleError,
        BadRequest,
        UnknownRequest,
        UnknownSession,
        SessionClosed,
    )  # refusals at the door

    @initialize(slots=st.integers(1, 3), overlap=st.booleans())
    def setup(self, slots, overlap):
        self.sched = build(MODEL, slots=slots, overlap=overlap, token_budget=8, chunk_size=4)

    def snapshot(self):
        s = self.sched
        return (
            s.pool.ledger.snapshot(),
            sorted(s.requests),
            sorted((k, v.status) for k, v in s.sessions.items()),
            [r.rid for r in s.waiting],
            [r.rid for r in s.running],
            {k: (r.phase, len(r.output)) for k, r in s.requests.items()},
        )

    def call(self, what: str, thunk) -> None:
        before = self.snapshot()
        try:
            thunk()
        except self.scheduler_errors as err:
            assert _same(before, self.snapshot()), f"{what} raised {err!r} and changed the scheduler"
        except Exception as err:  # noqa: BLE001
            raise AssertionError(f"{what} raised an untyped {type(err).__name__}: {err}") from err

    @rule(prompt=prompts, new=token_counts, session=st.one_of(st.none(), request_ids))
    def submit(self, prompt, new, session):
        self.call(
            f"submit({prompt!r}, {new!r}, session={session!r})", lambda: self.sched.submit(prompt, new, session=session)
        )

    @rule(rid=request_ids)
    def abort(self, rid):
        self.call(f"abort({rid!r})", lambda: self.sched.abort(rid))

    @rule(sid=request_ids)
    def close_session(self, sid):
        self.call(f"close_session({sid!r})", lambda: self.sched.close_session(sid))

    @rule()
    def open_session(self):
        self.sched.open_session()

    @precondition(lambda self: hasattr(self, "sched"))
    @rule(times=st.integers(1, 3))
    def step(self, times):
        for _ in range(times):
            self.sched.step()
