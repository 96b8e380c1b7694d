"""Stateful Hypothesis machines that ship with the library, so other implementations can be
checked by importing them (test files only say `TestX = Machine.TestCase`).

- `PoolMachine`: every lifecycle event against a pool under test, owners drawn from bundles,
  checked after every step against the pure model (`slotwarden.model.pool`) slot by slot, its
  free list (when the pool exposes one) and the safety predicates; for a pool that holds state,
  copy, fork, zero and step writes too (each reading and writing only what its actor holds),
  against a shadow of every held slot's contents. The pool under test is anything speaking
  `PoolUnderTest`; `StatePoolUnderTest` and `GuardUnderTest` (an engine allocator behind
  `LedgerGuard`) ship.
- `SchedulerMachine`: requests, sessions, turns (one at a time or a burst from every session),
  aborts, closes and steps with random budgets and pool sizes (so candidates get rolled back
  and requests retracted), with and without overlap, each example making a random subset of
  the kinds of move (swarm testing); invariants after every step, the idle audit at teardown.
  `machine_for(cls)` points it at a scheduler subclass (a mutant).
- `CachedSchedulerMachine`: the same with the prefix cache on, follow-ups that share donated
  prefixes and, as a swarm feature, parallel-sampling groups and their aborts.
"""

from __future__ import annotations

from typing import Protocol

import torch
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.model import pool as model_pool
from slotwarden.model.declaration import relation_of
from slotwarden.model.errors import LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.step import step as model_step
from slotwarden.model.properties import conserved, exclusive, locks_match
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Group, Relation, State
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.free_list import FreeList as TensorFreeList
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.scheduler.request import Phase, SessionStatus
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.runtime.scheduler.shapes import pool_config
from slotwarden.verification.machines import paths

MODEL = TinyMamba(TinyMambaConfig(layers=1, d_model=8, heads=1, head_dim=4, dstate=4, dtype=torch.float64))


# -- the pool machine ----------------------------------------------------------------------------
class PoolUnderTest(Protocol):
    """What the pool machine drives. `records()` gives slot ids 1..capacity as model `Slot`s;
    `free_list()` the hand-out order, or None if the implementation does not expose one."""

    capacity: int

    def alloc(self, n: int, actor: Actor): ...

    def fire(self, event: Event, ids, actor: Actor, target: int = NOBODY): ...

    def launch(self) -> int: ...

    def fence(self, step: int): ...

    def records(self) -> tuple: ...

    def free_list(self) -> tuple | None: ...

    # optional, for pools that hold state: the machine checks data movement when present
    # copy(src, dst, actor), zero(ids, actor), fork(src, actor) -> tuple of ids or None,
    # fill(slot, value) (a step writes the slot), values() -> per slot id 1..capacity, the value
    # every element of its state holds (NaN if they differ)


class StatePoolUnderTest:
    reads_cached = names_lockers = hasattr(StatePool, "lock")
    """Whether the pool copies (and forks) from a published cached slot the copying request
    holds a lock on (copy-on-write from the prefix cache; without it an actor reads only the
    slots it holds, never another request's or session's), and keeps who holds each lock (so
    it refuses a second lock by the same request)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.pool = StatePool(pool_config(MODEL, capacity))

    def alloc(self, n, actor):
        ids = self.pool.alloc(n, actor)
        return None if ids is None else tuple(ids.tolist())

    def fire(self, event, ids, actor, target=NOBODY):
        lock_op = getattr(self.pool, _LOCK_OPS.get(event, ""), None)  # a pool that names who locks
        if lock_op is not None:
            lock_op(ids, actor)
        else:
            self.pool.fire(event, ids, actor, target)

    def launch(self):
        return self.pool.launch()

    def fence(self, step):
        self.pool.fence(step)

    def records(self):
        return tuple(self.pool.ledger.record(i) for i in range(1, self.capacity + 1))

    def free_list(self):
        return tuple(self.pool.ledger.free_list().tolist())

    def copy(self, src, dst, actor):
        self.pool.copy(list(src), list(dst), actor)

    def zero(self, ids, actor):
        self.pool.zero(list(ids), actor)

    def fork(self, src, actor):
        ids = self.pool.fork(src, actor)
        return None if ids is None else tuple(ids.tolist())

    def fill(self, slot, value):
        for t in self.pool.tensors:
            t[:, slot] = value

    def values(self):
        """Per slot id 1..capacity, the value every element of its state holds (NaN if they differ)."""
        rows = torch.cat([t.transpose(0, 1).reshape(t.shape[1], -1) for t in self.pool.tensors], dim=1)[1:]
        uniform = (rows == rows[:, :1]).all(dim=1)
        return tuple(torch.where(uniform, rows[:, 0], torch.nan).tolist())


_LOCK_OPS = {Event.LOCK: "lock", Event.UNLOCK: "unlock"}
"""The pool operations that keep the lock record, where the pool has them (`fire` only counts)."""


class GuardUnderTest:
    """An engine's own allocator (FIFO like SGLang's) behind `LedgerGuard`."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.engine = TensorFreeList(capacity)
        self.guard = LedgerGuard(self.engine, capacity)

    def alloc(self, n, actor):
        ids = self.guard.alloc(n, actor)
        return None if ids is None else tuple(ids.tolist())

    def fire(self, event, ids, actor, target=NOBODY):
        self.guard.fire(event, ids, actor, target)

    def launch(self):
        return self.guard.launch()

    def fence(self, step):
        self.guard.fence(step)

    def records(self):
        return tuple(self.guard.ledger.record(i) for i in range(1, self.capacity + 1))

    def free_list(self):
        return tuple(self.engine.free_slots.tolist())


