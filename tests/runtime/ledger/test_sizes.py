"""Sizes are checked before anything is converted: an UNLOCK batch (which may name a slot once per
request giving a lock back, so at most the locks a pool can hold: capacity * MAX_READERS) and the
per-slot actor ids of the multi-actor calls (`apply_each`, `alloc_each`, a LOCK or UNLOCK with one
request per slot) are refused by their length, or answered, at once, and nothing changes.

Time-bounded by construction: a range of 2**62 ids, a meta tensor of 2**40 actor ids (it has no
values to copy) and a list whose every element read fails the test can only be answered by their
lengths. No timing is asserted."""

from __future__ import annotations

import pytest
import torch

from slotwarden.model.errors import BadActor, BadInput, BadSlotId
from slotwarden.model.vocabulary import MAX_READERS, Actor, Event
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.pool import PoolConfig, StatePool

R1 = Actor.request(1)


class Unreadable(list):
    """A list that says it is long: reading a few of its ids (to show them in an error) is fine,
    converting it fails the test."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def __len__(self):
        return self.n

    def __iter__(self):
        for k in range(1, self.n + 1):
            if k > 1000:
                pytest.fail("the long list was read past its first ids (converted before its length was checked)")
            yield k

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(min(self.n, 1000)))]
        if not -self.n <= k < self.n:
            raise IndexError(k)
        if k > 1000:
            pytest.fail("the long list was read past its first ids (converted before its length was checked)")
        return k + 1


def _frozen(ledger: SlotLedger):
    snap = {k: v.tolist() for k, v in ledger.snapshot().items() if k != "counters"}
    locks = {s: sorted(h) for s, h in ledger.locks.items()}
    return snap, ledger.snapshot()["counters"], ledger.free_list().tolist(), ledger.recorder.seq, locks


def _pool() -> StatePool:
    """A pool of 4 slots, slot 1 published in the prefix cache and locked by request 2."""
    pool = StatePool(
        PoolConfig(num_slots=4, layers=1, conv_dims=(2,), conv_kernel=2, heads=1, head_dim=1, state_size=2)
    )
    ids = pool.alloc(1, R1)
    pool.admit(ids, R1)
    pool.insert(ids, R1, 9)
    pool.ledger.fence()
    pool.lock(ids, Actor.request(2))
    return pool


LONG_IDS = {
    "range 2**62": range(1, 2**62),
    "range 10**8": range(1, 10**8),
    "unreadable list": Unreadable(10**8),
}

UNLOCKS = {
    "pool.unlock": lambda p, ids: p.unlock(ids, [2, 3]),
    "pool.fire_each(UNLOCK)": lambda p, ids: p.fire_each(Event.UNLOCK, ids, [2, 3]),
    "ledger.lock_batch": lambda p, ids: p.ledger.lock_batch(Event.UNLOCK, ids, [2, 3], True),
}


@pytest.mark.parametrize("kind", LONG_IDS)
@pytest.mark.parametrize("call", UNLOCKS)
def test_an_unlock_batch_longer_than_the_pools_locks_is_refused_by_its_length(call, kind):
    """Old code: an UNLOCK with one request per slot was converted whole (no limit: it may name a
    slot more than once): range(1, 2**62) never answered, the unreadable list was read."""
    pool = _pool()
    before = _frozen(pool.ledger)
    with pytest.raises(BadSlotId, match=f"more than the {4 * MAX_READERS} locks a pool of 4 slots can hold"):
        UNLOCKS[call](pool, LONG_IDS[kind])
    assert _frozen(pool.ledger) == before


def test_an_unlock_batch_as_long_as_the_locks_is_not_refused_by_its_length():
    """The bound is the locks a pool can hold, not its slots: one slot named by two requests."""
    pool = _pool()
    pool.lock([1], Actor.request(3))
    pool.unlock([1, 1], [2, 3])
    assert pool.ledger.lock_holders(1) == frozenset()


LONG_ACTORS = {
    "meta tensor 2**40": torch.empty(2**40, dtype=torch.int64, device="meta"),
    "unreadable list": Unreadable(10**8),
    "range 2**62": range(1, 2**62),
}

EACH = {
    "ledger.apply_each": lambda p, who: p.ledger.apply_each(Event.EVICT, [1], who),
    "pool.fire_each": lambda p, who: p.fire_each(Event.EVICT, [1], who),
    "pool.evict": lambda p, who: p.evict([1], who),
    "pool.lock": lambda p, who: p.lock([1], who),
    "pool.unlock": lambda p, who: p.unlock([1], who),
}


@pytest.mark.parametrize("kind", LONG_ACTORS)
@pytest.mark.parametrize("call", EACH)
def test_actor_ids_of_another_length_than_the_batch_are_refused_by_it(call, kind):
    """Old code: the actor ids were converted before their length was compared with the batch's:
    the meta tensor raised NotImplementedError (copied to the host first), the list was read."""
    pool = _pool()
    before = _frozen(pool.ledger)
    with pytest.raises(BadActor, match="one int64 actor id for each of the 1 slots") as err:
        EACH[call](pool, LONG_ACTORS[kind])
    assert isinstance(err.value, BadInput) and "actor_ids" in str(err.value)
    assert _frozen(pool.ledger) == before


@pytest.mark.parametrize("kind", ["unreadable list", "meta tensor 2**40"])
def test_alloc_each_for_more_requests_than_slots_answers_by_the_length(kind):
    """More requests than the pool has slots: too few are free, None at once, nothing read and
    nothing changed (old code read the list, and copied the meta tensor: NotImplementedError)."""
    pool = _pool()
    before = _frozen(pool.ledger)
    assert pool.ledger.alloc_each(LONG_ACTORS[kind]) is None
    assert _frozen(pool.ledger) == before


def test_alloc_each_of_a_range_is_refused_by_its_type_at_once():
    """Old code: `len(range(0, 2**70))` overflowed (OverflowError, untyped)."""
    ledger = SlotLedger(4)
    before = _frozen(ledger)
    with pytest.raises(BadActor, match="actor_ids"):
        ledger.alloc_each(range(0, 2**70))
    with pytest.raises(BadActor, match="actor_ids"):
        ledger.alloc_each(range(1, 3))  # short, but a range is no batch of actor ids (as before)
    assert _frozen(ledger) == before


def test_actor_ids_on_the_meta_device_are_refused():
    """Old code: NotImplementedError (a meta tensor has no values to copy)."""
    pool = _pool()
    with pytest.raises(BadActor, match="meta"):
        pool.ledger.apply_each(Event.EVICT, [1], torch.empty(1, dtype=torch.int64, device="meta"))


@pytest.mark.parametrize("value", [5, 2.5, None])
def test_alloc_each_of_no_batch_says_a_batch_is_wanted(value):
    """Old code: a bare int named a batch of -1 slots ("for each of the -1 slots")."""
    pool = _pool()
    before = _frozen(pool.ledger)
    with pytest.raises(BadActor, match="a 1-D batch of int64 actor ids") as err:
        pool.alloc_each(value)
    assert "-1" not in str(err.value).split("value")[0]
    assert _frozen(pool.ledger) == before
