"""The safety predicates hold on the lifecycle's moves and catch the moves the real bugs made."""

from slotwarden.model import pool as P
from slotwarden.model.errors import BadSlotId, IllegalMove
from slotwarden.model import registry
from slotwarden.model import proofs
from slotwarden.model.properties import (
    authority,
    borrow_safe,
    conserved,
    exclusive,
    fence_respected,
    freed_once,
    handles_follow,
    handles_match,
    no_orphans,
    only_real_slots,
    parks_what_ran,
    quiescent,
    release_waits,
    session_kept,
)
from slotwarden.model.vocabulary import NOBODY, Actor, Event, Slot, State
from slotwarden.verification import abstract

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
    pool = P.apply(pool, Event.ADMIT, ids, Actor.request(1))
    pool = P.apply(pool, Event.FINISH, (1,), Actor.request(1), epoch=4)
    pool = P.apply(pool, Event.FINISH, (2,), Actor.request(1), epoch=5)
    pool = P.fence(pool, 4)
    assert pool.free == (1,) and pool.slots[1] == Slot(State.RELEASED, fence=5)
    assert quiescent(P.fence(pool, 5).slots)


@pytest.mark.parametrize(
    "ids, why", [((0,), "pad slot"), ((-1,), "not a slot"), ((4,), "not a slot"), ((1, 1), "twice"), ((), "empty")]
)
def test_pool_refuses_bad_ids(ids, why):
    pool, _ = P.alloc(P.new_pool(3), 1, Actor.request(1))
    with pytest.raises(BadSlotId, match=why):
        P.apply(pool, Event.ROLLBACK, ids, Actor.request(1))


def test_pool_batch_is_all_or_nothing():
    pool, _ = P.alloc(P.new_pool(3), 1, Actor.request(1))
    with pytest.raises(IllegalMove):
        P.apply(pool, Event.ROLLBACK, (1, 2), Actor.request(1))  # slot 2 is free: the whole batch is refused
    assert P.alloc(pool, 3, Actor.request(2)) is None


def test_conserved_counts_from_the_free_list_and_the_records():
    pool = P.new_pool(3)
    pool, _ = P.alloc(pool, 2, Actor.request(1))
    assert conserved(pool.slots, pool.free)
    # a FREE record that still names an owner is counted twice: on the free list and as owned
    assert not conserved((Slot(State.FREE, owner=4),) + pool.slots[1:], (1, 3))
    # a held record that names nobody is counted nowhere
    assert not conserved((Slot(State.TAKEN),) + pool.slots[1:], (3,))
    # a RELEASED record that still names its owner is counted twice
    assert not conserved((Slot(State.RELEASED, owner=1, fence=1),) + pool.slots[1:], (3,))
    assert conserved((Slot(State.RELEASED, fence=1),) + pool.slots[1:], (3,))


def test_fence_respected_flags_a_running_slot_freed_at_once():  # PR 16067
    assert not fence_respected(Slot(State.RUNNING, owner=1), Actor.request(1), Slot(State.FREE))
    assert not fence_respected(Slot(State.LENT_RUNNING, owner=7, borrower=1), Actor.request(1), Slot(State.FREE))
    assert fence_respected(Slot(State.TAKEN, owner=1), Actor.request(1), Slot(State.FREE))


def test_release_waits_flags_a_release_that_does_not_wait_for_the_step_in_flight():
    running = Slot(State.RUNNING, owner=1)
    assert not release_waits(running, Slot(State.RELEASED, fence=2), epoch=3)
    assert release_waits(running, Slot(State.RELEASED, fence=3), epoch=3)


