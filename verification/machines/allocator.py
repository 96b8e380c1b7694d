"""`AllocatorMachine`: the drop-in `GuardedAllocator` over an engine free list, driven through
its own API (alloc and free under `acting`, or unattributed, refused or trusted; admit, park,
lend, fire, close), against `model.step` slot by slot.

Every free is judged by the declaration's free rule (`model.free.free_rule`, read from the
module at each call): it either makes exactly the move the rule gives for every slot, the
engine's free list gaining exactly the slots that end FREE, or raises the very `IllegalFree` the
rule raises, with nothing changed. The rule itself is held to the declaration's contract: a
free is a declared move of the actor's kind from the slot's state, for its relation, ending
FREE or RELEASED, and a borrower never has one. Bad ids (the pad slot 0, -1, one past the end,
a slot named twice) raise a typed error and change nothing. After every step the ledger's
records equal the model's and the engine's free list holds exactly the FREE slots, once each.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from slotwarden.model import free
from slotwarden.model.declaration import relation_of
from slotwarden.model.errors import IllegalMove, SlotwardenError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.step import step as model_step
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Group, Relation, Slot, State
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guarded_allocator import ANONYMOUS, UNATTRIBUTED, GuardedAllocator, Unattributed
from slotwarden.verification.machines.shared import RIDS, SIDS

MOVES = (Event.ADMIT, Event.PARK, Event.LEND, Event.FINISH, Event.ROLLBACK, Event.ABORT, Event.CLOSE)
WHO = ("owner", "borrower", "request", "session", "nobody")
"""Who acts: the first slot's owner or borrower, any request or session, or nobody said."""
FENCER = Actor(ActorKind.SCHEDULER, 0)  # no step is ever launched: a release is due at once
SLOTS = st.lists(st.integers(-1, 6), min_size=1, max_size=5)  # 6: one past the end (see `_ids`)
SOME = st.lists(st.integers(1, 5), max_size=3)  # slots of the pool (folded into it, see `_ids`)
HOLDER = st.sampled_from(("owner", "owner", "borrower", "nobody"))  # who frees a held slot
JUNK = st.sampled_from((None,) * 12 + (0, -1, 6, "twice"))  # a bad id, now and then


