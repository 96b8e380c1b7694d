"""The guard's fills (`fills=True`): an alloc leaves its slots STALE (the compiled lane's alloc
too), the engine says where it zeroed and copied, and the step check refuses a first read of a
stale slot; an accepted step leaves its slots WRITTEN. Off by default: nothing is kept."""

import numpy as np
import pytest
import torch

from slotwarden.model.errors import BadSlotId, IllegalStep
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.model.write_set import Fill
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.guarded_allocator import GuardedAllocator
from slotwarden.runtime.ledger import lane as lane_module

R1, R2 = Actor.request(1), Actor.request(2)
STALE, ZEROED, COPIED, WRITTEN = (int(f) for f in (Fill.STALE, Fill.ZEROED, Fill.COPIED, Fill.WRITTEN))


class _Python(GuardedAllocator):
    LANE = False  # the guard's Python path


def allocator(use_lane: bool) -> GuardedAllocator:
    return (GuardedAllocator if use_lane else _Python)(FreeList(4), fills=True)


def taken(a: GuardedAllocator, actor: Actor, n: int = 1) -> torch.Tensor:
    with a.acting(actor):
        ids = a.alloc(n)
        a.admit(ids)
    return ids


def python_allocs(monkeypatch) -> list:
    """The allocs that reach the guard's Python (`_record_alloc`), from now on."""
    calls, record = [], LedgerGuard._record_alloc
    monkeypatch.setattr(LedgerGuard, "_record_alloc", lambda g, *a: calls.append(a) or record(g, *a))
    return calls


@pytest.mark.parametrize("use_lane", [True, False], ids=["lane", "python"])
def test_an_alloc_leaves_its_slots_stale_and_a_first_read_of_them_is_refused(use_lane, monkeypatch):
    a = allocator(use_lane)
    first = taken(a, R2)  # a first alloc may take the guard's Python even on the lane
    a.zeroed(first)
    calls = python_allocs(monkeypatch)
    ids = taken(a, R1, 2)
    assert len(calls) == (0 if use_lane and a._lane is not None else 1)
    assert (a.guard.fills[ids.numpy()] == STALE).all() and a.guard.fills[int(first)] == ZEROED
    with pytest.raises(IllegalStep) as refused:
        a.check_step(ids, [1, 1])
    assert refused.value.row == 0 and refused.value.slot_id == int(ids[0]) and "stale" in str(refused.value)
    assert (a.guard.fills[ids.numpy()] == STALE).all()  # a refused step changes nothing
    a.zeroed(ids)
    a.check_step(torch.cat([ids, torch.tensor([0])]), [1, 1, -1])
    assert (a.guard.fills[ids.numpy()] == WRITTEN).all() and a.guard.fills[0] == a.guard.fills[4] == ZEROED


def test_a_slot_taken_again_is_stale_again():
    a = allocator(True)
    one = taken(a, R1)
    a.zeroed(one)
    a.check_step(one, [1])
    with a.acting(R1):
        a.free(one)
    a.fence()
    while True:  # the free list hands slots out in turn: take them until `one` comes back
        again = taken(a, R2)
        if int(again) == int(one):
            break
    assert a.guard.fills[int(one)] == STALE
    with pytest.raises(IllegalStep):
        a.check_step(again, [2])


def test_a_copy_takes_its_sources_fill():
    a = allocator(True)
    src, stale_src, dst, other = (taken(a, R1) for _ in range(4))
    a.zeroed(src)
    a.copied(torch.cat([dst, other]), torch.cat([src, stale_src]))
    assert a.guard.fills[int(dst)] == COPIED and a.guard.fills[int(other)] == STALE
    a.copied(other)  # from outside this pool: the engine vouches for it
    assert a.guard.fills[int(other)] == COPIED
    a.copied(torch.cat([dst, other]), torch.cat([src, src]))  # two copies of one cached prefix
    assert a.guard.fills[int(dst)] == a.guard.fills[int(other)] == COPIED
    a.check_step(torch.cat([dst, other]), [1, 1])


@pytest.mark.parametrize(
    "call",
    [
        lambda a, ids: a.zeroed([int(ids[0]), -1]),
        lambda a, ids: a.zeroed([0]),
        lambda a, ids: a.zeroed([5]),
        lambda a, ids: a.copied([int(ids[0]), int(ids[1])], [int(ids[0])]),
        lambda a, ids: a.copied([int(ids[0])], [9]),
        lambda a, ids: a.copied([int(ids[0])], [0]),
        lambda a, ids: a.copied([int(ids[0]), int(ids[0])], [int(ids[1]), int(ids[1])]),
    ],
    ids=[
        "-1",
        "the pad slot",
        "past the pool",
        "sizes differ",
        "a source past the pool",
        "the pad as source",
        "a dst twice",
    ],
)
def test_a_bad_fill_report_is_refused_and_changes_nothing(call):
    a = allocator(True)
    ids = taken(a, R1, 2)
    before = a.guard.fills.copy()
    with pytest.raises(BadSlotId):
        call(a, ids)
    assert (a.guard.fills == before).all()


def test_without_fills_nothing_is_kept_and_no_first_read_is_judged():
    a = GuardedAllocator(FreeList(4))
    ids = taken(a, R1, 2)
    assert a.guard.fills is None
    a.zeroed([1, 5])  # nothing is kept: nothing to refuse
    a.check_step(ids, [1, 1])


def test_the_ledger_guard_keeps_fills_itself():
    g = LedgerGuard(FreeList(3), 3, fills=True)
    ids = g.alloc(2, R1)
    g.fire(Event.ADMIT, ids, R1)
    assert (g.fills[ids.numpy()] == STALE).all()
    g.zeroed(ids[:1])
    with pytest.raises(IllegalStep) as refused:
        g.check_step(ids, [1, 1])
    assert refused.value.row == 1


def test_a_lane_blind_to_fills_would_fail_the_tests_above(monkeypatch):
    real = lane_module.lane

    def blind(guarded, cls, acting):  # the lane built as if the guard kept no fills
        fills, guarded.guard.fills = guarded.guard.fills, None
        try:
            return real(guarded, cls, acting)
        finally:
            guarded.guard.fills = fills

    monkeypatch.setattr("slotwarden.runtime.guarded_allocator.lane", blind)
    a = allocator(True)
    if a._lane is None:
        pytest.skip("the compiled lane is not built")
    taken(a, R2)
    calls = python_allocs(monkeypatch)
    ids = taken(a, R1, 2)
    assert not calls and np.array_equal(a.guard.fills[ids.numpy()], [ZEROED, ZEROED])  # not STALE: the test fails
