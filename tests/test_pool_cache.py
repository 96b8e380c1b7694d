"""StatePool's prefix-cache moves: insert (donate), publish at the fence, lock/unlock with the
per-request record, copy-on-write from a locked cached slot, evict; every refusal changes
nothing (ledger, lock record and state tensors)."""

import pytest
import torch

from slotwarden.model.errors import IllegalCopy, IllegalMove
from slotwarden.model.vocabulary import Actor, Group, State
from slotwarden.runtime.pool import StatePool

from test_pool import CFG, Frozen, dirty

R1, R2, R3 = Actor.request(1), Actor.request(2), Actor.request(3)
NODE = 9


def cached_pool(pool_cls=StatePool):
    """Slot 1: CACHED by node 9 (donated by request 1, fenced); request 2 locked it and holds
    a fresh slot (2). State tensors full of noise."""
    pool = pool_cls(CFG)
    one = pool.alloc(1, R1)
    pool.admit(one, R1)
    pool.launch()
    pool.insert(one, R1, NODE)
    assert pool.state_of([1]) == [State.CACHING]
    pool.fence()
    assert pool.state_of([1]) == [State.CACHED]
    pool.lock([1], R2)
    pool.admit(pool.alloc(1, R2), R2)
    dirty(pool)
    return pool


class Snapshot(Frozen):
    def __init__(self, pool):
        super().__init__(pool)
        self.locks = {s: set(r) for s, r in pool.locks.items()}

    def unchanged(self) -> bool:
        assert self.pool.locks == self.locks, "the lock record changed"
        return super().unchanged()


def test_a_donated_slot_is_copied_on_write_unlocked_and_evicted_to_quiescence():
    pool = cached_pool()
    pool.copy([1], [2], R2)
    assert all(torch.equal(t[:, 1], t[:, 2]) for t in pool.tensors)
    assert pool.ledger.record(1).readers == 1 and pool.lock_holders(1) == {2}
    pool.unlock([1], R2)
    assert pool.ledger.record(1).readers == 0 and pool.lock_holders(1) == frozenset()
    pool.launch()
    pool.evict([1], Actor.cache(NODE))
    pool.finish([2], R2)
    assert pool.state_of([1, 2]) == [State.RELEASED] * 2
    pool.fence()
    audit = pool.audit(live_requests=[], live_sessions=[], live_nodes=[])
    assert audit.clean and audit.counts[Group.FREE] == CFG.num_slots


def test_two_readers_copy_and_unlock_independently():
    pool = cached_pool()
    pool.lock([1], R3)
    pool.admit(pool.alloc(1, R3), R3)
    pool.copy([1], [3], R3)
    pool.unlock([1], R2)
    assert pool.ledger.record(1).readers == 1 and pool.lock_holders(1) == {3}
    with pytest.raises(IllegalMove, match="reader"):
        pool.evict([1], Actor.cache(NODE))  # still locked by request 3
    assert not pool.lock_problems()


REFUSED = {
    "copy from a cached slot the request has not locked": (lambda p: p.copy([1], [3], R3), IllegalCopy, "no lock"),
    "copy into a slot the request does not hold": (lambda p: p.copy([1], [4], R2), IllegalCopy, "does not hold"),
    "unlock by a request with no lock, others holding one": (lambda p: p.unlock([1], R3), IllegalMove, "no lock"),
    "a second lock by the same request": (lambda p: p.lock([1], R2), IllegalMove, "already holds"),
    "evict a locked slot": (lambda p: p.evict([1], Actor.cache(NODE)), IllegalMove, "reader"),
    "evict by another node": (lambda p: p.evict([1], Actor.cache(NODE + 1)), IllegalMove, ""),
    "lock a slot nobody cached": (lambda p: p.lock([2], R3), IllegalMove, ""),
    "insert a slot the request does not own": (lambda p: p.insert([2], R3, 4), IllegalMove, ""),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refused_cache_moves_change_nothing(name):
    move, error, text = REFUSED[name]
    pool = cached_pool()
    pool.admit(pool.alloc(1, R3), R3)  # slot 3: request 3's fresh slot
    frozen = Snapshot(pool)
    with pytest.raises(error, match=text or None):
        move(pool)
    assert frozen.unchanged()


def test_an_unpublished_slot_is_neither_locked_nor_copied_and_its_eviction_drops_it_unread():
    pool = StatePool(CFG)
    one = pool.alloc(1, R1)
    pool.admit(one, R1)
    pool.launch(lambda: False)  # the step writing it is still on the device
    pool.insert(one, R1, NODE)
    pool.admit(pool.alloc(1, R2), R2)
    with pytest.raises(IllegalMove):
        pool.lock([1], R2)
    with pytest.raises(IllegalCopy):
        pool.copy([1], [2], R2)
    pool.evict([1], Actor.cache(NODE))  # the write was aborted
    assert pool.state_of([1]) == [State.RELEASED]


class NoLockRecord(StatePool):
    """Broken: trusts the ledger's anonymous count for unlocks and copies (SGLang #27147)."""

    def _check_locks(self, ids, request, event):
        pass

    def _require_held(self, ids, actor, what):
        pass


def test_the_lock_record_is_what_refuses_a_foreign_unlock():
    """The broken variant accepts request 3's copy without a lock, and its unlock of request
    2's lock (the ledger's anonymous count allows it); the lock audit then names the slot."""
    pool = cached_pool(NoLockRecord)
    pool.admit(pool.alloc(1, R3), R3)
    pool.copy([1], [3], R3)
    pool.unlock([1], R3)
    assert pool.ledger.record(1).readers == 0 and pool.lock_holders(1) == {2}
    assert any(p.startswith("slot 1: 0 locks counted") for p in pool.audit().problems)
