"""The ledger's lock record (`Locks`): a LOCK or UNLOCK batch is checked whole against who holds
each lock before anything moves, then fired and recorded; the ledger's plain `apply` moves the
counts only, and `lock_problems` names where the counts and the record then disagree."""

import numpy as np
import pytest

from slotwarden.model.errors import IllegalMove
from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.ledger.ledger import SlotLedger

R1, R2, R3 = Actor.request(1), Actor.request(2), Actor.request(3)
NODE = 9


def cached() -> tuple[SlotLedger, np.ndarray]:
    """A ledger whose slot 1 is published in the prefix cache (CACHED, no locks)."""
    ledger = SlotLedger(4)
    ids = ledger.alloc(1, R1)
    ledger.apply(Event.ADMIT, ids, R1)
    ledger.apply(Event.INSERT, ids, R1, NODE)
    ledger.fence()
    assert ledger.state_of(ids).tolist() == [int(State.CACHED)]
    return ledger, ids


def lock(ledger: SlotLedger, event: Event, ids, request, each: bool = False) -> None:
    batch = ledger.lock_batch(event, ids, request, each)
    ledger.check_locks(batch.ids, batch.actors, batch.event)
    ledger.fire_locks(batch, ledger.apply, ledger.apply_each)


def test_a_lock_is_recorded_and_given_back_by_its_holder_only():
    ledger, ids = cached()
    lock(ledger, Event.LOCK, ids, R2)
    assert ledger.lock_holders(1) == {2} and ledger.record(1).readers == 1
    with pytest.raises(IllegalMove, match="holds no lock"):
        lock(ledger, Event.UNLOCK, ids, R3)
    with pytest.raises(IllegalMove, match="already holds a lock"):
        lock(ledger, Event.LOCK, ids, R2)
    assert ledger.lock_holders(1) == {2} and ledger.record(1).readers == 1 and not ledger.lock_problems()
    lock(ledger, Event.LOCK, [1], [3], each=True)
    lock(ledger, Event.UNLOCK, [1, 1], [2, 3], each=True)  # two requests give back theirs in one call
    assert ledger.lock_holders(1) == frozenset() and ledger.record(1).readers == 0 and not ledger.locks


def test_a_plain_apply_moves_the_count_only_and_the_audit_of_locks_says_so():
    ledger, ids = cached()
    lock(ledger, Event.LOCK, ids, R2)
    ledger.apply(Event.UNLOCK, ids, R3)  # past the record: the count drops, the record keeps request 2
    assert ledger.record(1).readers == 0 and ledger.lock_holders(1) == {2}
    assert ledger.lock_problems() == ["slot 1: 0 locks counted, held by requests [2]"]


def test_a_refused_fire_leaves_the_record_as_it_was():
    ledger, ids = cached()
    batch = ledger.lock_batch(Event.LOCK, ids, R2, each=False)

    def refuse(*args):
        raise RuntimeError("refused below")

    with pytest.raises(RuntimeError, match="refused below"):
        ledger.fire_locks(batch, refuse, refuse)
    assert not ledger.locks and ledger.record(1).readers == 0
