"""The prefix cache as an owner, in the model: donate, publish at the fence, lock, unlock, evict;
and each cache property rejects the move it forbids."""

import pytest

from slotwarden.model.errors import IllegalMove
import random

from slotwarden.model.pool import Pool, apply, fence, lock_holders, new_pool
from slotwarden.model.properties import (
    cache_read_only,
    conserved,
    evict_unlocked,
    exclusive,
    lock_counted,
    locks_match,
    reads_published,
)
from slotwarden.model.step import step
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Actor, Event, Slot, State

R1, R2, NODE = Actor.request(1), Actor.request(2), Actor.cache(4)


def cached(readers: int = 0) -> Slot:
    return Slot(State.CACHED, 4, NOBODY, 0, readers)


def test_a_donated_slot_is_published_only_at_the_fence_of_its_write():
    s = step(Slot(State.RUNNING, 1), Event.INSERT, R1, target=4, epoch=3)
    assert s == Slot(State.CACHING, 4, NOBODY, 3, 0)
    with pytest.raises(IllegalMove):
        step(s, Event.LOCK, R2)  # unpublished: nobody reads it
    with pytest.raises(IllegalMove, match="waits for the fence of step 3"):
        step(s, Event.FENCE, Actor.fence(2))
    assert step(s, Event.FENCE, Actor.fence(3)) == cached()
    # a write aborted before its fence is dropped unread, and freed at the fence
    assert step(s, Event.EVICT, NODE, epoch=3) == Slot(State.RELEASED, NOBODY, NOBODY, 3)


def test_locks_count_and_pin_the_node():
    s = step(step(cached(), Event.LOCK, R1), Event.LOCK, R2)
    assert s.readers == 2
    with pytest.raises(IllegalMove, match="2 reader"):
        step(s, Event.EVICT, NODE)
    s = step(step(s, Event.UNLOCK, R2), Event.UNLOCK, R1)
    with pytest.raises(IllegalMove, match="no lock is held"):
        step(s, Event.UNLOCK, R1)  # SGLang #27147: an unlock with no lock to undo
    with pytest.raises(IllegalMove, match="at the bound"):
        step(cached(MAX_READERS), Event.LOCK, R1)
    with pytest.raises(IllegalMove):
        step(s, Event.EVICT, Actor.cache(5))  # only its own node evicts it
    assert step(s, Event.EVICT, NODE, epoch=7) == Slot(State.RELEASED, NOBODY, NOBODY, 7)


def test_a_request_cannot_take_finish_or_insert_a_cached_slot():
    for event in (Event.ALLOC, Event.FINISH, Event.ABORT, Event.INSERT, Event.PARK):
        with pytest.raises(IllegalMove):
            step(cached(1), event, R1, target=4)


def test_a_pool_publishes_and_frees_at_one_fence_and_stays_conserved():
    p = apply(new_pool(2), Event.ALLOC, (1, 2), R1)
    p = apply(p, Event.ADMIT, (1, 2), R1)
    p = apply(p, Event.INSERT, (1, 2), R1, target=4, epoch=1)
    p = apply(p, Event.EVICT, (2,), NODE, epoch=1)
    assert conserved(p.slots, p.free)
    p = fence(p, 1)
    assert [s.state for s in p.slots] == [State.CACHED, State.FREE] and p.free == (2,)
    assert conserved(p.slots, p.free)


