"""The prefix cache as an owner, in the model: donate, publish at the fence, lock, unlock, evict;
and each cache property rejects the move it forbids."""

import pytest

from slotwarden.model.errors import IllegalMove
from slotwarden.model.pool import apply, fence, new_pool
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
