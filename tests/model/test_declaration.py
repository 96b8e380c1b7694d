"""The declaration: checked when declared; machine, step() and table derived from it agree."""

import dataclasses

import pytest

from slotwarden.model.declaration import CLEAR, KEEP, Rule, StateSpec, declare
from slotwarden.model.errors import DeclarationError, IllegalMove
from slotwarden.model.lifecycle import EVENTS, LIFECYCLE, RULES, STATES
from slotwarden.model.machine import SlotMachine
from slotwarden.model.step import step
from slotwarden.model.table import ILLEGAL, TABLE
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Group, Relation, Slot, State
from slotwarden.verification.agreement import cases, judge


def test_machine_step_and_table_agree_on_every_combination():
    verdicts = judge()
    assert [v for v in verdicts if not v.agrees] == []
    # pinned: 12 states x 17 events x every (actor kind, relation) a slot of that state admits,
    # with and without a target for lend/park/insert; exactly one case per declared rule is legal
    assert len(verdicts) == 1320
    assert sum(v.step is not None for v in verdicts) == len(RULES) == 34


def test_every_rule_is_exercised_by_some_case():
    fired = {
        (c.slot.state, c.event, c.relation)
        for c in cases()
        if c.target != NOBODY or c.event not in (Event.LEND, Event.PARK, Event.INSERT)
    }
    assert {(r.source, r.event, r.by) for r in RULES} <= fired


def test_the_four_groups_cover_every_state():
    assert {LIFECYCLE.spec(s).group for s in State} == set(Group)


def test_table_marks_undeclared_moves_illegal():
    assert TABLE.next_state[State.LENT][Event.ROLLBACK][Relation.BORROWER] == State.PARKED
    assert TABLE.next_state[State.RUNNING][Event.ROLLBACK][Relation.OWNER] == ILLEGAL
    assert TABLE.next_state[State.PARKED][Event.FINISH][Relation.OWNER] == ILLEGAL
    assert TABLE.next_state[State.RELEASED][Event.FENCE][Relation.EARLY] == ILLEGAL


def _with(rules=RULES, states=STATES, events=EVENTS):
    return declare("test", states, events, rules)


def test_unknown_state_is_refused():
    states = tuple(s for s in STATES if s.state is not State.RELEASED)
    with pytest.raises(DeclarationError, match="unknown state"):
        _with(states=states)
    with pytest.raises(DeclarationError, match="unknown state 'FRE'"):
        _with(states=STATES + (StateSpec("FRE", Group.FREE),))


def test_duplicate_transition_is_refused():
    with pytest.raises(DeclarationError, match="duplicate rule for LENT --ROLLBACK"):
        _with(rules=RULES + (Rule(State.LENT, Event.ROLLBACK, Relation.BORROWER, State.FREE, CLEAR),))


def test_unreachable_state_is_refused():
    rules = tuple(r for r in RULES if r.dest is not State.LENT_RUNNING)
    with pytest.raises(DeclarationError, match="unreachable states: \\['LENT_RUNNING'\\]"):
        _with(rules=rules)


def test_event_with_no_actor_is_refused():
    events = tuple(dataclasses.replace(e, actor=None) if e.event is Event.CLOSE else e for e in EVENTS)
    with pytest.raises(DeclarationError, match="event CLOSE has no actor"):
        _with(events=events)
    with pytest.raises(DeclarationError, match="has no declared actor"):
        _with(events=tuple(e for e in EVENTS if e.event is not Event.FENCE))


def test_impossible_relation_is_refused():
    bad = Rule(State.TAKEN, Event.FINISH, Relation.BORROWER, State.RELEASED, KEEP)
    with pytest.raises(DeclarationError, match="cannot stand in relation BORROWER"):
        _with(rules=RULES + (bad,))


def test_illegal_step_names_state_owner_event_and_actor():
    lent = Slot(State.LENT_RUNNING, owner=4, borrower=5)
    with pytest.raises(IllegalMove) as info:
        step(lent, Event.ROLLBACK, Actor.request(5), slot_id=3)
    text = str(info.value)
    for word in ("rollback", "request 5", "slot 3", "LENT_RUNNING", "owner 4", "lent to request 5"):
        assert word in text
    assert info.value.slot == lent and info.value.event is Event.ROLLBACK and info.value.actor == Actor.request(5)


@pytest.mark.parametrize(
    "slot, event, actor, target, reason",
    [
        (Slot(State.PARKED, owner=1), Event.CLOSE, Actor.session(2), NOBODY, "only its owner may close"),
        (Slot(State.LENT, owner=1, borrower=2), Event.CLOSE, Actor.session(1), NOBODY, "not allowed from LENT"),
        (Slot(State.PARKED, owner=1), Event.LEND, Actor.session(1), NOBODY, "needs the request"),
        (Slot(State.FREE), Event.ALLOC, Actor.session(1), NOBODY, "only a request may fire it"),
        (Slot(State.RELEASED, fence=4), Event.FENCE, Actor.fence(3), NOBODY, "waits for the fence of step 4"),
        (Slot(State.TAKEN, owner=1), Event.FINISH, Actor.request(1), NOBODY, "not allowed from TAKEN"),
        (Slot(State.FREE), Event.FINISH, Actor.request(1), NOBODY, "not allowed from FREE"),
    ],
)
def test_refusals_say_why(slot, event, actor, target, reason):
    with pytest.raises(IllegalMove, match=reason):
        step(slot, event, actor, target)


def test_a_session_turn_round_trip():
    s = step(Slot(State.FREE), Event.ALLOC, Actor.request(1))
    s = step(s, Event.ADMIT, Actor.request(1))
    s = step(s, Event.PARK, Actor.request(1), target=10)
    assert s == Slot(State.PARKED, owner=10)
    s = step(s, Event.LEND, Actor.session(10), target=2)
    s = step(s, Event.ROLLBACK, Actor.request(2))
    assert s == Slot(State.PARKED, owner=10)
    s = step(s, Event.CLOSE, Actor.session(10), epoch=6)
    assert s == Slot(State.RELEASED, fence=6)
    assert step(s, Event.FENCE, Actor.fence(6)) == Slot(State.FREE)


def test_slot_machine_is_interactive_and_has_no_back_doors():
    m = SlotMachine()
    assert not hasattr(m, "to_FREE") and not hasattr(m, "to_RELEASED")
    assert m.alloc(actor=Actor.request(1)) is True
    assert m.state == "TAKEN" and m.record == Slot(State.TAKEN, owner=1)
    with pytest.raises(IllegalMove, match="only its owner may admit"):
        m.fire(Event.ADMIT, Actor.request(2))
    assert m.record == Slot(State.TAKEN, owner=1) and m.state == "TAKEN"
    with pytest.raises(IllegalMove, match="not allowed from TAKEN"):
        m.fire(Event.CLOSE, Actor.session(1))


def test_actor_kinds_are_declared_for_every_event():
    assert {e.event for e in EVENTS} == set(Event)
    assert all(isinstance(e.actor, ActorKind) for e in EVENTS)
