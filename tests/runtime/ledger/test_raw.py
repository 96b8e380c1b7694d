"""`SlotLedger.apply_raw` (the guard's lane: one kernel call on an engine's ids, given as one int
or a copy of an int64 tensor's bytes read by `Mover.read`) does what `apply` does: random moves
by random actors on two ledgers, `apply_raw` on one (then `apply` where it declines) and `apply`
on the other, give the same error, columns, recorder and releases. Broken variants of the lane
(the owner check skipped, the duplicate check skipped, the engine handed slots the move does not
free) fail it. And the kernel's `give` runs between the check and the write, or not at all."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from slotwarden.model.errors import SlotwardenError
from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.ledger.raw import REFUSED

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled move is not built here")

R1, R2 = Actor.request(1), Actor.request(2)
ACTORS = (R1, R1, R2, Actor.session(5), Actor.cache(9), Actor.fence(1))
EVENTS = [e for e in Event if e not in (Event.LEND, Event.PARK, Event.INSERT, Event.FENCE)]


class _Tampered:
    """A ledger's mover whose moves have their arguments changed by `tamper(ledger, args)`."""

    def __init__(self, ledger, tamper):
        self.ledger, self.mover, self.tamper = ledger, ledger.mover, tamper

    def move(self, *args):
        return self.mover.move(*self.tamper(self.ledger, list(args)))

    def read(self, address, n):
        return self.mover.read(address, n)


class _TamperedLane(SlotLedger):
    """The lane (`apply_raw`) with its kernel calls tampered with (`tamper`)."""

    @staticmethod
    def tamper(ledger, args):
        return args

    def apply_raw(self, event, ids, actor, give=None, given=None):
        mover, self.mover = self.mover, _Tampered(self, self.tamper)
        try:
            return super().apply_raw(event, ids, actor, give, given)
        finally:
            self.mover = mover


class NoOwnerCheck(_TamperedLane):
    """Broken: the lane moves each slot as its own owner (the owner check skipped)."""

    @staticmethod
    def tamper(ledger, args):
        ids = np.array([args[1]]) if type(args[1]) is int else np.frombuffer(args[1], dtype=np.int64)
        if ((ids >= 1) & (ids <= ledger.capacity)).all():
            owners = ledger.cols.owner[ids]
            args[2] = np.where(owners >= 0, owners, args[2]).astype(np.int64)
        return args


class NoDuplicateCheck(_TamperedLane):
    """Broken: the lane's kernel call skips the duplicate check."""

    @staticmethod
    def tamper(ledger, args):
        args[9] = False
        return args


class GivesAnyway(SlotLedger):
    """Broken: the engine is handed the slots whatever the move makes of them."""

    def apply_raw(self, event, ids, actor, give=None, given=None):
        got = super().apply_raw(event, ids, actor)
        if got != REFUSED and give is not None:
            give(given)
        return got


def _raw(ledger, ids: list, as_int: bool):
    """`ids` as the lane takes them: one int, or a copy of a tensor's bytes (`Mover.read`)."""
    t = torch.tensor(ids, dtype=torch.int64)
    return ids[0] if len(ids) == 1 and as_int else ledger.mover.read(t.data_ptr(), t.numel())


def _state(ledger, given):
    kept = [(e.event, e.actor, e.ids.tolist(), np.asarray(e.after).tolist()) for e in ledger.recorder.entries]
    snap = ledger.snapshot()
    cols = {k: v if k == "counters" else v.tolist() for k, v in snap.items()}
    return cols, kept, ledger.awaits_fence(), given


def _one_call(ledger, raw_lane: bool, event, ids, actor, as_int: bool):
    """One move; what the engine would be handed (the ids, when the move makes them all FREE)."""
    given = []

    def hook(batch):
        if (batch.after == int(State.FREE)).all():
            given.append(tuple(ids))

    try:
        got = (
            ledger.apply_raw(event, _raw(ledger, ids, as_int), actor, given.append, tuple(ids)) if raw_lane else REFUSED
        )
        if got == REFUSED:
            ledger.apply(event, ids, actor, before_write=hook)
        error = None
    except SlotwardenError as e:
        error = (type(e), str(e))
    return error, _state(ledger, given)


