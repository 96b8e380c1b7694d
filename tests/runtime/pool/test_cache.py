"""StatePool's prefix-cache moves: insert (donate), publish at the fence, lock/unlock with the
per-request record, copy-on-write from a locked cached slot, evict; every refusal changes
nothing (ledger, lock record and state tensors)."""

import pytest
import torch

from slotwarden.model.errors import BadSlotId, IllegalCopy, IllegalMove
from slotwarden.model.vocabulary import Actor, Event, Group, State
from slotwarden.runtime.pool import StatePool

from pools import CFG, Frozen, dirty

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
    "copy from a cached slot by a session numbered as a lock holder": (
        lambda p: p.copy([1], [3], Actor.session(2)),
        IllegalCopy,
        "session 2 holds no lock",
    ),
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

    def _require_readable(self, ids, actor, what):
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


class LedgerOnlyFire(StatePool):
    """Broken (the pool before its generic fire kept the lock record): `fire`/`fire_each` hand
    LOCK/UNLOCK straight to the ledger, whose count then disagrees with the record."""

    def fire(self, event, ids, actor, target=-1):
        return torch.from_numpy(self.ledger.apply(event, ids, actor, target))

    def fire_each(self, event, ids, actor_ids):
        return torch.from_numpy(self.ledger.apply_each(event, ids, actor_ids))


GENERIC_UNLOCKS = {
    "fire": lambda p: p.fire(Event.UNLOCK, [1], R3),
    "fire_each": lambda p: p.fire_each(Event.UNLOCK, [1], [3]),
}


@pytest.mark.parametrize("how", GENERIC_UNLOCKS)
@pytest.mark.parametrize("pool_cls", [StatePool, LedgerOnlyFire])
def test_a_generic_fire_cannot_unlock_past_the_lock_record(how, pool_cls):
    """Request 2 holds the only lock on slot 1; request 3's UNLOCK through the generic
    `fire`/`fire_each` is refused as `unlock` refuses it, and the slot cannot be evicted under
    request 2. The broken variant accepts it: the count drops to 0 while the record still
    names request 2, and the eviction then goes through."""
    pool = cached_pool(pool_cls)
    frozen = Snapshot(pool)
    if pool_cls is LedgerOnlyFire:
        GENERIC_UNLOCKS[how](pool)
        assert pool.ledger.record(1).readers == 0 and pool.lock_holders(1) == {2}
        pool.evict([1], Actor.cache(NODE))  # evicted while request 2 holds its lock
        return
    with pytest.raises(IllegalMove, match="holds no lock"):
        GENERIC_UNLOCKS[how](pool)
    assert frozen.unchanged()
    with pytest.raises(IllegalMove, match="reader"):
        pool.evict([1], Actor.cache(NODE))
    pool.fire(Event.UNLOCK, [1], R2)  # the holder's own unlock, through fire, keeps the record
    assert pool.ledger.record(1).readers == 0 and pool.lock_holders(1) == frozenset()
    pool.fire_each(Event.LOCK, [1], [3])
    assert pool.lock_holders(1) == {3} and not pool.lock_problems()


def test_unlocks_by_many_requests_are_one_call_all_or_nothing():
    """Requests 2 and 3 both give back their lock on slot 1 in one call (slot 1 named twice);
    a batch with one unlock the record refuses changes nothing, whichever position it has."""
    pool = cached_pool()
    pool.lock([1], R3)
    for ids, who in (([1, 1, 1], [2, 3, 4]), ([1, 1], [2, 2]), ([1, 1], [4, 2])):
        frozen = Snapshot(pool)
        with pytest.raises(IllegalMove, match="request [24]"):
            pool.unlock(ids, who)
        assert frozen.unchanged()
    pool.unlock([1, 1], [3, 2])
    assert pool.ledger.record(1).readers == 0 and pool.lock_holders(1) == frozenset()
    with pytest.raises(BadSlotId, match="twice"):
        pool.lock([1, 1], [2, 3])  # a lock names each slot once
    pool.lock([1], [2])
    assert pool.lock_holders(1) == {2} and not pool.lock_problems()


def test_evictions_by_many_nodes_are_one_call_all_or_nothing():
    pool = StatePool(CFG)
    ids = pool.alloc(3, R1)
    pool.admit(ids, R1)
    pool.launch()
    for s, node in zip(ids.tolist(), (7, 8, 9)):
        pool.insert([s], R1, node)
    pool.fence()
    pool.lock([ids[2].item()], R2)
    frozen = Snapshot(pool)
    with pytest.raises(IllegalMove, match="reader") as err:
        pool.evict(ids, [7, 8, 9])  # node 9's slot is locked
    assert err.value.slot_id == ids[2].item() and err.value.actor == Actor.cache(9)
    assert frozen.unchanged()
    pool.evict(ids[:2], [7, 8])
    assert pool.state_of(ids) == [State.RELEASED, State.RELEASED, State.CACHED]


def test_a_watcher_of_fire_sees_every_lock_and_unlock_once():
    """Observers (the differential) wrap `fire`/`fire_each`: `lock`/`unlock` go through them,
    and a LOCK fired through `fire` itself is seen once, not twice."""
    pool = cached_pool()
    seen = []
    fire, fire_each = pool.fire, pool.fire_each
    pool.fire = lambda e, ids, a, t=-1: seen.append((Event(e), list(ids), a.id)) or fire(e, ids, a, t)
    pool.fire_each = lambda e, ids, who: seen.append((Event(e), list(ids), list(who))) or fire_each(e, ids, who)
    pool.lock([1], R3)
    pool.fire(Event.LOCK, [1], Actor.request(4))
    pool.unlock([1, 1], [2, 3])
    pool.fire_each(Event.UNLOCK, [1], [4])
    assert seen == [
        (Event.LOCK, [1], 3),
        (Event.LOCK, [1], 4),
        (Event.UNLOCK, [1], [2]),
        (Event.UNLOCK, [1], [3]),
        (Event.UNLOCK, [1], [4]),
    ]
    assert pool.ledger.record(1).readers == 0 and not pool.locks


def test_a_lock_batch_the_table_refuses_is_refused_at_the_tables_slot_as_the_model_does():
    """Request 2 locks [3, 1]: slot 3 is TAKEN (no LOCK from there), and request 2 already holds
    a lock on slot 1. The model judges every move by the table before the lock record, so the
    refusal names slot 3; a lock-record check run first would name slot 1."""
    pool = cached_pool()
    pool.admit(pool.alloc(1, R3), R3)  # slot 3, TAKEN then RUNNING by request 3
    before = Snapshot(pool)
    with pytest.raises(IllegalMove) as err:
        pool.lock([3, 1], R2)
    assert err.value.slot_id == 3 and "already holds" not in str(err.value)
    assert before.unchanged()
    with pytest.raises(IllegalMove, match="already holds a lock") as err:
        pool.lock([1], R2)  # the table alone allows it: the record refuses
    assert err.value.slot_id == 1
