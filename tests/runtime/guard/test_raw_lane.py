"""`GuardedAllocator`'s raw lane: host ids are read once (`Mover.read`, or `.item()` for one) and
the alloc and the common free are each one checked kernel call (`SlotLedger.apply_raw`), the
engine's `free` between the check and the write. The lane is the one the usual calls take, and
it refuses what the guard refuses: another owner's slot behind one's own, a slot named twice,
the engine's free failing (nothing changed). A lane with its owner check or its duplicate check
skipped fails here (the broken ledgers of tests/runtime/ledger/test_raw.py). That the lane does
what the general path does, call for call, is test_fast_path.py's comparison (host ids: this lane)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from slotwarden.model.errors import BadSlotId
from slotwarden.model.free import IllegalFree
from slotwarden.model.vocabulary import Actor
from slotwarden.runtime.guarded_allocator import GuardedAllocator, acting
from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.trace_examples import FreeList
from engines import Untouched

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ledger"))
from test_raw import NoDuplicateCheck, NoOwnerCheck  # noqa: E402

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled move is not built here")

R1, R2 = Actor.request(1), Actor.request(2)


class PythonLane(GuardedAllocator):
    """The guard with its compiled lane off: the usual calls take the raw lane of its Python
    (the compiled lane's own tests: test_lane.py)."""

    LANE = False


def _guard(ledger_cls=SlotLedger) -> tuple[FreeList, GuardedAllocator]:
    engine = FreeList(8, "cpu")
    g = PythonLane(engine)
    g.ledger.__class__ = ledger_cls  # the same ledger, its lane swapped for a broken one
    return engine, g


def broken(cls):
    return pytest.param(cls, marks=pytest.mark.xfail(strict=True, reason="broken variant"))


@pytest.mark.parametrize("n", [1, 2, 5])
def test_the_usual_calls_take_the_raw_lane(n, monkeypatch):
    engine, g = _guard()

    def no(*args):
        raise AssertionError("the array lane was taken")

    monkeypatch.setattr(g, "_free_arrays", no)
    monkeypatch.setattr(g.ledger, "apply", no)  # nor any other ledger call
    monkeypatch.setattr(g.ledger, "apply_one", no)
    with acting(R1):
        ids = g.alloc(n)
        g.free(ids)
    assert g.available_size() == 8 and g.audit().clean


@pytest.mark.parametrize("cls", [SlotLedger, broken(NoOwnerCheck)])
def test_another_owners_slot_behind_ones_own_is_refused(cls):
    engine, g = _guard(cls)
    with acting(R1):
        theirs = g.alloc(1)
    with acting(R2):
        mine = g.alloc(2)
        frozen = Untouched(engine, g)
        with pytest.raises(IllegalFree, match=f"slot {theirs.item()}"):
            g.free(torch.cat((mine, theirs)))
    frozen.check()


@pytest.mark.parametrize("cls", [SlotLedger, broken(NoDuplicateCheck)])
def test_a_slot_named_twice_is_refused(cls):
    engine, g = _guard(cls)
    with acting(R1):
        ids = g.alloc(2)
        frozen = Untouched(engine, g)
        with pytest.raises(BadSlotId, match="twice"):
            g.free(torch.cat((ids, ids[:1])))
    frozen.check()


def test_an_engine_whose_free_fails_keeps_nothing_and_the_guard_goes_on():
    class Failing(FreeList):
        fail = True

        def free(self, free_index):
            if self.fail:
                raise OSError("the engine's free failed")
            super().free(free_index)

    engine = Failing(8, "cpu")
    g = PythonLane(engine)
    with acting(R1):
        ids = g.alloc(3)
        frozen = Untouched(engine, g)
        with pytest.raises(OSError):
            g.free(ids)
        frozen.check()
        engine.fail = False
        g.free(ids)
    assert g.available_size() == 8 and g.audit().clean