REQUEST_IDS = range(1, 10)
SESSION_IDS = range(1001, 1010)
"""Request and session ids come from disjoint ranges, so an id of one kind used where the other
belongs never matches by accident."""
NODE_IDS = range(2001, 2010)
"""Cache node ids: a third disjoint range."""
RIDS, SIDS, NODES = st.sampled_from(REQUEST_IDS), st.sampled_from(SESSION_IDS), st.sampled_from(NODE_IDS)
EVENTS = st.sampled_from(list(Event))


class PoolMachine(RuleBasedStateMachine):
    """Differential: the pool under test and `model.pool` must agree after every step."""

    under_test = StatePoolUnderTest

    taken = Bundle("taken")  # (slot, request)
    running = Bundle("running")
    parked = Bundle("parked")  # (slot, session)
    lent = Bundle("lent")  # (slot, session, request)
    lent_running = Bundle("lent_running")

    # `path`: the ledger's path for every batch the machine makes (`paths.PATHS`: a slot at a
    # time, the compiled move in runs or slot by slot, numpy); the mixed sizes around the
    # switch-over point are drawn by tests/runtime/test_pool_hypothesis.py, the bad-input machine and
    # tests/runtime/ledger/test_paths.py
    @initialize(capacity=st.integers(1, 5), path=st.sampled_from(paths.PATHS))
    def setup(self, capacity, path):
        self.impl = self.under_test(capacity)
        for owner in (getattr(self.impl, "pool", None), getattr(self.impl, "guard", None)):
            if hasattr(owner, "ledger"):
                paths.use(owner.ledger, path)
        self.model = model_pool.new_pool(capacity, locks=True)  # who holds each lock: locks_match
        self.launched = 0
        self.data = hasattr(self.impl, "copy")  # the pool holds state: check data movement too
        self.shadow: dict[int, float] = {}  # slot -> the value its state must hold while held
        self.tag = 0.0

    def _both(self, model_move, impl_move):
        """Run the move on the model and the implementation: both succeed or both refuse."""
        try:
            expected = model_move()
        except LifecycleError as exc:
            before = self.impl.records()
            try:
                impl_move()
            except LifecycleError:
                assert self.impl.records() == before, "a refused move changed the pool"
                return None
            raise AssertionError(f"the model refuses ({exc}) but the implementation accepted") from None
        result = impl_move()
        self.model = (
            expected if not isinstance(expected, tuple) or isinstance(expected, model_pool.Pool) else expected[0]
        )
        return result

    @rule(target=taken, n=st.integers(1, 3), rid=RIDS)
    def alloc(self, n, rid):
        actor = Actor.request(rid)
        got_model = model_pool.alloc(self.model, n, actor)
        got = self.impl.alloc(n, actor)
        assert (got is None) == (got_model is None)
        if got is None:
            return multiple()
        self.model = got_model[0]
        self.shadow.update((s, 0.0) for s in got)  # alloc zeroes what it hands out
        return multiple(*[(s, rid) for s in got])

    @rule(target=running, held=consumes(taken))
    def admit(self, held):
        slot, rid = held
        self._fire(Event.ADMIT, (slot,), Actor.request(rid))
        return held

    @rule(held=consumes(taken), event=st.sampled_from([Event.ROLLBACK, Event.ABORT]))
    def give_back_candidate(self, held, event):
        self._fire(event, (held[0],), Actor.request(held[1]))

    @rule(held=consumes(running), event=st.sampled_from([Event.FINISH, Event.RETRACT, Event.ABORT]))
    def release(self, held, event):
        self._fire(event, (held[0],), Actor.request(held[1]))

    @rule(target=parked, held=consumes(running), sid=SIDS)
    def park(self, held, sid):
        self._fire(Event.PARK, (held[0],), Actor.request(held[1]), sid)
        return (held[0], sid)

    @rule(target=lent, held=consumes(parked), rid=RIDS)
    def lend(self, held, rid):
        self._fire(Event.LEND, (held[0],), Actor.session(held[1]), rid)
        return (held[0], held[1], rid)

    @rule(target=lent_running, held=consumes(lent))
    def admit_lent(self, held):
        self._fire(Event.ADMIT, (held[0],), Actor.request(held[2]))
        return held

    @rule(target=parked, held=consumes(lent), event=st.sampled_from([Event.ROLLBACK, Event.ABORT]))
    def give_back_lent(self, held, event):
        self._fire(event, (held[0],), Actor.request(held[2]))
        return (held[0], held[1])

    @rule(target=parked, held=consumes(lent_running), event=st.sampled_from([Event.FINISH, Event.RETRACT, Event.ABORT]))
    def end_turn(self, held, event):
        self._fire(event, (held[0],), Actor.request(held[2]))
        return (held[0], held[1])

    @rule(held=consumes(parked))
    def close(self, held):
        self._fire(Event.CLOSE, (held[0],), Actor.session(held[1]))

    # -- the prefix cache: insert, publish (at the fence), lock, unlock, evict ---------------------
    @rule(held=consumes(running), node=NODES)
    def insert(self, held, node):
        """The request donates its slot to a tree node; published at the fence of the step in flight."""
        self._fire(Event.INSERT, (held[0],), Actor.request(held[1]), node)

    @rule(rid=RIDS, node=NODES)
    def donate(self, rid, node):
        """A short request's whole life, ending in a donation: it takes a free slot, runs and
        inserts it into the tree (so that the cache rules below meet cached slots often)."""
        actor = Actor.request(rid)
        got_model = model_pool.alloc(self.model, 1, actor)
        got = self.impl.alloc(1, actor)
        assert (got is None) == (got_model is None)
        if got is None:
            return
        assert got == got_model[1], f"alloc took {got}, the model's free list gives {got_model[1]}"
        self.model, (slot,) = got_model
        self.shadow[slot] = 0.0
        self._fire(Event.ADMIT, (slot,), actor)
        self._fire(Event.INSERT, (slot,), actor, node)

    def _cached(self, published: bool) -> list:
        want = (State.CACHED,) if published else (State.CACHING, State.CACHED)
        return [i + 1 for i, s in enumerate(self.model.slots) if s.state in want]

    @precondition(lambda self: any(s.state is State.CACHED for s in self.model.slots))
    @rule(data=st.data(), rid=RIDS)
    def lock(self, data, rid):
        """A request locks a published slot to copy from it (a lock on a slot nobody published
        is refused by both, and so is a second lock by the same request where the pool under
        test names who holds its locks; one that only counts them is not asked)."""
        slot = data.draw(st.sampled_from(self._cached(True) + [1]), label="slot")
        if (rid, slot) not in self.model.locks or getattr(self.impl, "names_lockers", False):
            self._fire(Event.LOCK, (slot,), Actor.request(rid))

    @precondition(lambda self: bool(self.model.locks))
    @rule(data=st.data())
    def unlock(self, data):
        """A request that holds a lock lets go of it (its copy's step is fenced)."""
        rid, slot = data.draw(st.sampled_from(self.model.locks), label="lock")
        self._fire(Event.UNLOCK, (slot,), Actor.request(rid))

    @precondition(lambda self: any(LIFECYCLE.spec(s.state).owner is ActorKind.CACHE for s in self.model.slots))
    @rule(data=st.data())
    def evict(self, data):
        """The slot's node drops it: legal only while nobody holds a lock on it (both refuse otherwise)."""
        slot = data.draw(st.sampled_from(self._cached(False)), label="slot")
        self._fire(Event.EVICT, (slot,), Actor.cache(self.model.slots[slot - 1].owner))

    @rule()
    def launch(self):
        self.launched = self.impl.launch()

    @rule(back=st.integers(0, 2))
    def fence(self, back):
        step = max(0, self.launched - back)
        self.impl.fence(step)
        self.model = model_pool.fence(self.model, step)

    @rule(
        ids=st.lists(st.integers(-1, 7), max_size=3),
        event=EVENTS.filter(lambda e: e not in (Event.ALLOC, Event.LOCK, Event.UNLOCK)),
        kind=st.sampled_from(list(ActorKind)),
        who=st.one_of(RIDS, SIDS),
        to=st.sampled_from([NOBODY, 1, 2, 1001]),
    )
    def anything(self, ids, event, kind, who, to):
        """Arbitrary moves, mostly illegal: both refuse, or both agree. (Locks and unlocks are
        drawn by `lock` / `unlock`: the pool under test counts locks, the model also records
        whose they are.)"""
        actor = Actor(kind, who)
        if event is Event.FENCE:
            return
        self._both(
            lambda: model_pool.apply(self.model, event, tuple(ids), actor, to, self.launched),
            lambda: self.impl.fire(event, ids, actor, to),
        )

    @rule(data=st.data())
    def repeat(self, data):
        """A move its slot's holder may make, with the slot named twice in the batch: refused."""
        held = [i + 1 for i, s in enumerate(self.model.slots) if s.owner != NOBODY]
        if not held:
            return
        slot = data.draw(st.sampled_from(held), label="slot")
        record = self.model.slots[slot - 1]
        actors = [
            Actor(k, who)
            for k in (ActorKind.REQUEST, ActorKind.SESSION)
            for who in (record.owner, record.borrower)
            if who != NOBODY
        ]
        moves = [
            (e, a, t)
            for a in actors
            for e in Event
            if e not in (Event.ALLOC, Event.FENCE)
            for t in (NOBODY, 5, 1005)
            if _legal(record, e, a, t)
        ]
        if not moves:
            return
        event, actor, target = data.draw(st.sampled_from(moves), label="move")
        self._both(
            lambda: model_pool.apply(self.model, event, (slot, slot), actor, target, self.launched),
            lambda: self.impl.fire(event, [slot, slot], actor, target),
        )

    # -- data movement (pools that hold state) ---------------------------------------------------
    def _held(self) -> list:
        """The slots a request or a session holds: the ones steps write and copies read. A
        cache-owned slot is neither (its state stays as donated: the shadow checks it)."""
        return [i + 1 for i, s in enumerate(self.model.slots) if self._is_held(i + 1)]

    def _holder(self, slot: int) -> Actor:
        """Who may write into `slot`: the request it is lent to, else its owner."""
        s = self.model.slots[slot - 1]
        if s.borrower != NOBODY:
            return Actor.request(s.borrower)
        return Actor(LIFECYCLE.spec(s.state).owner, s.owner)

    def _some_actor(self, data, slot: int) -> Actor:
        """Mostly the slot's holder, sometimes anybody (a copy into someone else's slot)."""
        if self._is_held(slot) and data.draw(st.integers(0, 3), label="holder?"):
            return self._holder(slot)
        return Actor(
            data.draw(st.sampled_from([ActorKind.REQUEST, ActorKind.SESSION])), data.draw(st.one_of(RIDS, SIDS))
        )

    def _some_source(self, data, actor: Actor) -> int:
        """Mostly a slot `actor` holds (a legal source), sometimes any slot (someone else's)."""
        mine = [slot for slot in self._held() if self._holds(actor, slot)]
        if mine and data.draw(st.integers(0, 2), label="own source?"):
            return data.draw(st.sampled_from(mine), label="source")
        return self._some_slot(data)

    def _some_slot(self, data) -> int:
        held = self._held()
        if held and data.draw(st.integers(0, 3), label="held?"):
            return data.draw(st.sampled_from(held), label="slot")
        return data.draw(st.integers(1, self.model.slots.__len__()), label="any slot")

    def _data_move(self, allowed: bool, move, effect) -> None:
        """`move` must succeed iff `allowed`; a refused one changes neither records nor data."""
        before = (self.impl.records(), self.impl.values())
        try:
            result = move()
        except LifecycleError as exc:
            assert not allowed, f"a legal data move was refused: {exc}"
            after = (self.impl.records(), self.impl.values())
            assert _same_repr(after, before), "a refused data move changed the pool"
            return
        assert allowed, "a data move the lifecycle forbids was accepted"
        effect(result)

    @precondition(lambda self: getattr(self, "data", False))
    @rule()
    def fill(self):
        """A step writes the state of every held slot (each a value of its own)."""
        for slot in self._held():
            self.tag += 1.0
            self.impl.fill(slot, self.tag)
            self.shadow[slot] = self.tag

    @precondition(lambda self: getattr(self, "data", False))
    @rule(data=st.data())
    def copy(self, data):
        dst = self._some_slot(data)
        actor = self._some_actor(data, dst)
        src = self._some_source(data, actor)
        allowed = src != dst and self._readable(src, actor) and self._holds(actor, dst)
        self._data_move(
            allowed,
            lambda: self.impl.copy((src,), (dst,), actor),
            lambda _: self.shadow.__setitem__(dst, self.shadow[src]),
        )

    @precondition(lambda self: getattr(self, "data", False))
    @rule(data=st.data())
    def zero(self, data):
        slot = self._some_slot(data)
        actor = self._some_actor(data, slot)
        self._data_move(
            self._holds(actor, slot),
            lambda: self.impl.zero((slot,), actor),
            lambda _: self.shadow.__setitem__(slot, 0.0),
        )

    @precondition(lambda self: getattr(self, "data", False))
    @rule(data=st.data())
    def fork(self, data):
        src = self._some_slot(data)
        holder = self._holder(src) if self._is_held(src) else None
        if holder is not None and holder.kind is ActorKind.REQUEST and data.draw(st.booleans(), label="own?"):
            rid = holder.id
        else:
            rid = data.draw(RIDS, label="request")
        allowed = self._readable(src, Actor.request(rid))

        def effect(ids):
            got_model = model_pool.alloc(self.model, 1, Actor.request(rid))
            assert (ids is None) == (got_model is None), "fork and the model disagree on a free slot"
            if ids is not None:
                assert tuple(ids) == got_model[1], f"fork took {ids}, the model's free list gives {got_model[1]}"
                self.model = got_model[0]
                self.shadow[ids[0]] = self.shadow[src]

        self._data_move(allowed, lambda: self.impl.fork(src, Actor.request(rid)), effect)

    def _readable(self, slot: int, actor: Actor) -> bool:
        """Whether `actor` may read `slot`: a slot it holds (the declaration's OWNER or BORROWER
        relation), or (for a pool that reads the cache) a published cached slot on which that
        request holds a lock. Another request's or session's slot is never readable."""
        if self._holds(actor, slot):
            return True
        return (
            getattr(self.impl, "reads_cached", False)
            and self.model.slots[slot - 1].state is State.CACHED
            and actor.kind is ActorKind.REQUEST
            and (actor.id, slot) in self.model.locks
        )

    def _is_held(self, slot: int) -> bool:
        return LIFECYCLE.spec(self.model.slots[slot - 1].state).group in (Group.BATCH_OWNED, Group.SESSION_OWNED)

    def _holds(self, actor: Actor, slot: int) -> bool:
        s = self.model.slots[slot - 1]
        return self._is_held(slot) and relation_of(LIFECYCLE.spec(s.state), s, actor) in (
            Relation.OWNER,
            Relation.BORROWER,
        )

    def _fire(self, event, ids, actor, target=NOBODY):
        """A move the bundles say is legal; `anything` may have moved the slot since, so
        both refusing is also agreement."""
        self._both(
            lambda: model_pool.apply(self.model, event, tuple(ids), actor, target, self.launched),
            lambda: self.impl.fire(event, list(ids), actor, target),
        )

    @invariant()
    def agrees_with_the_model(self):
        if not hasattr(self, "impl"):
            return
        assert self.impl.records() == self.model.slots
        free = self.impl.free_list()
        if free is not None:  # any pool that exposes its free list: the same ids, in hand-out order
            assert free == self.model.free, f"free list {free}, the model's {self.model.free}"
        assert conserved(self.model.slots, self.model.free)
        assert all(exclusive(s) for s in self.impl.records())
        held = model_pool.lock_holders(self.model)
        assert locks_match(self.impl.records(), held), f"lock counts {self.impl.records()}, locks held {held}"
        if getattr(self, "data", False):
            values = self.impl.values()
            owned = [i + 1 for i, s in enumerate(self.model.slots) if LIFECYCLE.spec(s.state).owner is not None]
            for slot in owned:  # cache-owned slots too: nothing writes a cached slot
                want, got = self.shadow.get(slot), values[slot - 1]
                assert got == want, (
                    f"slot {slot} ({self.model.slots[slot - 1].state.name}) holds {got}, expected {want}"
                )


