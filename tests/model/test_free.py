"""`model/free.py`: what an engine's free means is read from the declaration, not restated."""

import pickle
from dataclasses import replace

import pytest

from slotwarden.model.declaration import CLEAR, declare
from slotwarden.model.free import IllegalFree, free_rule
from slotwarden.model.lifecycle import EVENTS, LIFECYCLE, RULES, STATES
from slotwarden.model.vocabulary import Actor, Event, Slot, State

LENT = Slot(State.LENT, owner=5, borrower=2)


def test_each_holder_frees_by_the_declared_move():
    assert free_rule(Slot(State.TAKEN, owner=1), Actor.request(1)).event is Event.ROLLBACK
    assert free_rule(Slot(State.RUNNING, owner=1), Actor.request(1)).event is Event.FINISH
    assert free_rule(Slot(State.PARKED, owner=5), Actor.session(5)).event is Event.CLOSE


@pytest.mark.parametrize(
    "slot, actor, words",
    [
        (LENT, Actor.request(2), "no move of a request takes a LENT slot toward the free list"),
        (LENT, Actor.session(5), "no move of a session takes a LENT slot toward the free list"),
        (Slot(State.FREE), Actor.request(1), "a double free"),
        (Slot(State.RELEASED, fence=3), Actor.request(1), "already RELEASED: a double free"),
        (Slot(State.TAKEN, owner=1), Actor.request(2), "a free here is a rollback, and only its owner may rollback"),
        (
            Slot(State.PARKED, owner=5),
            Actor.request(5),
            "no move of a request takes a PARKED slot .*belongs to session 5",
        ),
    ],
)
def test_a_free_with_no_declared_move_raises(slot, actor, words):
    with pytest.raises(IllegalFree, match=words) as err:
        free_rule(slot, actor, slot_id=4)
    assert str(err.value).startswith(f"illegal free by {actor} on slot 4 (state {slot.state.name}")
    again = pickle.loads(pickle.dumps(err.value))
    assert str(again) == str(err.value)


def test_broken_variant_a_lifecycle_where_a_lent_slots_rollback_frees_it():
    """The bug's rule, declared: the borrower's free is then legal. The refusal above comes
    from the declaration, not from a list of cases."""
    buggy_rules = tuple(
        replace(r, dest=State.FREE, effect=CLEAR) if (r.source, r.event) == (State.LENT, Event.ROLLBACK) else r
        for r in RULES
    )
    buggy = declare("buggy", STATES, EVENTS, buggy_rules)
    assert free_rule(LENT, Actor.request(2), buggy).event is Event.ROLLBACK
    with pytest.raises(IllegalFree):
        free_rule(LENT, Actor.request(2), LIFECYCLE)