class AllocatorMachine(RuleBasedStateMachine):
    @initialize(capacity=st.integers(2, 5), unattributed=st.sampled_from(UNATTRIBUTED))
    def setup(self, capacity, unattributed):
        self.cap = capacity
        self.engine = FreeList(capacity)
        self.alloc = GuardedAllocator(self.engine, capacity, unattributed=unattributed)
        self.trust = unattributed == "trust"
        self.model = {s: Slot(State.FREE) for s in range(1, capacity + 1)}

    # -- drawing ids and actors ------------------------------------------------------------------
    def _ids(self, raw: list[int]) -> list[int]:
        """1..5 folded into the pool, 6 one past its end, 0 (the pad slot) and -1 as they are."""
        return [self.cap + 1 if i == 6 else i if i < 1 else 1 + (i - 1) % self.cap for i in raw]

    def _actor(self, who: str, ids: list[int], rid: int, sid: int) -> Actor | None:
        rec = self.model.get(ids[0]) if ids else None
        spec = LIFECYCLE.spec(rec.state) if rec is not None else None
        if who == "owner" and spec is not None and spec.owner is not None and rec.owner != NOBODY:
            return Actor(spec.owner, rec.owner)
        if who == "borrower" and rec is not None and rec.borrower != NOBODY:
            return Actor.request(rec.borrower)
        return None if who == "nobody" else Actor.session(sid) if who == "session" else Actor.request(rid)

    def _call(self, actor: Actor | None, call):
        if actor is None:
            return call()
        with self.alloc.acting(actor):
            return call()

    def _refused(self, call, actor, why: str, want: type = SlotwardenError, same: str | None = None) -> None:
        """`call` must raise `want` (with the message `same`, if given) and change nothing."""
        before, engine = dict(self.model), self._engine()
        try:
            self._call(actor, call)
        except want as exc:
            assert same is None or str(exc) == same, f"{why}: raised\n  {exc}\nwhere the model raises\n  {same}"
        else:
            raise AssertionError(f"{why}, but the allocator accepted it")
        assert self._records() == before, f"a refused call changed the ledger ({why})"
        assert self._engine() == engine, f"a refused call changed the engine's free list ({why})"

    # -- the allocator's API ---------------------------------------------------------------------
    @rule(n=st.integers(1, 3), rid=RIDS, attributed=st.sampled_from((True, True, True, False)))
    def alloc_slots(self, n, rid, attributed):
        actor = Actor.request(rid) if attributed else None
        if actor is None and not self.trust:
            return self._refused(lambda: self.alloc.alloc(n), None, "an unattributed alloc", Unattributed)
        got = self._call(actor, lambda: self.alloc.alloc(n))
        free_now = [s for s, r in self.model.items() if r.state is State.FREE]
        if n > len(free_now):
            assert got is None, f"alloc of {n} with {len(free_now)} free handed out {got}"
            return
        ids = got.tolist()
        assert len(ids) == n == len(set(ids)) and set(ids) <= set(free_now), f"alloc({n}) gave {ids} of {free_now}"
        by = actor or Actor.request(ANONYMOUS)
        for s in ids:
            self.model[s] = model_step(self.model[s], Event.ALLOC, by)

    @rule(pick=st.integers(0, 4), who=HOLDER, more=st.one_of(st.just([]), SOME), junk=JUNK)
    def free_held(self, pick, who, more, junk):
        """A free of a held slot by its owner, its borrower or nobody, with more slots (other
        owners', free ones: double frees) and now and then a bad id."""
        held = [s for s, r in self.model.items() if r.state is not State.FREE]
        if held:
            self.free([held[pick % len(held)], *more], who, 1, 1001, junk)

    @rule(raw=SOME, who=st.sampled_from(WHO), rid=RIDS, sid=SIDS, junk=JUNK)
    def free(self, raw, who, rid, sid, junk=None):
        ids = list(dict.fromkeys(self._ids(raw)))
        if junk is not None:
            ids += ids[:1] if junk == "twice" else self._ids([junk])
        if not ids:
            return
        actor = self._actor(who, ids, rid, sid)
        call = lambda: self.alloc.free(torch.tensor(ids, dtype=torch.int64))  # noqa: E731
        if actor is None and not self.trust:
            return self._refused(call, None, "an unattributed free", Unattributed)
        if any(not 1 <= s <= self.cap for s in ids) or len(set(ids)) < len(ids):
            return self._refused(call, actor, f"a free of {ids} (pad, -1, past the end or twice)")
        moves = []
        for s in ids:
            rec = self.model[s]
            by = actor or _owner_of(rec)
            try:
                rule_ = free.free_rule(rec, by, LIFECYCLE, s)
            except free.IllegalFree as exc:
                return self._refused(call, actor, f"free_rule refuses a free of slot {s}", free.IllegalFree, str(exc))
            moves.append((s, _judged(rec, by, rule_, s)))
        self._call(actor, call)
        for s, after in moves:
            self.model[s] = after

    @rule(pick=st.integers(0, 4), nth=st.integers(0, 3), rid=RIDS, sid=SIDS)
    def move_held(self, pick, nth, rid, sid):
        """One of the declared moves of a held slot (its `nth`), by whoever makes it: its
        owner, or its borrower (a lent turn's admit, finish, rollback, abort)."""
        held = [s for s, r in self.model.items() if r.state is not State.FREE]
        if held:
            slot = held[pick % len(held)]
            rules = [r for r in LIFECYCLE.rules_from(self.model[slot].state) if r.event in MOVES]
            if rules:
                rule_ = rules[nth % len(rules)]
                self.move(rule_.event, [slot], "borrower" if rule_.by is Relation.BORROWER else "owner", rid, sid)

    @rule(event=st.sampled_from(MOVES), raw=SLOTS, who=st.sampled_from(WHO), rid=RIDS, sid=SIDS)
    def move(self, event, raw, who, rid, sid):
        ids = sorted({s for s in self._ids(raw) if 1 <= s <= self.cap})
        actor = self._actor(who, ids, rid, sid)
        self._move(event, ids, actor, sid if event is Event.PARK else rid if event is Event.LEND else NOBODY)

    @rule(rid=RIDS, sid=SIDS, turn=RIDS)
    def session_turn(self, rid, sid, turn):
        """A session's turn in one go (each move judged as `move` judges it): `rid` allocs a
        slot, admits it and parks it with `sid`, which lends it to its next turn, `turn`."""
        held = set(self.alloc.ledger.held_by(Actor.request(rid)).tolist())
        self.alloc_slots(1, rid, True)
        new = sorted(set(self.alloc.ledger.held_by(Actor.request(rid)).tolist()) - held)
        if new:
            self._move(Event.ADMIT, new, Actor.request(rid), NOBODY)
            self._move(Event.PARK, new, Actor.request(rid), sid)
            self._move(Event.LEND, new, Actor.session(sid), turn)

    def _move(self, event: Event, ids: list[int], actor: Actor | None, target: int) -> None:
        call = _call_for(self.alloc, event, ids, target)
        if actor is None:
            return self._refused(call, None, f"an unattributed {event.name.lower()}", Unattributed)
        if event is Event.CLOSE:  # every slot the actor holds (`held_by`), whatever was drawn
            ids = [s for s, r in self.model.items() if _holds(actor, r)]
        elif not ids:
            return
        try:
            after = {s: model_step(self.model[s], event, actor, target, 0, LIFECYCLE, s) for s in ids}
        except IllegalMove as exc:
            return self._refused(call, actor, f"the model refuses ({exc.reason})")
        self._call(actor, call)
        self.model.update({s: _fenced(r) for s, r in after.items()})

    # -- after every step ------------------------------------------------------------------------
    def _records(self) -> dict:
        return {s: self.alloc.ledger.record(s) for s in range(1, self.cap + 1)}

    def _engine(self) -> list[int]:
        return self.engine.free_slots.tolist()

    @invariant()
    def agrees_with_the_model(self):
        if not hasattr(self, "model"):
            return
        assert self._records() == self.model, f"ledger {self._records()} != model {self.model}"
        engine, free_now = self._engine(), sorted(s for s, r in self.model.items() if r.state is State.FREE)
        assert sorted(engine) == free_now, f"engine's free list {engine}, FREE slots {free_now}"


