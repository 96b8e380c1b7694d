"""The compiled move itself (`runtime/ledger/_move.c` through `kernels.compiled`): built, bound to a
ledger's columns, refusing what it must with the position and the reason, and writing nothing
then. (That it agrees with every other path, call by call, is tests/runtime/ledger/test_paths.py.)"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from slotwarden.runtime.ledger import compiled
from slotwarden.model.errors import BadSlotId, IllegalMove
from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.ledger.ledger import SlotLedger

needs_kernel = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled move is not built here")


def test_the_compiled_move_is_built_where_there_is_a_compiler():
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the ledger keeps to its numpy path")
    if os.environ.get("SLOTWARDEN_NUMPY_ONLY") == "1":
        pytest.skip("SLOTWARDEN_NUMPY_ONLY=1: the compiled move is left out")
    assert compiled.AVAILABLE, "pip install -e . should have built slotwarden.runtime.ledger._move"
    assert SlotLedger(4).mover is not None and SlotLedger(4, check="off").mover is None


def _columns(ledger: SlotLedger):
    return {k: v.numpy().copy() for k, v in ledger.tensors.items() if k != "stamp"}


def _move(ledger, event, ids, actor_id, write=True, dup=True):
    ids = np.asarray(ids, dtype=np.int64)
    before, after = np.empty(ids.size, np.uint8), np.empty(ids.size, np.uint8)
    got = ledger.mover.move(int(event), ids, actor_id, -1, ledger.launched, before, after, None, write, dup)
    return got, before, after


@needs_kernel
@pytest.mark.parametrize("runs", [16, 0])
def test_a_refusal_names_its_position_and_reason_and_writes_nothing(runs):
    ledger = SlotLedger(8)
    ledger.mover.runs = runs
    ids = ledger.alloc(4, Actor.request(1))  # slots 1..4
    cases = {
        "not a slot": ([1, 2, 9], 2, compiled.NOT_A_SLOT),
        "the pad slot": ([0, 1], 0, compiled.NOT_A_SLOT),
        "named twice": ([1, 3, 2, 3], 3, compiled.TWICE),
        "not the owner's": ([1, 2, 5], 2, compiled.REFUSED),  # slot 5 is FREE
    }
    for name, (batch, position, why) in cases.items():
        before = _columns(ledger)
        got, _, _ = _move(ledger, Event.ADMIT, batch, 1)
        assert got < 0 and compiled.refusal(got) == (position, why), name
        assert all(np.array_equal(before[k], v) for k, v in _columns(ledger).items()), name
    got, b, a = _move(ledger, Event.ADMIT, ids, 1)
    assert (
        got == int(State.RUNNING) | int(State.TAKEN) << 8
        and set(a) == {int(State.RUNNING)}
        and set(b) == {int(State.TAKEN)}
    )


@needs_kernel
def test_a_mixed_batch_without_state_arrays_is_asked_again():
    ledger = SlotLedger(8)
    a, b = Actor.request(1), Actor.request(2)
    ledger.alloc(2, a)
    ledger.alloc(2, b)
    ledger.apply(Event.ADMIT, [1, 2], a)  # 1, 2 RUNNING; 3, 4 TAKEN
    ids = np.array([1, 2, 3, 4], dtype=np.int64)
    before = _columns(ledger)
    who = np.array([1, 1, 2, 2], dtype=np.int64)
    got = ledger.mover.move(int(Event.ABORT), ids, who, -1, 0, None, None, None, True, True)
    assert got == compiled.ASK_WITH_STATES
    assert all(np.array_equal(before[k], v) for k, v in _columns(ledger).items())
    ledger.apply_each(Event.ABORT, ids, who)  # the ledger asks again with arrays
    assert ledger.state_of(ids).tolist() == [int(State.RELEASED)] * 2 + [int(State.FREE)] * 2
    assert ledger.recorder.entries[-1].before.tolist() == [int(State.RUNNING)] * 2 + [int(State.TAKEN)] * 2


@needs_kernel
def test_the_duplicate_marks_start_again_when_used_up():
    """Batches of more runs than the kernel takes as runs are checked for duplicates by marks
    in the scratch column; when the marks are used up the column is cleared and they start
    again, and a duplicate is still found."""
    ledger = SlotLedger(40)
    r = Actor.request(1)
    ids = ledger.alloc(40, r)
    scattered = np.concatenate((ids[::2], ids[1::2]))  # 40 runs of one slot
    ledger.mover.mark = np.iinfo(np.int32).min + 1
    ledger.apply(Event.ADMIT, scattered, r)  # clears the column, starts again from -2
    assert ledger.mover.mark == -2
    with pytest.raises(BadSlotId, match="twice"):
        ledger.apply(Event.FINISH, np.concatenate((scattered, scattered[-1:])), r)
    ledger.mover.mark = np.iinfo(np.int32).min + 1
    with pytest.raises(BadSlotId, match="twice"):  # found across the restart too
        ledger.apply(Event.FINISH, np.concatenate((scattered[:30], scattered[5:6])), r)
    ledger.apply(Event.FINISH, scattered, r)
    assert ledger.state_of(ids).tolist() == [int(State.RELEASED)] * 40


@needs_kernel
def test_a_layout_other_than_the_kernels_is_refused():
    ledger = SlotLedger(4)
    rows, probes = compiled.packed(ledger.tables)
    c = ledger.cols
    columns = (c.state, c.last_event, c.owner, c.borrower, c.fence, c.readers, ledger._stamp)
    compiled.Mover(columns, rows, probes, compiled.LAYOUT, compiled.SOURCES)  # the real one binds
    other = compiled.LAYOUT[:1] + (32,) + compiled.LAYOUT[2:]  # another owner bit
    with pytest.raises(ValueError, match="layout"):
        compiled.Mover(columns, rows, probes, other, compiled.SOURCES)
    with pytest.raises(ValueError, match="source"):
        compiled.Mover(columns, rows, probes, compiled.LAYOUT, (9, 1, 2, 3, 4, 5, 6))


@needs_kernel
def test_the_ledger_raises_when_its_paths_disagree(monkeypatch):
    """A compiled move that refuses what the numpy path allows: the ledger says so, and
    writes nothing."""
    real = compiled.packed

    def strict_finish(tables):
        rows, probes = real(tables)
        rows = rows.copy()
        rows[int(Event.FINISH), 0, :] = 255  # FINISH refused from every state
        return rows, probes

    monkeypatch.setattr(compiled, "packed", strict_finish)
    ledger = SlotLedger(8)
    r = Actor.request(1)
    ids = ledger.alloc(4, r)
    ledger.apply(Event.ADMIT, ids, r)
    before = _columns(ledger)
    with pytest.raises(RuntimeError, match="disagree"):
        ledger.apply(Event.FINISH, ids, r)
    assert all(np.array_equal(before[k], v) for k, v in _columns(ledger).items())
    ledger.mover = None  # the numpy path alone allows it
    ledger.apply(Event.FINISH, ids, r)


@needs_kernel
def test_a_typed_error_comes_from_the_numpy_path():
    ledger = SlotLedger(8)
    r, q = Actor.request(1), Actor.request(2)
    ids = ledger.alloc(4, r)
    with pytest.raises(IllegalMove) as err:
        ledger.apply(Event.ADMIT, ids, q)
    assert err.value.slot_id == 1 and err.value.actor == q and err.value.event is Event.ADMIT


@needs_kernel
@pytest.mark.parametrize("first", [10**12, -(10**12), 0, 65])
def test_a_scattered_batch_led_by_no_slot_is_refused_before_any_read(first):
    """A batch of more runs than the kernel takes as runs, whose first id names no slot (far
    out of range, too): refused as not a slot, at position 0, nothing read or written there."""
    ledger = SlotLedger(64)
    r = Actor.request(1)
    ids = ledger.alloc(40, r)
    batch = np.concatenate(([first], ids[::2], ids[1::2])).astype(np.int64)  # 41 runs
    got, _, _ = _move(ledger, Event.ADMIT, batch, 1)
    assert compiled.refusal(got) == (0, compiled.NOT_A_SLOT)
    with pytest.raises(BadSlotId):
        ledger.apply(Event.ADMIT, batch, r)


# -- found by review: ids that are a view of a column, a rebinding that fails, junk arguments ---
@needs_kernel
def test_the_kernel_copies_ids_that_lie_in_its_own_columns():
    """Ids that are a view of the owner column the move rewrites: the kernel reads them from a
    copy of its own, so no later id turns into NOBODY (-1) mid-batch and no write lands before
    the columns (a canary cell sits just before each)."""
    n = 65
    state, last, fence, readers = (np.zeros(n + 1, t) for t in (np.uint8, np.uint8, np.int32, np.uint8))
    owner, borrower, stamp = np.full(n + 1, -1, np.int64), np.full(n + 1, -1, np.int64), np.full(n + 1, -1, np.int32)
    for a in (state, last, fence, readers):
        a[0] = 0x5A
    owner[0] = 12345
    canaries = [(a, int(a[0])) for a in (state, last, fence, readers, owner)]
    from slotwarden.runtime.ledger.transition import compile_events

    rows, probes = compiled.packed(compile_events())
    columns = (state[1:], last[1:], owner[1:], borrower[1:], fence[1:], readers[1:], stamp[1:])
    mover = compiled.Mover(columns, rows, probes, compiled.LAYOUT, compiled.SOURCES)
    owner[2:34] = np.arange(32, 0, -1)  # slot s is owned by request 33 - s
    state[2:34] = int(State.TAKEN)
    ids = owner[2:34]  # a view of the owner column: slots 32 .. 1
    got = mover.move(int(Event.ROLLBACK), ids, (33 - ids).copy(), -1, 0, None, None, None, True, True)
    assert got == int(State.FREE) | int(State.TAKEN) << 8
    assert state[2:34].tolist() == [int(State.FREE)] * 32 and (owner[2:34] == -1).all()
    assert [int(a[0]) for a, _ in canaries] == [int(v) for _, v in canaries]


@pytest.mark.parametrize("path", ["compiled", "numpy"])
@pytest.mark.parametrize("broken", [False, True])
def test_ids_that_view_a_column_of_the_ledger_are_taken_as_a_copy(monkeypatch, path, broken):
    """apply_each with ids that are a view of the ledger's own owner column: the ledger moves a
    copy, so the free ring gets the slots, not what their owner fields became (NOBODY). Broken
    variant: a ledger that never sees the sharing corrupts its free ring (the audit says so)."""
    from slotwarden.runtime.ledger.batch import BatchPath

    if path == "compiled" and not compiled.AVAILABLE:
        pytest.skip("the compiled move is not built here")
    if broken:
        monkeypatch.setattr(BatchPath, "_shares_memory", lambda self, array: False)
    ledger = SlotLedger(64)
    if path == "numpy":
        ledger.mover = None
    ledger.alloc_each(np.arange(32, 0, -1))  # slot s for request 33 - s ...
    ids = ledger.cols.owner[1:33]  # ... so the owner column, as ids, names slots 32 .. 1
    ledger.apply_each(Event.ROLLBACK, ids, (33 - ids).copy())
    problems = ledger.audit().problems
    assert bool(problems) == broken, problems


@needs_kernel
def test_a_mover_whose_rebinding_failed_refuses_every_move():
    ledger = SlotLedger(4)
    mover = ledger.mover
    with pytest.raises(ValueError):
        mover.__init__((), *compiled.packed(ledger.tables), compiled.LAYOUT, compiled.SOURCES)
    with pytest.raises(ValueError, match="not one of the 0"):
        mover.move(0, np.array([1], dtype=np.int64), 1, -1, 0, None, None, None, True, True)


@needs_kernel
def test_junk_arguments_to_the_kernel_are_refused():
    ledger = SlotLedger(8)
    ids = ledger.alloc(4, Actor.request(1))
    mover = ledger.mover
    with pytest.raises(OverflowError, match="fence column"):  # a step past int32: the numpy path refuses it too
        mover.move(int(Event.FINISH), ids, 1, -1, 2**32 + 5, None, None, None, True, True)
    with pytest.raises(ValueError, match="int64"):  # float ids are not read as int64 bit patterns
        mover.move(int(Event.ADMIT), ids.astype(np.float64), 1, -1, 0, None, None, None, True, True)
    with pytest.raises(ValueError, match="mark"):  # a mark may only move on, down
        mover.mark = 0
    mover.runs = 0
    mover.mark = np.iinfo(np.int32).min + 1
    ledger.apply(Event.ADMIT, np.array([4, 1, 3, 2]), Actor.request(1))  # the marks start again ...
    assert mover.runs == 0  # ... and leave the run setting as it was