def _legal(record, event, actor, target) -> bool:
    try:
        model_step(record, event, actor, target)
        return True
    except LifecycleError:
        return False


def _same_repr(a, b) -> bool:
    return repr(a) == repr(b)


class GuardMachine(PoolMachine):
    under_test = GuardUnderTest


# -- the scheduler machine -----------------------------------------------------------------------
def _marks_broken(rule_body):
    """A rule that raised leaves the scheduler mid-operation: teardown must not pile a second
    error on top of the counterexample."""

    def wrapped(self, *args, **kwargs):
        try:
            return rule_body(self, *args, **kwargs)
        except BaseException:
            self.broken = True
            raise

    wrapped.__name__, wrapped.__doc__ = rule_body.__name__, rule_body.__doc__
    return wrapped


FEATURES = ("plain", "sessions", "abort", "close")
"""Swarm testing: each example enables a random subset of these kinds of move (with neither
kind of request enabled, both are). The simplest example, which Hypothesis draws most, has
both kinds of request and no aborts or closes, so sessions live long enough to lend slots."""


def _scheduler_draws(slots: list, features: tuple = FEATURES) -> dict:
    """The scheduler machines' set-up draws; `slots` in order of preference (Hypothesis draws
    the first far more often), `features` the kinds of move an example may make."""
    return dict(
        slots=st.sampled_from(slots),
        overlap=st.booleans(),
        budget=st.sampled_from([3, 4, 5, 8, 32]),
        chunk=st.sampled_from([16, 2, 4, 1]),
        max_running=st.sampled_from([4, 3, 2, 1]),
        retract_after=st.sampled_from([1, 2, None]),
        features=st.sets(st.sampled_from(features)),
    )


