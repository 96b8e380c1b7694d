"""`GuardedAllocator`'s common path (`_free_one_move`, and the ledger's `apply_one` under it):
a free of slots that all make one move is one checked ledger call that hands the engine the
caller's own tensor, and does exactly what the general path does. Anything else (mixed batches,
a lent slot anywhere in the batch, junk) falls back to the general path, which refuses or
splits it; a release's fence hands the engine only the slots it makes FREE."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from slotwarden.model.errors import SlotwardenError
from slotwarden.model.free import IllegalFree
from slotwarden.model.vocabulary import Actor, ActorKind, Event, State
from slotwarden.runtime.guarded_allocator import GuardedAllocator, acting
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.trace_examples import FreeList
from engines import ENGINES, Untouched

R1, R2, R3 = (Actor.request(i) for i in (1, 2, 3))
S5 = Actor.session(5)


class Recording(FreeList):
    """The in-repo engine, keeping every tensor its `free` is handed."""

    def __init__(self, size, device):
        super().__init__(size, device)
        self.handed = []

    def free(self, free_index):
        self.handed.append(free_index)
        super().free(free_index)


class GeneralOnly(GuardedAllocator):
    """The guard with its common path off: every free takes the general path (the reference)."""

    def _free_one_move(self, free_index, actor):
        return False


class AnyStates(GuardedAllocator):
    """The broken variant: the common path takes a batch for one move without checking that
    every slot is in the first one's state."""

    @staticmethod
    def _one_state(before, same):
        return True


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("admitted", [False, True], ids=["rollback", "finish"])
def test_the_engine_is_handed_the_callers_own_tensor(n, admitted):
    engine = Recording(8, "cpu")
    g = GuardedAllocator(engine)
    with acting(R1):
        ids = g.alloc(n)
        if admitted:
            g.admit(ids)  # a finish: released, and freed by the fence that follows (no step launched)
        g.free(ids)
    assert len(engine.handed) == 1 and engine.handed[0] is ids  # no copy, no host<->device round trip
    assert g.available_size() == 8 and g.audit().clean


@pytest.mark.parametrize("cls", [GuardedAllocator, GeneralOnly], ids=["common path", "general path"])
def test_a_fence_hands_the_engine_only_what_it_frees(cls):
    """A free's fence that publishes a cached slot (INSERT's write, now finished) leaves it
    with the cache: it is not FREE, so it never reaches the engine's free list."""
    engine = FreeList(4, "cpu")
    g = cls(engine)
    done = []
    with acting(R1):
        cached = g.alloc(1)
        g.admit(cached)
        g.launch(lambda: bool(done))
        g.fire(Event.INSERT, cached, 9)  # donated to tree node 9, published at the step's fence
    done.append(True)
    with acting(R2):
        mine = g.alloc(2)
        g.admit(mine[:1])
        g.free(mine)  # a finish and a rollback, then the fence that publishes the cached slot
    assert g.ledger.record(cached.item()).state is State.CACHED
    assert cached.item() not in engine.free_slots.tolist() and g.available_size() == 3
    assert g.audit().clean, g.audit().problems


def _lent_behind_own(cls):
    """Request 2 frees its own candidate slot and, behind it, the slot session 5 lent it."""
    engine = FreeList(8, "cpu")
    g = cls(engine)
    with acting(R1):
        lent = g.alloc(1)
        g.admit(lent)
        g.park(lent, 5)
    with acting(S5):
        g.lend(lent, 2)
    with acting(R2):
        own = g.alloc(1)
    return engine, g, torch.cat((own, lent))


@pytest.mark.parametrize(
    "cls", [GuardedAllocator, pytest.param(AnyStates, marks=pytest.mark.xfail(strict=True, reason="broken variant"))]
)
def test_a_lent_slot_behind_an_own_one_is_refused(cls):
    """Both slots take a rollback in the ledger (the lent one back to its session), but a free
    of the lent one is the seed bug: the whole free is refused, nothing changed."""
    engine, g, batch = _lent_behind_own(cls)
    frozen = Untouched(engine, g)
    with acting(R2), pytest.raises(IllegalFree, match=f"slot {batch[1].item()} .*state LENT"):
        g.free(batch)
    frozen.check()