def test_authority_flags_a_move_by_someone_with_no_claim():
    parked = Slot(State.PARKED, owner=7)
    lent = Slot(State.LENT, owner=7, borrower=3)
    # another session lends session 7's slot
    assert not authority(parked, Event.LEND, Actor.session(8), 3, lent)
    assert authority(parked, Event.LEND, Actor.session(7), 3, lent)
    # the owner lends to a request other than the one the lend names
    assert not authority(parked, Event.LEND, Actor.session(7), 4, lent)
    # a request finishes a running slot it does not own
    running = Slot(State.RUNNING, owner=1)
    assert not authority(running, Event.FINISH, Actor.request(2), NOBODY, Slot(State.RELEASED, fence=1))
    assert authority(running, Event.FINISH, Actor.request(1), NOBODY, Slot(State.RELEASED, fence=1))
    # the borrower may move a lent slot; a request with the owner's number may not
    assert authority(lent, Event.ADMIT, Actor.request(3), NOBODY, lent._replace(state=State.LENT_RUNNING))
    assert not authority(lent, Event.ADMIT, Actor.request(7), NOBODY, lent._replace(state=State.LENT_RUNNING))
    # anyone may take a free slot; a move that changes nothing is no move
    assert authority(Slot(State.FREE), Event.ALLOC, Actor.request(5), NOBODY, Slot(State.TAKEN, owner=5))
    assert authority(running, Event.FINISH, Actor.request(2), NOBODY, running)


def test_borrow_safe_flags_a_lent_slot_that_leaves_its_session():
    lent = Slot(State.LENT_RUNNING, owner=7, borrower=3)
    # the session closes while its slot is lent to a running turn
    assert not borrow_safe(lent, Actor.session(7), Slot(State.RELEASED, fence=1))
    # the slot changes session while lent, or another request ends the loan
    assert not borrow_safe(lent, Actor.request(3), Slot(State.PARKED, owner=8))
    assert not borrow_safe(lent, Actor.request(4), Slot(State.PARKED, owner=7))
    assert borrow_safe(lent, Actor.request(3), Slot(State.PARKED, owner=7))
    assert borrow_safe(Slot(State.PARKED, owner=7), Actor.session(7), Slot(State.RELEASED, fence=1))


def test_handles_follow_flags_a_request_that_keeps_its_handle_after_park():
    running = Slot(State.RUNNING, owner=3)
    # PARK into session 7 that leaves request 3's id as the session-owned slot's owner
    assert not handles_follow(running, Event.PARK, Actor.request(3), 7, Slot(State.PARKED, owner=3))
    assert handles_follow(running, Event.PARK, Actor.request(3), 7, Slot(State.PARKED, owner=7))
    # a stale borrower after the turn gives the slot back
    lent = Slot(State.LENT, owner=7, borrower=3)
    assert not handles_follow(lent, Event.ROLLBACK, Actor.request(3), NOBODY, Slot(State.PARKED, owner=7, borrower=3))
    # a lend to someone the event did not name
    parked = Slot(State.PARKED, owner=7)
    assert not handles_follow(parked, Event.LEND, Actor.session(7), 3, Slot(State.LENT, owner=7, borrower=4))


def test_parks_what_ran_flags_a_candidate_committed_to_its_session():  # SGLang #31765
    assert not parks_what_ran(Slot(State.TAKEN, owner=3), Slot(State.PARKED, owner=7))
    assert parks_what_ran(Slot(State.RUNNING, owner=3), Slot(State.PARKED, owner=7))


def test_the_registry_is_the_one_source_of_words_and_predicates():
    props = registry.PROPERTIES
    # every proof establishes a registered property, and every property with a proof names a real one
    assert all(registry.proved_by(name) for name in proofs.PROOFS)
    assert {p for prop in props.values() for p in prop.proofs} == set(proofs.PROOFS)
    # every move property can judge a move; the checker's words are the registry's
    assert all(p.on_move is not None for p in registry.MOVE_PROPERTIES)
    assert all(abstract.PROPERTIES[name] == registry.text(name) for name in abstract.PROPERTIES)
    assert {n for n, p in props.items() if registry.CHECKER in p.checks} == set(abstract.PROPERTIES)
    # a wrong move is named by the properties it breaks
    lent = Slot(State.LENT, owner=7, borrower=3)
    assert registry.move_faults(lent, Event.CLOSE, Actor.session(7), NOBODY, 1, Slot(State.RELEASED, fence=1)) == (
        "borrow_safe",
    )
