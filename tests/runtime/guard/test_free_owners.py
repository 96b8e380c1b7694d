"""A `GuardedAllocator.free` that covers the slots of several owners is one ledger call, and
the engine's `free` is called once, inside that call's `before_write`: if the engine raises,
nothing changed anywhere (ledger, recorder, engine free list) and the same free then succeeds."""

from __future__ import annotations

import pytest
import torch

from slotwarden.model.vocabulary import Actor, State
from slotwarden.runtime.guarded_allocator import ANONYMOUS, GuardedAllocator, acting
from slotwarden.trace_examples import FreeList

R1, R2, R3 = (Actor.request(i) for i in (1, 2, 3))


class Fault(RuntimeError):
    """What the engine's `free` raises (a failure from below)."""


class PoisonedFree(FreeList):
    """An engine whose `free` raises once, on the first call that names `poison`."""

    poison: int | None = None
    calls: list

    def free(self, free_index):
        self.calls = getattr(self, "calls", [])
        if self.poison is not None and self.poison in free_index.tolist():
            self.poison = None
            raise Fault("the engine's free failed")
        self.calls.append(free_index.tolist())
        super().free(free_index)


def snapshot(engine, g):
    return engine.free_slots.clone(), g.ledger.snapshot(), g.ledger.recorder.seq


def unchanged(before, engine, g):
    free, ledger, events = before
    assert torch.equal(engine.free_slots, free), "the engine's free list changed"
    now = g.ledger.snapshot()
    for k, v in ledger.items():
        assert (v == now[k]) if k == "counters" else torch.equal(v, now[k]), f"ledger {k} changed"
    assert g.ledger.recorder.seq == events, "the flight recorder changed"


def taken_by(g, actors):
    """One slot TAKEN by each of `actors`, as one tensor of ids (in the actors' order)."""
    ids = []
    for a in actors:
        with acting(a):
            ids.append(g.alloc(1))
    return torch.cat(ids)


@pytest.mark.parametrize("owners", [(R1, R2), (R1, R2, R3), (R1, Actor.request(ANONYMOUS))], ids=["2", "3", "anon"])
def test_a_free_of_several_owners_is_all_or_nothing(owners):
    engine = PoisonedFree(8, "cpu")
    g = GuardedAllocator(engine, unattributed="trust")
    ids = taken_by(g, owners)
    engine.poison = int(ids[-1])  # the last owner's slot: today's second engine call raises
    before = snapshot(engine, g)
    with pytest.raises(Fault):
        g.free(ids)  # trusted: each slot freed by its owner, a rollback each
    unchanged(before, engine, g)
    g.free(ids)  # the retry succeeds
    assert {g.ledger.record(int(i)).state for i in ids} == {State.FREE}
    assert engine.calls == [ids.tolist()], "the engine's free is called once, with the call's ids in order"
    assert g.available_size() == 8 and g.audit().clean


def test_a_free_of_several_owners_is_one_ledger_call():
    engine = PoisonedFree(8, "cpu")
    g = GuardedAllocator(engine, unattributed="trust")
    ids = taken_by(g, (R1, R2, R3))
    events = g.ledger.recorder.seq
    g.free(ids)
    assert g.ledger.recorder.seq == events + 1  # one multi-actor ROLLBACK (no fence: nothing released)


def test_a_free_of_two_events_calls_the_engine_once_first():
    """Slots of one request, one TAKEN (a rollback, FREE at once) and one RUNNING (a finish,
    RELEASED until its fence): if the engine's free of the rollback raises, nothing changed."""
    engine = PoisonedFree(8, "cpu")
    g = GuardedAllocator(engine)
    with acting(R1):
        running = g.alloc(1)
        g.admit(running)
        taken = g.alloc(1)
        ids = torch.cat((running, taken))
        engine.poison = int(taken)
        before = snapshot(engine, g)
        with pytest.raises(Fault):
            g.free(ids)
        unchanged(before, engine, g)
        g.free(ids)
    assert g.available_size() == 8 and g.audit().clean