def test_a_batch_with_a_slot_of_another_owner_behind_is_refused(engine_cls):
    engine = engine_cls(8, "cpu")
    g = GuardedAllocator(engine)
    with acting(R1):
        theirs = g.alloc(1)
    with acting(R2):
        mine = g.alloc(2)
        frozen = Untouched(engine, g)
        with pytest.raises(IllegalFree, match=f"illegal free by request 2 on slot {theirs.item()}.*only its owner"):
            g.free(torch.cat((mine, theirs)))
    frozen.check()


@pytest.fixture(params=ENGINES)
def engine_cls(request):
    return request.param


def _outcome(g, engine, actor, batch):
    try:
        with acting(actor):
            g.free(batch)
        error = None
    except SlotwardenError as e:
        error = (type(e), str(e))
    snap = g.ledger.snapshot()
    kept = [
        (e.event, e.actor, e.target, e.epoch, e.ids.tolist(), np.asarray(e.before).tolist(), e.after.tolist())
        for e in g.ledger.recorder.entries
    ]
    columns = {k: v if k == "counters" else v.tolist() for k, v in snap.items()}
    return error, engine.free_slots.tolist(), columns, kept, g.ledger.awaits_fence()


def _history(rng, guards):
    """The same random legal moves on every guard: allocs, admits, frees, parks, lends, steps
    launched (finished at once, or later) and fences."""
    device = []  # steps launched with `lambda: bool(device)` finish when it is set
    for _ in range(rng.randint(8, 40)):
        r = Actor.request(rng.randint(1, 3))
        move = rng.choice(
            ("alloc", "alloc", "admit", "admit", "free", "park", "lend", "lend", "launch", "done", "fence")
        )
        k, late = rng.randint(1, 2), rng.random() < 0.5
        for g in guards:  # the same move on each: no draw from `rng` in here
            mine = _held(g, r)
            with acting(r):
                taken = [s for s in mine if g.ledger.record(s).state is State.TAKEN]
                running = [s for s in mine if g.ledger.record(s).state is State.RUNNING]
                if move == "alloc" and g.available_size() >= k:
                    g.alloc(k)
                elif move == "admit" and taken:
                    g.admit(taken)
                elif move == "free" and running:
                    g.free(torch.tensor(running))
                elif move == "park" and running:
                    g.park(running[:1], 5)
                elif move == "launch":
                    g.launch((lambda: bool(device)) if late else None)
                elif move == "fence":
                    g.fence()
            parked = [s for s in _held(g, S5) if g.ledger.record(s).state is State.PARKED]
            if move == "lend" and parked:
                with acting(S5):
                    g.lend(parked[:1], r.id)
        if move == "done":
            device.append(True)


def _held(g, actor) -> list:
    """The slots `actor` owns or borrows."""
    held = []
    for s in range(1, g.ledger.capacity + 1):
        rec = g.ledger.record(s)
        spec = g.ledger.lifecycle.spec(rec.state)
        owns = spec.owner is actor.kind and rec.owner == actor.id
        if owns or (spec.lent and actor.kind is ActorKind.REQUEST and rec.borrower == actor.id):
            held.append(s)
    return held


def _a_free(rng, g, actor) -> torch.Tensor:
    """Mostly the actor's own (or borrowed) slots, sometimes with another real slot, now and
    then junk."""
    mine, roll = _held(g, actor), rng.random()
    if roll < 0.1 or not mine:
        return torch.tensor(rng.sample(range(0, 8), rng.randint(1, 3)), dtype=torch.int64)
    batch = rng.sample(mine, rng.randint(1, len(mine)))
    if roll < 0.35:
        batch.insert(rng.randint(0, len(batch)), rng.randint(1, g.ledger.capacity))
    return torch.tensor(batch, dtype=torch.int64)


def same_as_general_path(seed: int, cls=GuardedAllocator) -> bool:
    """Random legal histories, then random frees (own, lent, others', freed, junk slots) by a
    `cls` guard and by the general path: whether every free gives the same error (or none), the
    same engine free list, columns, flight recorder and releases waiting."""
    rng = random.Random(seed)
    fast, slow = Recording(6, "cpu"), Recording(6, "cpu")
    guards = [cls(fast), GeneralOnly(slow)]
    _history(random.Random(seed), guards)
    if _outcome(guards[0], fast, R1, torch.zeros(0, dtype=torch.int64)) != _outcome(
        guards[1], slow, R1, torch.zeros(0, dtype=torch.int64)
    ):
        return False
    for _ in range(6):
        actor = rng.choice((R1, R2, R3, S5))
        batch = _a_free(rng, guards[0], actor)
        got = [_outcome(g, e, actor, batch.clone()) for g, e in zip(guards, (fast, slow))]
        if got[0] != got[1]:
            return False
    return True