def _holds(actor: Actor, rec: Slot) -> bool:
    spec = LIFECYCLE.spec(rec.state)
    borrows = spec.lent and actor.kind is ActorKind.REQUEST and rec.borrower == actor.id
    return (spec.owner is actor.kind and rec.owner == actor.id) or borrows


def _owner_of(rec: Slot) -> Actor:
    """Who frees a slot for a trusted, unattributed free: its owner, or an anonymous request."""
    kind = LIFECYCLE.spec(rec.state).owner
    return Actor(kind, rec.owner) if kind is not None and rec.owner != NOBODY else Actor.request(ANONYMOUS)


def _judged(rec: Slot, by: Actor, rule_, slot: int) -> Slot:
    """The record after the free `rule_` (what `free_rule` gave) once its release is fenced,
    after holding the rule to the declaration's contract of a free."""
    relation = relation_of(LIFECYCLE.spec(rec.state), rec, by)
    what = f"free_rule gives {rule_.event.name} -> {rule_.dest.name} for {by} on slot {slot}"
    what += f" ({rec.state.name}, {relation.name})"
    assert relation is not Relation.BORROWER, f"{what}: a borrower has no free (model/free.py)"
    assert rule_ in LIFECYCLE.rules_from(rec.state) and rule_.by is relation, f"{what}: no such declared rule"
    assert LIFECYCLE.event(rule_.event).actor is by.kind, f"{what}: not an event of a {by.kind.name}"
    assert LIFECYCLE.spec(rule_.dest).group in (Group.FREE, Group.RELEASED), f"{what}: not toward the free list"
    return _fenced(model_step(rec, rule_.event, by, NOBODY, 0, LIFECYCLE, slot))


def _fenced(rec: Slot) -> Slot:
    """A released slot after its fence (no step is launched: due at once, as the allocator does)."""
    return model_step(rec, Event.FENCE, FENCER) if rec.state is State.RELEASED else rec


def _call_for(alloc: GuardedAllocator, event: Event, ids: list[int], target: int):
    t = torch.tensor(ids, dtype=torch.int64)
    if event is Event.ADMIT:
        return lambda: alloc.admit(t)
    if event is Event.PARK:
        return lambda: alloc.park(t, target)
    if event is Event.LEND:
        return lambda: alloc.lend(t, target)
    if event is Event.CLOSE:
        return alloc.close
    return lambda: alloc.fire(event, t)
