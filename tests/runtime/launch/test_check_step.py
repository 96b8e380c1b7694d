"""`pool.launch(slots=...)` and `check_step`: a launched step's write set is checked against the
ledger before the step launches, all or nothing, refusing what the model refuses, in its words."""

import numpy as np
import pytest
import torch

from slotwarden.model.errors import BadInput, IllegalStep
from slotwarden.model.lifecycle import LIFECYCLE, ROWS, WRITE_SET
from slotwarden.model.vocabulary import NOBODY, Actor, Event, Relation, State
from slotwarden.model.write_set import Access, Fill, declare_write_set
from slotwarden.runtime import launch
from slotwarden.runtime.launch import Tables, check_step
from slotwarden.runtime.pool import StatePool
from slotwarden.verification.edges import write_set as edges
from pools import CFG, Frozen

R1, R7 = Actor.request(1), Actor.request(7)


running = edges.running


def test_a_good_step_launches_and_fills_what_it_writes():
    pool = running()
    before = pool.ledger.launched
    step = pool.launch(slots=[1, 2, 3, 5, 0, 0], actors=[1, 1, 1, 7, NOBODY, NOBODY], sources=[6, 2, 3, 5, 0, 0])
    assert step == before + 1 and all(pool.fills[[1, 2, 3, 5]] == Fill.WRITTEN)


@pytest.mark.parametrize(
    "slots, actors, sources, row, slot, holder, actor",
    [
        ([1, 0, 4], [1, NOBODY, NOBODY], None, 2, 4, Actor.session(5), None),  # a pad aliases a parked slot
        ([1, -1], [1, NOBODY], None, 1, -1, None, None),  # PADDING_SLOT_ID = -1 used as an index
        ([1, 4], [1, 1], None, 1, 4, Actor.session(5), R1),  # another's slot (a stale row mapping)
        ([1, 2, 1], [1, 1, 1], None, 2, 1, R1, R1),  # written by two rows
        ([1, 9], [1, 1], None, 1, 9, None, R1),  # past the pool
        ([5, 1], [7, 1], [1, 1], 0, 1, R1, R7),  # reads another request's running slot
        ([5], [7], [6], 0, 6, Actor.cache(3), R7),  # a cached slot it holds no lock on
        ([7], [4], None, 0, 7, None, Actor.request(4)),  # a released slot
    ],
    ids=["pad alias", "-1 pad", "another's", "twice", "past", "read another's", "unlocked cache", "released"],
)
def test_a_bad_step_is_refused_whole_naming_row_slot_holder_and_actor(slots, actors, sources, row, slot, holder,
                                                                       actor):  # fmt: skip
    pool = running()
    frozen, fills, launched = Frozen(pool), pool.fills.copy(), pool.ledger.launched
    with pytest.raises(IllegalStep) as refused:
        pool.launch(slots=slots, actors=actors, sources=sources)
    e = refused.value
    assert (e.row, e.slot_id, e.holder, e.actor) == (row, slot, holder, actor), str(e)
    assert f"row {row}" in str(e)
    assert frozen.unchanged() and pool.ledger.launched == launched and np.array_equal(pool.fills, fills)


def test_a_first_read_with_no_zeroing_since_alloc_is_refused(monkeypatch):
    """A pool whose alloc does not zero (vLLM #56524; SGLang #39862 set the index bypassing the
    alloc that zeroes): the slot is stale, its first step refused; zeroing it lets it launch."""
    pool = StatePool(CFG)
    monkeypatch.setattr(pool, "_zero_batch", lambda batch: None)
    ids = pool.alloc(1, R1)
    pool.admit(ids, R1)
    with pytest.raises(IllegalStep, match="stale"):
        pool.launch(slots=ids, actors=[1])
    monkeypatch.undo()
    pool.zero(ids, R1)
    pool.launch(slots=ids, actors=[1])


def test_an_engine_checks_its_own_index_tensor_with_check_step():
    pool = running()
    check_step(pool.ledger, torch.tensor([1, 2, 0]), torch.tensor([1, 1, NOBODY]), pad=0)
    with pytest.raises(BadInput, match="pad slot is 0"):
        check_step(pool, [1], [1], pad=-1)
    with pytest.raises(BadInput, match="one per row"):
        check_step(pool, [1, 2], [1])


def test_the_check_reads_the_declaration():
    """With a write set that lets a request's row address a parked slot, that step passes."""
    import dataclasses

    parked = Access(State.PARKED, Relation.NONE)
    loose_row = dataclasses.replace(ROWS[0], writes=ROWS[0].writes + (parked,), reads=ROWS[0].reads + (parked,))
    loose = declare_write_set(LIFECYCLE, (loose_row, ROWS[1]), 0, WRITE_SET.readable)
    pool = running()
    with pytest.raises(IllegalStep):
        check_step(pool, [1, 4], [1, 2])
    check_step(pool, [1, 4], [1, 2], tables=Tables(loose))


disagreements = edges.disagreements


def test_the_batched_check_refuses_exactly_what_the_model_refuses():
    assert disagreements(check_step) == []


def test_the_comparison_catches_a_batched_check_that_misses_a_fault(monkeypatch):
    """A batched check blind to stale reads, or to a pad row off the pad slot, disagrees."""
    real = launch._faults
    monkeypatch.setattr(launch.compiled, "AVAILABLE", False)  # the numpy path, whose _faults is patched

    def blind_to_stale(ledger, ids, who, src, pad, fills, tables):
        return real(ledger, ids, who, src, pad, None, tables)

    monkeypatch.setattr(launch, "_faults", blind_to_stale)
    assert disagreements(check_step)
    monkeypatch.setattr(launch, "_faults", lambda *a: real(*a) & (np.asarray(a[2]) != NOBODY))
    assert disagreements(check_step)


def test_a_guard_offers_the_same_check_to_an_engine():
    from slotwarden.runtime.free_list import FreeList
    from slotwarden.runtime.guard import LedgerGuard

    guard = LedgerGuard(FreeList(4), capacity=4)
    ids = guard.alloc(2, R1)
    guard.fire(Event.ADMIT, ids, R1)
    check_step(guard, torch.cat([ids, torch.tensor([0, 0])]), [1, 1, NOBODY, NOBODY])
    with pytest.raises(IllegalStep) as refused:
        check_step(guard, torch.cat([ids, torch.tensor([-1])]), [1, 1, NOBODY])  # vLLM #43810's pad id
    assert (refused.value.row, refused.value.slot_id, refused.value.actor) == (2, -1, None)
