"""The three derived forms of the declaration must agree on every move.

For every state, event, actor kind and relation the actor can stand in to a slot of that state
(and, for events with a target, with and without one) this builds a representative slot and
actor and asks the `transitions` machine, `step` and the compiled table what happens. All three
must give the same verdict (legal or not) and the same next record.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from slotwarden.model.declaration import Lifecycle, Source, relation_of, relations_for
from slotwarden.model.errors import IllegalMove
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.machine import SlotMachine
from slotwarden.model.step import step
from slotwarden.model.table import ILLEGAL, Table, compile_table
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Relation, Slot, State

OWNER_ID, BORROWER_ID, STRANGER_ID, TARGET_ID, FENCE_AT, EPOCH = 1, 2, 9, 3, 5, 7


class Case(NamedTuple):
    slot: Slot
    event: Event
    actor: Actor
    relation: Relation
    target: int


class Verdict(NamedTuple):
    case: Case
    machine: Slot | None  # None: illegal
    step: Slot | None
    table: Slot | None

    @property
    def agrees(self) -> bool:
        return self.machine == self.step == self.table


def representative(lifecycle: Lifecycle, state: State) -> Slot:
    spec = lifecycle.spec(state)
    return Slot(
        state,
        OWNER_ID if spec.owner is not None else NOBODY,
        BORROWER_ID if spec.lent else NOBODY,
        FENCE_AT if spec.fenced else 0,
    )


def actor_for(kind: ActorKind, relation: Relation) -> Actor:
    ids = {
        Relation.OWNER: OWNER_ID,
        Relation.BORROWER: BORROWER_ID,
        Relation.NONE: STRANGER_ID,
        Relation.DUE: FENCE_AT,
        Relation.EARLY: FENCE_AT - 1,
    }
    return Actor(kind, ids[relation])


def cases(lifecycle: Lifecycle = LIFECYCLE) -> Iterator[Case]:
    """Every (state, event, actor kind, relation[, target present]) combination."""
    for spec in lifecycle.states:
        slot = representative(lifecycle, spec.state)
        for event in Event:
            targets = (TARGET_ID, NOBODY) if lifecycle.event(event).target is not None else (NOBODY,)
            for kind in ActorKind:
                for relation in relations_for(spec, kind):
                    actor = actor_for(kind, relation)
                    assert relation_of(spec, slot, actor) is relation
                    for target in targets:
                        yield Case(slot, event, actor, relation, target)


def by_table(table: Table, case: Case) -> Slot | None:
    """The next record as a batched kernel computes it from the compiled table."""
    s, e, a = case.slot.state, case.event, case.actor
    if table.actor_kind[e] != a.kind or (table.has_target[e] and case.target < 0):
        return None
    code = table.next_state[s][e][case.relation]
    if code == ILLEGAL:
        return None

    def field(column, old, cleared):
        return {
            Source.KEEP: old,
            Source.ACTOR: a.id,
            Source.TARGET: case.target,
            Source.EPOCH: EPOCH,
            Source.CLEAR: cleared,
        }[Source(column[s][e][case.relation])]

    return Slot(
        State(code),
        field(table.owner_from, case.slot.owner, NOBODY),
        field(table.borrower_from, case.slot.borrower, NOBODY),
        field(table.fence_from, case.slot.fence, 0),
    )


def _or_none(fn) -> Slot | None:
    try:
        return fn()
    except IllegalMove:
        return None


def judge(lifecycle: Lifecycle = LIFECYCLE) -> list[Verdict]:
    """The verdict of each derived form on every case."""
    table = compile_table(lifecycle)
    verdicts = []
    for case in cases(lifecycle):
        machine = SlotMachine(lifecycle, case.slot)
        verdicts.append(
            Verdict(
                case,
                _or_none(lambda: machine.fire(case.event, case.actor, case.target, EPOCH)),
                _or_none(lambda: step(case.slot, case.event, case.actor, case.target, EPOCH, lifecycle)),
                by_table(table, case),
            )
        )
    return verdicts


