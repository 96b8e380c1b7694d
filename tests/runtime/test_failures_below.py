"""All or nothing when a failure comes from below: a zeroing or copy kernel that raises, an
engine whose `free` raises. The operation raises that error, and the pool tensors, the ledger,
the free list, the recorder and the engine's free list are exactly as they were; the same
operation succeeds once the fault is gone."""

import numpy as np
import pytest
import torch

import slotwarden.runtime.pool as pool_module
from slotwarden.model.errors import BadSlotId
from slotwarden.model.vocabulary import Actor, Event, Slot, State
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.ledger.ledger import SlotLedger

from engines import TensorFreeList, Untouched
from pools import Frozen, populated

R1, R2, R7 = Actor.request(1), Actor.request(2), Actor.request(7)


class DeviceFault(RuntimeError):
    pass


def broken(*_args, **_kwargs):
    raise DeviceFault("the kernel failed")


def test_an_alloc_whose_zeroing_fails_leaves_the_slots_free(monkeypatch):
    pool = populated()
    frozen = Frozen(pool)
    monkeypatch.setattr(pool_module, "zero_slots", broken)
    with pytest.raises(DeviceFault):
        pool.alloc(2, R2)
    assert frozen.unchanged()
    assert pool.state_of([7, 8]) == [State.FREE, State.FREE] and pool.available() == 2
    monkeypatch.undo()
    assert pool.alloc(2, R2).tolist() == [7, 8]
    assert pool.audit().clean


def test_a_fork_whose_copy_fails_allocates_nothing(monkeypatch):
    pool = populated()
    frozen = Frozen(pool)
    monkeypatch.setattr(pool_module, "copy_slots", broken)
    with pytest.raises(DeviceFault):
        pool.fork(1, R1)
    assert frozen.unchanged()
    monkeypatch.undo()
    assert pool.fork(1, R1).tolist() == [7]


def test_a_fork_from_a_batch_of_sources_is_refused_before_it_allocates():
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(BadSlotId, match="one slot id"):
        pool.fork(torch.tensor([1, 2]), R1)  # held slots, but two of them: the copy would fail after the alloc
    assert frozen.unchanged()


def test_a_ledger_hook_that_raises_leaves_the_ledger_as_it_was():
    led = SlotLedger(4)
    ids = led.alloc(2, R1)
    led.apply(Event.ADMIT, ids, R1)
    led.launch()
    led.apply(Event.FINISH, ids[:1], R1)
    before, seq = led.snapshot(), led.recorder.seq
    for call in (
        lambda hook: led.alloc(1, R2, before_write=hook),
        lambda hook: led.apply(Event.ABORT, ids[1:], R1, before_write=hook),
        lambda hook: led.fence(1, before_write=hook),
    ):
        with pytest.raises(DeviceFault):
            call(broken)
        now = led.snapshot()
        assert all((before[k] == now[k]) if k == "counters" else torch.equal(before[k], now[k]) for k in before)
        assert led.recorder.seq == seq
    assert led.fence(1).tolist() == [1]


class FailingFree(TensorFreeList):
    """An engine allocator whose `free` raises while `failing` is set (a device error)."""

    failing = False

    def free(self, free_index):
        if self.failing:
            raise DeviceFault("free failed")
        super().free(free_index)


def test_when_the_engine_cannot_take_a_rollback_back_the_guard_keeps_the_slot_where_it_was():
    engine = FailingFree(4)
    guard = LedgerGuard(engine, 4)
    ids = guard.alloc(2, R1)
    frozen = Untouched(engine, guard)
    engine.failing = True
    for event in (Event.ROLLBACK, Event.ABORT):
        with pytest.raises(DeviceFault):
            guard.fire(event, ids, R1)
        frozen.check()
    assert [guard.ledger.record(i) for i in (1, 2)] == [
        Slot(State.TAKEN, owner=1)
    ] * 2  # not FREE: the engine never got them
    engine.failing = False
    assert guard.fire(Event.ROLLBACK, ids, R1).tolist() == [1, 2]
    assert sorted(engine.free_slots.tolist()) == [1, 2, 3, 4]
    assert guard.ledger.audit(set(), set()).clean


def test_when_the_engine_cannot_take_fenced_slots_back_they_stay_released_until_it_can():
    engine = FailingFree(4)
    guard = LedgerGuard(engine, 4)
    ids = guard.alloc(2, R1)
    guard.fire(Event.ADMIT, ids, R1)
    guard.launch()
    guard.fire(Event.FINISH, ids, R1)
    frozen = Untouched(engine, guard)
    engine.failing = True
    with pytest.raises(DeviceFault):
        guard.fence()
    frozen.check()
    assert guard.ledger.completed == 0
    engine.failing = False
    assert guard.fence().tolist() == [1, 2]
    assert guard.ledger.completed == 1 and sorted(engine.free_slots.tolist()) == [1, 2, 3, 4]


def test_an_engine_alloc_of_the_wrong_size_is_handed_back():
    class Generous(TensorFreeList):
        def alloc(self, need_size):
            return super().alloc(need_size + 1)

    engine = Generous(4)
    guard = LedgerGuard(engine, 4)
    with pytest.raises(BadSlotId, match=r"the engine's alloc\(1\) gave"):
        guard.alloc(1, R1)
    assert sorted(engine.free_slots.tolist()) == [1, 2, 3, 4]
    assert np.all(guard.ledger.state_of([1, 2, 3, 4]) == int(State.FREE))
