"""The safety predicates hold on the lifecycle's moves and catch the moves the real bugs made."""

from slotwarden.model import pool as P
from slotwarden.model.errors import BadSlotId, IllegalMove
from slotwarden.model.properties import (
    conserved,
    exclusive,
    fence_respected,
    freed_once,
    handles_match,
    no_orphans,
    only_real_slots,
    quiescent,
    session_kept,
)
from slotwarden.model.vocabulary import Actor, Event, Slot, State

import pytest


def test_session_kept_flags_a_lent_slot_rolled_back_to_free():  # PR 21404
    lent = Slot(State.LENT, owner=7, borrower=3)
    assert not session_kept(lent, Event.ROLLBACK, Actor.request(3), Slot(State.FREE))
    assert session_kept(lent, Event.ROLLBACK, Actor.request(3), Slot(State.PARKED, owner=7))
    assert not session_kept(Slot(State.PARKED, owner=7), Event.CLOSE, Actor.session(8), Slot(State.RELEASED, fence=1))
    assert session_kept(Slot(State.PARKED, owner=7), Event.CLOSE, Actor.session(7), Slot(State.RELEASED, fence=1))


def test_freed_once_flags_a_second_free():
    assert not freed_once(Slot(State.RELEASED, fence=2), Event.FINISH, Slot(State.RELEASED, fence=3))
    assert not freed_once(Slot(State.FREE), Event.ROLLBACK, Slot(State.FREE, owner=1))
    assert freed_once(Slot(State.RELEASED, fence=2), Event.FENCE, Slot(State.FREE))


def test_fence_respected_flags_an_early_free():
    assert not fence_respected(Slot(State.RELEASED, fence=5), Actor.fence(4), Slot(State.FREE))
    assert fence_respected(Slot(State.RELEASED, fence=5), Actor.fence(5), Slot(State.FREE))


def test_exclusive_flags_stale_and_missing_owners():
    assert exclusive(Slot(State.PARKED, owner=1))
    assert not exclusive(Slot(State.PARKED, owner=1, borrower=2))  # a stale borrower after the turn
    assert not exclusive(Slot(State.FREE, owner=3))  # a freed slot still names a holder
    assert not exclusive(Slot(State.RUNNING))


def test_pool_predicates():
    pool = P.new_pool(3)
    assert conserved(pool.slots, pool.free) and quiescent(pool.slots)
    pool, ids = P.alloc(pool, 2, Actor.request(1))
    assert ids == (1, 2) and pool.free == (3,)
    assert conserved(pool.slots, pool.free)
    assert not conserved(pool.slots, (3, 3))  # a duplicate in the free list (the 9-of-8 bug)
    assert not conserved(pool.slots, (3, 1))  # a held slot in the free list
    assert handles_match(pool.slots, {Actor.request(1): {1, 2}})
    assert not handles_match(pool.slots, {Actor.request(1): {1}})
    assert no_orphans(pool.slots, {1}, ()) and not no_orphans(pool.slots, (), ())
    assert only_real_slots([1, 3], 3) and not only_real_slots([0], 3) and not only_real_slots([-1], 3)


def test_pool_fence_frees_only_what_is_due():
    pool, ids = P.alloc(P.new_pool(2), 2, Actor.request(1))
    pool = P.apply(pool, ids, Event.ADMIT, Actor.request(1))
    pool = P.apply(pool, (1,), Event.FINISH, Actor.request(1), epoch=4)
    pool = P.apply(pool, (2,), Event.FINISH, Actor.request(1), epoch=5)
    pool = P.fence(pool, 4)
    assert pool.free == (1,) and pool.slots[1] == Slot(State.RELEASED, fence=5)
    assert quiescent(P.fence(pool, 5).slots)


@pytest.mark.parametrize("ids, why", [((0,), "pad slot"), ((-1,), "not a slot"), ((4,), "not a slot"), ((1, 1), "twice"), ((), "empty")])
def test_pool_refuses_bad_ids(ids, why):
    pool, _ = P.alloc(P.new_pool(3), 1, Actor.request(1))
    with pytest.raises(BadSlotId, match=why):
        P.apply(pool, ids, Event.ROLLBACK, Actor.request(1))


def test_pool_batch_is_all_or_nothing():
    pool, _ = P.alloc(P.new_pool(3), 1, Actor.request(1))
    with pytest.raises(IllegalMove):
        P.apply(pool, (1, 2), Event.ROLLBACK, Actor.request(1))  # slot 2 is free: the whole batch is refused
    assert P.alloc(pool, 3, Actor.request(2)) is None