def test_each_cache_property_rejects_the_move_it_forbids():
    c = cached(1)
    assert not cache_read_only(c, R1, Slot(State.RELEASED, NOBODY, NOBODY, 1))  # a request frees it
    assert not cache_read_only(c, R1, c._replace(owner=1))  # a request writes it
    assert cache_read_only(c, R1, c._replace(readers=2))
    assert not evict_unlocked(c, Slot(State.RELEASED, NOBODY, NOBODY, 1), 1)  # evicted while locked (#27038)
    assert not evict_unlocked(cached(), Slot(State.FREE), 1)  # freed before the fence
    assert evict_unlocked(cached(), Slot(State.RELEASED, NOBODY, NOBODY, 1), 1)
    assert not lock_counted(cached(), Event.UNLOCK, cached()._replace(readers=-1))  # below zero (#27147)
    assert not lock_counted(c, Event.EVICT, cached())  # dropped by another event
    assert not lock_counted(c, Event.LOCK, cached(3))  # two at once
    caching = Slot(State.CACHING, 4, NOBODY, 3)
    assert not reads_published(caching, R1, caching._replace(readers=1))  # read before publication (#30986)
    assert not reads_published(caching, Actor.fence(2), cached())  # published early (vLLM #56525)
    assert not reads_published(Slot(State.RUNNING, 1), R1, cached())  # published at schedule time
    assert reads_published(caching, Actor.fence(3), cached())
    assert not exclusive(Slot(State.RUNNING, 1, readers=1))  # only a cached slot counts locks
    assert not exclusive(cached(MAX_READERS + 1))


def test_locks_match_needs_every_lock_held_by_a_request():
    slots = (cached(2), Slot(State.FREE))
    assert locks_match(slots, {1: [1], 2: [1]})
    assert not locks_match(slots, {1: [1]})  # an unlock by a request that held no lock
    assert not locks_match(slots, {1: [1], 2: [1, 2]})  # a lock on a slot that counts none


def _published(n: int) -> Pool:
    """A pool of `n` slots, each inserted by request 9 into node 4 and published."""
    ids = tuple(range(1, n + 1))
    p = apply(new_pool(n, locks=True), Event.ALLOC, ids, Actor.request(9))
    p = apply(p, Event.ADMIT, ids, Actor.request(9))
    return fence(apply(p, Event.INSERT, ids, Actor.request(9), target=4, epoch=1), 1)


def test_an_unlock_must_match_a_lock_by_the_same_request():
    p = apply(_published(1), Event.LOCK, (1,), R1)
    assert p.locks == ((1, 1),) and locks_match(p.slots, lock_holders(p))
    # the count alone (one slot's step) lets request 2 undo request 1's lock (SGLang #27147) ...
    stolen = step(p.slots[0], Event.UNLOCK, R2)
    assert stolen.readers == 0 and not locks_match((stolen,), lock_holders(p))
    # ... the pool, which records who holds each lock, refuses it and changes nothing
    with pytest.raises(IllegalMove, match="request 2 holds no lock on slot 1"):
        apply(p, Event.UNLOCK, (1,), R2)
    with pytest.raises(IllegalMove, match="request 1 already holds a lock on slot 1"):
        apply(p, Event.LOCK, (1,), R1)  # one lock per request and slot: one unlock undoes it
    p = apply(p, Event.UNLOCK, (1,), R1)
    assert p.locks == () and p.slots[0] == cached()


def _random_locks(p: Pool, moves: int = 300) -> tuple[int, int]:
    """Random locks and unlocks by requests 1..3 on a pool's cached slots; `locks_match` is
    asserted after every accepted batch. Returns (accepted, refused by the lock record)."""
    rng, moved, by_record = random.Random(0), 0, 0
    for _ in range(moves):
        event, actor = rng.choice((Event.LOCK, Event.UNLOCK)), Actor.request(rng.randint(1, 3))
        try:
            p = apply(p, event, rng.choice(((1,), (2,), (1, 2))), actor)
        except IllegalMove as e:
            by_record += "holds no lock" in e.reason or "already holds" in e.reason
            continue
        moved += 1
        assert locks_match(p.slots, lock_holders(p))
    return moved, by_record


def test_locks_match_holds_over_random_locks_and_unlocks():
    moved, by_record = _random_locks(_published(2))
    assert moved > 100 and by_record > 10


def test_locks_match_catches_a_pool_that_forgets_who_unlocked(monkeypatch):
    import slotwarden.model.pool as pool_model

    right = pool_model.relock
    monkeypatch.setattr(
        pool_model, "relock", lambda p, e, ids, a: p.locks if e is Event.UNLOCK else right(p, e, ids, a)
    )
    with pytest.raises(AssertionError):
        _random_locks(_published(2))
