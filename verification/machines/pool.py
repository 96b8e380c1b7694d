"""`PoolMachine`: every lifecycle event against a pool under test, owners drawn from bundles,
checked after every step against the pure model (`slotwarden.model.pool`) slot by slot, its
free list (when the pool exposes one) and the safety predicates; for a pool that holds state,
copy, fork, zero and step writes too (each reading and writing only what its actor holds),
against a shadow of every held slot's contents. The pool under test is anything speaking
`PoolUnderTest` (`StatePoolUnderTest` by default); a test binds it as `TestX = PoolMachine.TestCase`.
"""

from __future__ import annotations

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

from slotwarden.model import pool as model_pool
from slotwarden.model.declaration import relation_of
from slotwarden.model.errors import LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.properties import VERIFIED_STATE, conserved, exclusive, locks_match
from slotwarden.model.step import step as model_step
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Group, Relation, State
from slotwarden.verification.machines import paths
from slotwarden.verification.machines.shared import EVENTS, NODES, RIDS, SIDS
from slotwarden.verification.machines.under_test import StatePoolUnderTest


class PoolMachine(RuleBasedStateMachine):
    """Differential: the pool under test and `model.pool` must agree after every step."""

    under_test = StatePoolUnderTest

    taken = Bundle("taken")  # (slot, request)
    running = Bundle("running")
    parked = Bundle("parked")  # (slot, session)
    lent = Bundle("lent")  # (slot, session, request)
    lent_running = Bundle("lent_running")
    drafted = Bundle("drafted")  # (slot, request): a window slot, not yet verified
    verifying = Bundle("verifying")

    # `path`: the ledger's path for every batch the machine makes (`paths.PATHS`: a slot at a
    # time, the compiled move in runs or slot by slot, numpy); the mixed sizes around the
    # switch-over point are drawn by tests/runtime/pool/test_hypothesis.py, the bad-input machine and
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

    # -- speculative windows: draft, verify (published at the fence), commit or roll back ---------
    @rule(target=drafted, held=consumes(taken))
    def draft(self, held):
        self._fire(Event.DRAFT, (held[0],), Actor.request(held[1]))
        return held

    @rule(target=verifying, held=consumes(drafted))
    def verify(self, held):
        self._fire(Event.VERIFY, (held[0],), Actor.request(held[1]))
        return held

    @rule(held=consumes(drafted))
    def give_back_draft(self, held):
        self._fire(Event.ROLLBACK, (held[0],), Actor.request(held[1]))

    @rule(held=consumes(verifying), event=st.sampled_from([Event.COMMIT, Event.ROLLBACK]))
    def settle(self, held, event):
        """Committed (refused before the verify's fence) or rolled back, at any time."""
        self._fire(event, (held[0],), Actor.request(held[1]))

    @rule(held=running)
    def commit_into(self, held):
        self._fire(Event.COMMIT, (held[0],), Actor.request(held[1]))

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

    def _strangers(self) -> list:
        """Pairs of held slots (src, dst) whose holders differ."""
        held = self._held()
        return [(a, b) for a in held for b in held if self._holder(a) != self._holder(b)]

    @precondition(lambda self: getattr(self, "data", False) and self._strangers())
    @rule(data=st.data())
    def copy_into_a_strangers_slot(self, data):
        """A holder copies its own slot into a slot another actor holds: always refused."""
        src, dst = data.draw(st.sampled_from(self._strangers()), label="(own, stranger's)")
        self._data_move(False, lambda: self.impl.copy((src,), (dst,), self._holder(src)), None)

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
        request holds a lock. Another request's or session's slot is never readable, nor a window
        position a verify wrote (only committed state is copied)."""
        if self.model.slots[slot - 1].state in VERIFIED_STATE:
            return False
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