class SchedulerMachine(RuleBasedStateMachine):
    """Random workloads on a small scheduler; invariants after every rule, audit at teardown.
    Each example draws its pool, budgets and the kinds of move it makes (swarm testing)."""

    broken = False

    scheduler_cls: type = Scheduler
    settings_override: dict = {}

    # Hypothesis draws the first value of a list (its simplest) far more often than the others:
    # each list starts with a value that lets candidates collide (two slots, a budget two
    # candidates overrun, chunks longer than one token, room for several running requests)
    @initialize(**_scheduler_draws([2, 1, 3, 4]))
    def setup(self, slots, overlap, budget, chunk, max_running, retract_after, features):
        settings = dict(
            overlap=overlap, token_budget=budget, chunk_size=chunk, max_running=max_running, retract_after=retract_after
        )
        settings.update(self.settings_override)
        self.sched = build(MODEL, slots=slots, cls=self.scheduler_cls, **settings)
        self.sched._next_sid = SESSION_IDS.start  # request ids count from 0: keep the two kinds apart
        features = set(features)
        self.features = features if {"plain", "sessions"} & features else features | {"plain", "sessions"}

    def _has(self, feature: str) -> bool:
        return hasattr(self, "sched") and feature in self.features

    @precondition(lambda self: self._has("plain"))
    @rule(n=st.integers(1, 6), new=st.integers(1, 4), first=st.integers(0, 63))
    @_marks_broken
    def submit(self, n, new, first):
        self.sched.submit([(first + i) % 64 for i in range(n)], new)

    @precondition(lambda self: self._has("sessions"))
    @rule()
    @_marks_broken
    def open_session(self):
        self.sched.open_session()

    @precondition(lambda self: self._has("sessions"))
    @rule(data=st.data(), n=st.integers(1, 4), new=st.integers(1, 4))
    @_marks_broken
    def submit_turn(self, data, n, new):
        """The next turn of an open session (a new one if none is open, or now and then)."""
        open_ = [s.sid for s in self.sched.sessions.values() if s.status is SessionStatus.OPEN]
        if not open_ or not data.draw(st.integers(0, 3), label="existing session?"):
            open_ = [self.sched.open_session()]
        sid = data.draw(st.sampled_from(open_), label="session")
        self.sched.submit([(sid + i) % 64 for i in range(n)], new, session=sid)

    @precondition(lambda self: self._has("sessions") and len(self.sched.sessions) > 1)
    @rule(n=st.integers(1, 4), new=st.integers(1, 4))
    @_marks_broken
    def turn_burst(self, n, new):
        """Every open session sends its next turn at once (their lent slots compete for one batch)."""
        for s in list(self.sched.sessions.values()):
            if s.status is SessionStatus.OPEN:
                self.sched.submit([(s.sid + i) % 64 for i in range(n)], new, session=s.sid)

    @precondition(lambda self: self._has("abort") and self.sched.submitted)
    @rule(data=st.data())
    @_marks_broken
    def abort(self, data):
        """Any request handed out: live, or ended (then nothing to do)."""
        self.sched.abort(data.draw(st.sampled_from(list(range(self.sched.submitted)))))

    @precondition(lambda self: self._has("close") and self.sched.opened > SESSION_IDS.start)
    @rule(data=st.data())
    @_marks_broken
    def close(self, data):
        """Any session handed out: open, closing, or closed (then nothing to do)."""
        self.sched.close_session(data.draw(st.sampled_from(list(range(SESSION_IDS.start, self.sched.opened)))))

    @rule(times=st.integers(1, 4))
    @_marks_broken
    def step(self, times):
        for _ in range(times):
            self.sched.step()

    @invariant()
    def every_slot_accounted_for(self):
        if not hasattr(self, "sched"):
            return
        sched, ledger = self.sched, self.sched.pool.ledger
        audit = sched.pool.audit()
        assert audit.free_list_ok and not audit.problems, audit.problems
        records = tuple(ledger.record(i) for i in range(1, sched.pool.capacity + 1))
        assert all(exclusive(r) for r in records)
        for r in sched.requests.values():
            held = ledger.held_by(Actor.request(r.rid)).tolist()
            assert held == ([r.slot] if r.phase is Phase.RUNNING else []), (
                f"request {r.rid} handle {r.slot}, pool {held}"
            )
        for s in sched.sessions.values():
            held = ledger.held_by(Actor.session(s.sid)).tolist()
            assert held == ([s.slot] if s.slot is not None else []), f"session {s.sid} handle {s.slot}, pool {held}"

    @invariant()
    @_marks_broken  # a teardown after a failed invariant must not hide it
    def one_turn_per_session(self):
        """No request is queued or running twice, and a session has at most one turn queued or
        running: its next turn starts only once the last one ended."""
        if not hasattr(self, "sched"):
            return
        active = list(self.sched.waiting) + list(self.sched.running)
        assert len({id(r) for r in active}) == len(active), f"a request is queued twice: {[r.rid for r in active]}"
        turns = [r.session for r in active if r.session is not None]
        assert len(turns) == len(set(turns)), f"a session has two turns in flight: sessions {sorted(turns)}"

    @invariant()
    @_marks_broken  # a teardown after a failed invariant must not hide it
    def idle_only_when_nothing_is_left(self):
        """An idle scheduler has no request left to run: a queued turn always gets to start."""
        if hasattr(self, "sched") and self.sched.idle:
            stuck = sorted(r.rid for r in self.sched.requests.values() if not r.done)
            assert not stuck, f"idle, yet requests {stuck} were never run (their sessions wait for them)"

    def teardown(self):
        if not hasattr(self, "sched") or self.broken:
            return
        for sid in list(self.sched.sessions):
            self.sched.close_session(sid)
        stalled = 0  # steps in a row that ran nothing (a fence in between may free slots)
        for _ in range(5000):
            if self.sched.idle:
                self.sched.flush_cache()  # the prefix cache (if on) gives back every slot it holds
                self.sched.step()  # fences what is left and audits
                break
            ran = self.sched.step().kind != "idle" or self.sched.inflight is not None or self.sched.running
            stalled = 0 if ran else stalled + 1
            if stalled == 3:
                break  # stuck: requests wait for slots nobody gives back; the audit says why
        self.sched.check_audit()
        assert self.sched.idle, f"requests {[r.rid for r in self.sched.waiting]} wait for slots that never come free"
        assert all(
            r.state is State.FREE
            for r in (self.sched.pool.ledger.record(i) for i in range(1, self.sched.pool.capacity + 1))
        )


