"""`GuardedAllocator`'s compiled lane (`runtime/ledger/lane.py`, `_lane.c`): the usual `alloc`
and `free` are one C call each, and do what the guard's Python does. That comparison (random
histories and frees, call for call: errors, engine free list, columns, recorder) is
test_fast_path.py's, run here on a broken lane too, which it must catch: one that reads a free
table routing a borrower's free of a lent slot to a rollback (the seed bug). A trace, a recorder
that fails, another thread, an engine's odd alloc: as the Python does."""

from __future__ import annotations

import io
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from slotwarden.model.errors import WrongThread
from slotwarden.model.vocabulary import Actor, ActorKind, Event, Relation, State
from slotwarden.runtime.guarded_allocator import ACTING, GuardedAllocator, acting
from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger.lane import lane
from slotwarden.runtime.ledger.recorder import FlightRecorder
from slotwarden.runtime.ledger.state import WriteInterrupted
from slotwarden.trace_examples import FreeList
from engines import ENGINES, Untouched

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fast_path import same_as_general_path  # noqa: E402

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled move is not built here")

R1, R2 = Actor.request(1), Actor.request(2)


class PythonOnly(GuardedAllocator):
    """The guard with its compiled lane off: its Python does every call (the reference)."""

    LANE = False


class _BrokenLane(GuardedAllocator):
    """A lane built from tables changed by `tamper`, the guard's Python keeping the model's."""

    def __init__(self, engine):
        super().__init__(engine)
        table, self._free_event = self._free_event, self._free_event.copy()
        moves, self._one_move = self._one_move, self.tamper(self._free_event, self._one_move)
        self._lane = lane(self, GuardedAllocator, ACTING)
        self.alloc, self.free = self._lane.alloc, self._lane.free
        self._free_event, self._one_move = table, moves

    @staticmethod
    def tamper(free_event, one_move):
        return one_move


class BorrowerRollsBack(_BrokenLane):
    """Broken: the lane's free table has a borrower's free of a lent slot as a rollback."""

    @staticmethod
    def tamper(free_event, one_move):
        free_event[ActorKind.REQUEST, State.LENT, Relation.BORROWER] = int(Event.ROLLBACK)
        return one_move


@pytest.fixture(params=ENGINES)
def engine_cls(request):
    return request.param


@pytest.mark.parametrize("n", [1, 2, 5])
def test_the_usual_calls_are_the_lanes(n, monkeypatch, engine_cls):
    g = GuardedAllocator(engine_cls(8, "cpu"))
    assert type(g.alloc).__name__ == "builtin_function_or_method"  # bound over the Python methods

    def no(*args, **kw):
        raise AssertionError("the guard's Python was asked")

    with acting(R1):  # the first call binds the ledger to this thread (the guard's Python does that)
        g.free(g.alloc(1))
    for name in ("_free_one_move", "_free_arrays", "_actor"):
        monkeypatch.setattr(g, name, no)
    for name in ("_record_alloc", "alloc"):
        monkeypatch.setattr(g.guard, name, no)
    for name in ("apply", "apply_one", "apply_raw", "fence"):
        monkeypatch.setattr(g.ledger, name, no)
    with acting(R1):
        ids = g.alloc(n)
        g.free(ids)
    assert g.available_size() == 8 and g.audit().clean


def test_a_subclass_that_overrides_free_keeps_its_own():
    class Own(GuardedAllocator):
        def free(self, free_index):
            return "own"

    g = Own(FreeList(4, "cpu"))
    assert g.free(torch.tensor([1])) == "own" and type(g.alloc).__name__ == "builtin_function_or_method"


@pytest.mark.parametrize(
    "cls",
    [
        GuardedAllocator,
        pytest.param(BorrowerRollsBack, marks=pytest.mark.xfail(strict=True, reason="broken variant")),
    ],
)
def test_the_lane_does_what_the_general_path_does(cls):
    """test_fast_path.py's comparison over its seeds, on this lane: every seed agrees."""
    disagree = [seed for seed in range(120) if not same_as_general_path(seed, cls)]
    assert not disagree, f"seeds {disagree[:8]} disagree"


def _calls(g, engine):
    """The usual calls and a few others (a finish released then fenced, a session's turn)."""
    with acting(R1):
        a = g.alloc(3)
        g.admit(a[:1])
        g.free(a)
        b = g.alloc(1)
        g.admit(b)
        g.park(b, 5)
    with acting(Actor.session(5)):
        g.lend(b, 2)
    with acting(R2):
        c = g.alloc(2)
        g.free(c)
        g.admit(b)
        g.fire(Event.FINISH, b)
    with acting(Actor.session(5)):
        g.free(b)


@pytest.mark.parametrize("engine_cls", ENGINES)
def test_a_trace_through_the_lane_is_the_pythons(engine_cls):
    traces = []
    for cls in (GuardedAllocator, PythonOnly):
        out = io.StringIO()
        g = cls(engine_cls(6, "cpu"), trace=out)
        _calls(g, None)
        assert g.audit().clean
        traces.append(out.getvalue())
    assert traces[0] == traces[1] and traces[0].count("\n") >= 8


class FailingRecorder(FlightRecorder):
    fail = False

    def record(self, *args):
        if self.fail:
            raise MemoryError("the recorder failed")
        super().record(*args)


