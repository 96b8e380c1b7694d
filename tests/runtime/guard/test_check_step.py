"""`LedgerGuard.check_step` and `GuardedAllocator.check_step`: the runtime's batched step check
on the guard's ledger; a refusal names the row and changes nothing."""

import pytest
import torch

from slotwarden.model.errors import IllegalStep
from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime import guard as guard_module
from slotwarden.runtime.guard import LedgerGuard
from engines import TensorFreeList

R1, R2 = Actor.request(1), Actor.request(2)


def two_requests():
    engine = TensorFreeList(8)
    guard = LedgerGuard(engine, 8)
    one, two = guard.alloc(2, R1), guard.alloc(1, R2)
    guard.fire(Event.ADMIT, one, R1)
    guard.fire(Event.ADMIT, two, R2)
    return engine, guard, one, two


def test_a_legal_step_passes():
    _, guard, one, two = two_requests()
    guard.check_step(torch.cat([one, two, torch.tensor([0])]), [1, 1, 2, NOBODY])


BAD = {  # name -> (rows' slots as a function of (one, two), actors, the row named)
    "a pad row off the pad slot": (lambda o, t: [int(o[0]), int(t[0])], [1, NOBODY], 1),
    "-1 as an id": (lambda o, t: [int(o[0]), -1], [1, 1], 1),
    "an id past the pool": (lambda o, t: [int(o[0]), 9], [1, 1], 1),
    "a slot written by two rows": (lambda o, t: [int(o[0]), int(o[0])], [1, 1], 1),
    "a slot held by another request": (lambda o, t: [int(o[0]), int(t[0])], [1, 1], 1),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_row_is_refused_by_row_and_nothing_changes(name):
    engine, guard, one, two = two_requests()
    ids, actors, row = BAD[name]
    before, free = guard.ledger.cols.state.copy(), engine.available_size()
    with pytest.raises(IllegalStep) as refused:
        guard.check_step(torch.tensor(ids(one, two)), actors)
    assert refused.value.row == row
    assert (guard.ledger.cols.state == before).all() and engine.available_size() == free


def test_the_refusals_would_fail_on_a_guard_that_checks_nothing(monkeypatch):
    monkeypatch.setattr(guard_module._launch, "check_step", lambda *a: None)
    _, guard, one, two = two_requests()
    guard.check_step(torch.tensor([int(one[0]), -1]), [1, 1])  # no refusal: the tests above would fail