def _compare(cls, seed: int) -> None:
    rng = random.Random(seed)
    ledgers = [cls(6, free_list=False), SlotLedger(6, free_list=False)]
    for _ in range(150):
        event, actor = rng.choice(EVENTS + [Event.ALLOC] * 4), rng.choice(ACTORS)
        ids = [rng.choice((0, 1, 2, 3, 4, 5, 6, 7)) for _ in range(rng.choice((1, 1, 2, 3)))]
        if rng.random() < 0.5:  # mostly slots of one state: the batches the lane takes
            ids = [s if 1 <= s <= 6 else 1 for s in ids]
        as_int = rng.random() < 0.7
        got = [_one_call(led, i == 0, event, ids, actor, as_int) for i, led in enumerate(ledgers)]
        assert got[0] == got[1], (event, ids, actor)
        if rng.random() < 0.2:
            for led in ledgers:
                led.launch()


@pytest.mark.parametrize("seed", range(30))
def test_apply_raw_is_apply(seed):
    _compare(SlotLedger, seed)


@pytest.mark.parametrize("cls", [NoOwnerCheck, NoDuplicateCheck, GivesAnyway])
def test_a_broken_lane_is_caught(cls):
    """Each broken variant differs from `apply` within the seeds above (xfail would hide which)."""
    with pytest.raises(AssertionError):
        for seed in range(30):
            _compare(cls, seed)


def test_give_runs_between_the_check_and_the_write():
    ledger = SlotLedger(4, free_list=False)
    ledger.apply_raw(Event.ALLOC, 2, R1)
    seen = []
    assert ledger.apply_raw(Event.ROLLBACK, 2, R1, lambda s: seen.append((s, int(ledger.cols.state[s]))), 2) >= 0
    assert seen == [(2, int(State.TAKEN))] and ledger.record(2).state is State.FREE


def test_a_give_that_raises_writes_nothing_and_the_ledger_goes_on():
    ledger = SlotLedger(4, free_list=False)
    t = torch.tensor([1, 2])
    ledger.apply_raw(Event.ALLOC, ledger.mover.read(t.data_ptr(), 2), R1)
    before = ledger.snapshot()

    def refuse(_):
        raise OSError("the engine's free failed")

    with pytest.raises(OSError):
        ledger.apply_raw(Event.ROLLBACK, ledger.mover.read(t.data_ptr(), 2), R1, refuse, None)
    after = ledger.snapshot()
    assert all((before[k] == after[k]) if k == "counters" else torch.equal(before[k], after[k]) for k in before)
    assert ledger.apply_raw(Event.ROLLBACK, ledger.mover.read(t.data_ptr(), 2), R1) >= 0


def test_give_is_not_called_for_a_refused_batch():
    ledger = SlotLedger(4, free_list=False)
    ledger.apply_raw(Event.ALLOC, 1, R1)
    ledger.apply_raw(Event.ALLOC, 2, R2)
    t = torch.tensor([1, 2])
    called = []
    assert ledger.apply_raw(Event.ROLLBACK, ledger.mover.read(t.data_ptr(), 2), R1, called.append, 0) == REFUSED
    assert ledger.apply_raw(Event.ROLLBACK, 3, R1, called.append, 0) == REFUSED  # a FREE slot
    assert called == [] and ledger.record(1).state is State.TAKEN


def test_the_ids_read_are_a_copy():
    ledger = SlotLedger(4, free_list=False)
    t = torch.tensor([3, 4])
    raw = ledger.mover.read(t.data_ptr(), 2)
    t[0] = 1
    assert np.frombuffer(raw, dtype=np.int64).tolist() == [3, 4]