@pytest.mark.parametrize("seed", range(60))
def test_the_common_path_does_what_the_general_path_does(seed):
    """The guard's usual path (its compiled lane where built, else its Python raw or array
    lane) against the general path: see `same_as_general_path`."""
    assert same_as_general_path(seed)


@pytest.mark.parametrize("lane", ["compiled", "per-slot"])
@pytest.mark.parametrize("seed", range(20))
def test_apply_one_is_apply_for_one_slot(seed, lane):
    """Random one-slot moves by random actors on two ledgers, `apply_one` on one and `apply` on
    the other (a lend or park, which names a target, `apply` on both): the same error (or
    none), the same columns, recorder and releases waiting for their fence, after every move."""
    rng = random.Random(seed)
    ledgers = [SlotLedger(6, free_list=False), SlotLedger(6, free_list=False)]
    if lane == "per-slot" or ledgers[0].mover is None:  # the lane of a ledger built without the compiled move
        ledgers[0].mover = None
    actors = (R1, R1, R1, R2, S5, Actor.cache(9), Actor.fence(1))
    events = list(Event) + [Event.ALLOC] * 6 + [Event.ADMIT, Event.FINISH, Event.ROLLBACK] * 2
    moved = 0
    for _ in range(200):
        event, slot, actor = rng.choice(events), rng.choice((0, 1, 2, 3, 4, 5, 6, 7, True)), rng.choice(actors)
        target = {Event.LEND: 2, Event.PARK: 5, Event.INSERT: 9}.get(event, -1)
        outcomes = []
        for i, ledger in enumerate(ledgers):
            try:
                if i == 0 and target == -1:
                    ledger.apply_one(event, slot, actor)
                else:
                    ledger.apply(event, [slot], actor, target)
                outcomes.append(None)
            except SlotwardenError as e:
                outcomes.append((type(e), str(e)))
        moved += outcomes[0] is None and target == -1
        if rng.random() < 0.2:
            for ledger in ledgers:
                ledger.launch()
        assert outcomes[0] == outcomes[1], (event, slot, actor)
        a, b = (led.snapshot() for led in ledgers)
        assert all((a[k] == b[k]) if k == "counters" else torch.equal(a[k], b[k]) for k in a)
        kept = [
            [(e.event, e.actor, e.ids.tolist(), np.asarray(e.after).tolist()) for e in led.recorder.entries]
            for led in ledgers
        ]
        assert kept[0] == kept[1]
        assert ledgers[0].awaits_fence() == ledgers[1].awaits_fence()
        if rng.random() < 0.3:
            assert ledgers[0].fence().tolist() == ledgers[1].fence().tolist()
    assert moved >= 3  # the one-slot lane did move slots


def test_a_free_whose_fence_frees_earlier_releases_hands_the_engine_them_all(engine_cls):
    """Request 1's finish waits for a step's fence; the step finishes; request 2's finish is
    freed by the fence that follows it, and so is request 1's: both reach the engine, request
    2's first (the order its own free would list them in)."""
    engine = engine_cls(8, "cpu")
    g = GuardedAllocator(engine)
    done = []
    with acting(R1):
        first = g.alloc(2)
        g.admit(first)
        g.launch(lambda: bool(done))
        g.free(first)  # released: the step on the device may still use them
    assert g.available_size() == 6
    done.append(True)
    with acting(R2):
        mine = g.alloc(1)
        g.admit(mine)
        g.free(mine)
    assert g.available_size() == 8 and g.audit().clean
    assert engine.free_slots.tolist()[-3:] == mine.tolist() + sorted(first.tolist())


def test_acting_blocks_nest_and_reset_on_errors():
    from slotwarden.runtime.guarded_allocator import ACTING

    block = acting(R1)
    with block as who:
        assert who is R1 and ACTING.get() is R1
        with acting(R2):
            assert ACTING.get() is R2
        assert ACTING.get() is R1
        with pytest.raises(RuntimeError, match="entered already"):
            with block:
                pass
        assert ACTING.get() is R1
    assert ACTING.get() is None
    with pytest.raises(KeyError), acting(R3):
        raise KeyError("inside")
    assert ACTING.get() is None
    with block:  # once left, the same block can be entered again
        assert ACTING.get() is R1
    assert ACTING.get() is None