@pytest.mark.parametrize("call", ["alloc", "free"])
def test_a_write_the_recorder_interrupts_leaves_the_ledger_refusing(call):
    """As in the Python: the columns are written, the record fails, every later call refuses."""
    outcomes = []
    for cls in (GuardedAllocator, PythonOnly):
        g = cls(FreeList(4, "cpu"))
        g.ledger.recorder = FailingRecorder()
        with acting(R1):
            ids = g.alloc(2)
            g.ledger.recorder.fail = True
            with pytest.raises(MemoryError):
                g.alloc(1) if call == "alloc" else g.free(ids)
            with pytest.raises(WriteInterrupted):
                g.alloc(1)
        outcomes.append(g.ledger.cols.state.tolist())
    assert outcomes[0] == outcomes[1]


def test_another_thread_is_refused_with_nothing_changed(engine_cls):
    g = GuardedAllocator(engine_cls(4, "cpu"))
    with acting(R1):
        ids = g.alloc(1)
    frozen, errors = Untouched(g.allocator, g.guard), []

    def other():
        for call, arg in ((g.alloc, 1), (g.free, ids)):
            try:
                with acting(R1):
                    call(arg)
            except WrongThread as e:
                errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 2
    frozen.check()


@pytest.mark.parametrize("junk", ["int32", "2-D", "short", "taken", "strided"])
def test_an_odd_alloc_by_the_engine_is_what_the_python_makes_of_it(junk):
    """An engine whose alloc gives another dtype, shape or length, a slot already taken, or a
    strided view: the lane hands it to the guard's Python, which takes it or refuses it."""

    class Odd(FreeList):
        def alloc(self, need_size):
            got = super().alloc(need_size)
            if got is None or not self.odd:
                return got
            if junk == "int32":
                return got.to(torch.int32)
            if junk == "2-D":
                return got.reshape(1, -1)
            if junk == "short":
                return got[:1]
            if junk == "taken":
                return torch.cat((got[:-1], self.first))
            return torch.cat((got, got)).reshape(2, -1).t()[:, 0]

    outcomes = []
    for cls in (GuardedAllocator, PythonOnly):
        engine = Odd(6, "cpu")
        engine.odd = False
        g = cls(engine)
        with acting(R1):
            engine.first = g.alloc(1)
            engine.odd = True
            try:
                got = g.alloc(3).tolist()
            except Exception as e:  # noqa: BLE001 - the error is what is compared
                got = (type(e), str(e))
        kept = [(e.event, e.actor, e.ids.tolist()) for e in g.ledger.recorder.entries]
        outcomes.append((got, sorted(engine.free_slots.tolist()), g.ledger.cols.state.tolist(), kept))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("admitted", [False, True], ids=["rollback", "finish"])
@pytest.mark.parametrize("shuffled", [False, True], ids=["one run", "scattered"])
def test_a_large_batch_is_what_the_python_makes_of_it(admitted, shuffled):
    """A batch of hundreds of slots (one run, kept in the record as its range; or scattered),
    rolled back or finished while a step is on the device and fenced later: the same record,
    trace, engine free list and columns as the guard's Python."""
    outcomes = []
    for cls in (GuardedAllocator, PythonOnly):
        out = io.StringIO()
        engine = FreeList(600, "cpu")
        g = cls(engine, trace=out)
        done = []
        with acting(R1):
            ids = g.alloc(300)
            if shuffled:
                ids = ids[torch.randperm(300, generator=torch.Generator().manual_seed(0))]
            if admitted:
                g.admit(ids)
                g.launch(lambda: bool(done))
            g.free(ids)
            done.append(True)
            g.free(g.alloc(200))
        kept = [(e.event, e.actor, e.ids.tolist(), np.asarray(e.before).tolist()) for e in g.ledger.recorder.entries]
        outcomes.append((kept, out.getvalue(), engine.free_slots.tolist(), g.ledger.cols.state.tolist()))
        assert g.audit().clean
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("shuffled", [False, True], ids=["one run", "scattered"])
@pytest.mark.parametrize("n", [1, 3, 200])
def test_an_engine_that_writes_into_the_freed_tensor_changes_nothing_of_the_ledger(n, shuffled):
    """The ids are read once, before the engine's `free` is handed the tensor: an engine that
    then overwrites it (here with the pad slot) leaves the ledger as the guard's Python does."""

    class Scribbling(FreeList):
        def free(self, free_index):
            super().free(free_index.clone())
            free_index.fill_(0)

    outcomes = []
    for cls in (GuardedAllocator, PythonOnly):
        g = cls(Scribbling(300, "cpu"))
        with acting(R1):
            ids = g.alloc(n)
            if shuffled:  # more runs than the kernel moves a run at a time: a slot at a time
                ids = ids[torch.randperm(n, generator=torch.Generator().manual_seed(1))]
            g.free(ids)
        assert g.audit().clean, g.audit().problems
        kept = [(e.event, e.ids.tolist()) for e in g.ledger.recorder.entries]
        outcomes.append((kept, g.ledger.cols.state.tolist(), g.ledger.cols.owner.tolist()))
    assert outcomes[0] == outcomes[1]
