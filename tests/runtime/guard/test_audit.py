"""`LedgerGuard.available()` and `audit()`: the engine's free list checked against the ledger."""

import pytest
import torch

from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.trace_examples import FreeList
from engines import ENGINES  # the in-repo free list and SGLang's real one

R1 = Actor.request(1)


@pytest.fixture(params=ENGINES)
def engine_cls(request):
    return request.param


class CountOnly:
    """An allocator that shows only its count, not its free list."""

    def __init__(self, size: int):
        self.inner = FreeList(size)

    def alloc(self, n):
        return self.inner.alloc(n)

    def free(self, ids):
        self.inner.free(ids)

    def available_size(self):
        return self.inner.available_size()


def test_available_is_the_ledgers_free_count(engine_cls):
    engine = engine_cls(8, "cpu")
    guard = LedgerGuard(engine, 8)
    ids = guard.alloc(3, R1)
    assert guard.available() == 5 == engine.available_size()
    guard.fire(Event.ROLLBACK, ids, R1)
    assert guard.available() == 8 == engine.available_size()


def test_audit_reports_duplicates_the_engine_holds(engine_cls):
    engine = engine_cls(8, "cpu")
    guard = LedgerGuard(engine, 8)
    ids = guard.alloc(2, R1)
    assert guard.audit().clean
    engine.free(ids[:1])  # the engine frees behind the guard's back ...
    engine.free(torch.tensor([4]))  # ... and frees a free slot (a double free)
    audit = guard.audit()
    assert not audit.clean and not audit.free_list_ok
    text = "\n".join(audit.problems)
    assert "the engine's free list holds duplicates: slot 4 x2" in text
    assert f"ids the ledger has not FREE: [{ids[0].item()}]" in text
    # broken variant: the ledger's own audit alone (no free list of its own) sees nothing wrong
    assert guard.ledger.audit().clean


def test_audit_reports_free_slots_missing_from_the_engine(engine_cls):
    engine = engine_cls(8, "cpu")
    guard = LedgerGuard(engine, 8)
    engine.alloc(1)  # taken behind the guard's back: the ledger still says FREE
    assert "FREE slots missing from the engine's free list: [1]" in guard.audit().problems


def test_without_a_free_list_the_audit_compares_counts():
    engine = CountOnly(4)
    guard = LedgerGuard(engine, 4)
    guard.alloc(1, R1)
    assert guard.audit().clean
    engine.free(torch.tensor([3]))
    assert guard.audit().problems == ("the engine reports 4 free slots, the ledger 3",)


def test_audit_reports_a_sentinel_and_the_pad_slot_in_the_engines_list(engine_cls):
    engine = engine_cls(8, "cpu")
    guard = LedgerGuard(engine, 8)
    engine.free(torch.tensor([-1, 0]))  # PR 40044 / 40250: freed behind the guard's back
    assert guard.audit().problems == ("the engine's free list holds ids the ledger has not FREE: [-1, 0]",)