GROUP_FEATURES = FEATURES + ("groups",)
"""The cached machine's kinds of move: also parallel-sampling groups (`Scheduler.submit_n`)."""


class CachedSchedulerMachine(SchedulerMachine):
    """The scheduler machine with the prefix cache on, pools of 3 slots drawn first (a
    copy-on-write needs two: the cached source and the fresh copy), and follow-ups: a plain
    request continuing an earlier one once its answer came back, as a chat client does, so
    that it matches the prefix the earlier one donated. With the `groups` feature, also
    parallel-sampling groups (n of 2..3 samples of one prompt, greedy or sampled), whose
    siblings wait for the prompt state their group's hidden prompt request donates, and the
    aborts of a group: one sibling, all of them (which ends the prompt request too), or the
    prompt request by its id, at whatever point of its life the group has reached."""

    settings_override = {"prefix_cache": True}

    @initialize(**_scheduler_draws([3, 2, 4, 1], GROUP_FEATURES))
    def setup(self, slots, overlap, budget, chunk, max_running, retract_after, features):
        SchedulerMachine.setup(self, slots, overlap, budget, chunk, max_running, retract_after, features)
        self.bases = []  # plain requests submitted, in order (the scheduler forgets ended ones)
        self.groups = []  # (sibling ids, the prompt request's id) of every group submitted

    @precondition(lambda self: self._has("plain"))
    @rule(n=st.integers(1, 6), new=st.integers(1, 4), first=st.integers(0, 63))
    @_marks_broken
    def submit(self, n, new, first):
        rid = self.sched.submit([(first + i) % 64 for i in range(n)], new)
        self.bases.append(self.sched.requests[rid])

    @precondition(lambda self: hasattr(self, "sched") and self.bases)
    @rule(data=st.data(), extra=st.integers(0, 63), new=st.integers(1, 4))
    @_marks_broken
    def follow_up(self, data, extra, new):
        """A plain request continuing an earlier one (the latest first): the scheduler steps
        until the earlier one ended (a few steps at most); then its prompt, its output, one
        more token."""
        base = data.draw(st.sampled_from(self.bases[::-1]), label="continues")
        for _ in range(12):
            if base.done:
                break
            self.sched.step()
        rid = self.sched.submit(list(base.prompt) + list(base.output) + [extra], new)
        self.bases.append(self.sched.requests[rid])

    @precondition(lambda self: self._has("groups"))
    @rule(
        n=st.integers(2, 3),
        size=st.integers(2, 9),
        new=st.integers(1, 4),
        first=st.integers(0, 63),
        temperature=st.sampled_from([0.0, 1.0]),
    )
    @_marks_broken
    def submit_group(self, n, size, new, first, temperature):
        """n samples of one prompt (of two tokens or more: the group has a prompt request,
        whose prefill may take several steps); the siblings are plain requests that
        follow-ups may continue."""
        rids = self.sched.submit_n([(first + i) % 64 for i in range(size)], new, n, temperature=temperature, seed=first)
        self.groups.append((rids, rids[-1] + 1))  # the prompt request takes the id after the siblings'
        self.bases.extend(self.sched.requests[rid] for rid in rids)

    @precondition(lambda self: self._has("groups") and self.groups)
    @rule(data=st.data(), which=st.sampled_from(["sibling", "siblings", "prompt"]))
    @_marks_broken
    def abort_group(self, data, which):
        """Abort part of a group (the latest first): one sibling, every sibling (the last one's
        abort ends the prompt request too, if it still runs or waits), or the prompt request
        itself; now, or once the prompt request runs (with overlap, or a prefill of several
        steps, it is still running then). An ended request: nothing to do."""
        siblings, prompt = data.draw(st.sampled_from(self.groups[::-1]), label="group")
        lead = self.sched.requests.get(prompt)
        if lead is not None and data.draw(st.booleans(), label="once the prompt request runs"):
            for _ in range(8):  # a few steps at most: it takes a slot as soon as one is free
                if lead.phase is not Phase.WAITING:
                    break
                self.sched.step()
        if which == "sibling":
            siblings = [data.draw(st.sampled_from(siblings), label="sibling")]
        for rid in siblings if which != "prompt" else [prompt]:
            self.sched.abort(rid)

    @invariant()
    @_marks_broken  # a teardown after a failed invariant must not hide it
    def siblings_wait_for_their_prompt(self):
        """A sibling whose group's prompt request is live holds nothing and is not running (it
        copies the prompt's state once published); a live prompt request has a live sibling
        (aborting the last one ends it)."""
        if not hasattr(self, "sched"):
            return
        for r in self.sched.requests.values():
            lead = r.awaits
            if lead is not None and not lead.done:
                assert r.phase is Phase.WAITING and r.slot is None and r.cached is None, (
                    f"request {r.rid} is {r.phase.name} holding slot {r.slot} (match {r.cached}) before "
                    f"its group's prompt request {lead.rid} ended"
                )
            if r.shared:
                assert any(not s.done for s in r.siblings), (
                    f"prompt request {r.rid} is {r.phase.name}, yet every sibling of its group has ended"
                )


def machine_for(scheduler_cls: type, **settings) -> type:
    """`SchedulerMachine` driving `scheduler_cls` (a mutant), with `settings` fixed (with the
    prefix cache on: `CachedSchedulerMachine`, follow-ups included)."""
    base = CachedSchedulerMachine if settings.get("prefix_cache") else SchedulerMachine
    return type(
        f"{scheduler_cls.__name__}Machine",
        (base,),
        {"scheduler_cls": scheduler_cls, "settings_override": {**base.settings_override, **settings}},
    )
