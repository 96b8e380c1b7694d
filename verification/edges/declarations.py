"""The model's own refusals: a malformed declaration, write set or abstract-pool move is refused
by a `DeclarationError`, `BadSlotId` or `IllegalMove` that says what is wrong.

Each fault is the declared lifecycle (model/lifecycle.py) with one thing broken: an unknown or
twice-declared state, an event with no actor, an undeclared initial state, a rule on an unknown
state or event, a relation the state cannot have, no effect, a field from a source it cannot
have, a duplicate rule, unreachable states; the write set's unknown row kind, a kind declared
twice, a pad row with an actor or an access, a real row without one, an unknown state or an
impossible relation, an unknown fill, a pad slot that is no int. The unbroken declarations are
accepted as they are. The abstract pool refuses an id that is no int, a second lock, an unheld
unlock and an alloc of no slot; the table's one-cell `lookup` gives each rule's destination.
"""

from __future__ import annotations

from dataclasses import replace

from slotwarden.model import declaration as lifecycle_api
from slotwarden.model import pool as abstract
from slotwarden.model import write_set as write_set_api
from slotwarden.model.declaration import KEEP, Effect, Rule, Source
from slotwarden.model.errors import BadSlotId, DeclarationError, IllegalMove
from slotwarden.model.lifecycle import EVENTS, LIFECYCLE, ROWS, RULES, STATES, WRITE_SET
from slotwarden.model.table import TABLE, lookup
from slotwarden.model.vocabulary import ActorKind, Actor, Event, Relation, State
from slotwarden.model.write_set import Access, Fill

S, E, R = State, Event, Relation
READABLE = tuple(sorted(WRITE_SET.readable))
NO_CACHED = tuple(s for s in STATES if s.state is not S.CACHED)
FAULTS = {  # what is broken -> (states, events, rules, initial), words the refusal must hold
    "an unknown state": ((*STATES, replace(STATES[0], state=99)), EVENTS, RULES, S.FREE, "unknown state 99"),
    "a state declared twice": ((*STATES, STATES[1]), EVENTS, RULES, S.FREE, "state TAKEN is declared twice"),
    "an event with no actor": (
        STATES,
        (replace(EVENTS[0], actor=None), *EVENTS[1:]),
        RULES,
        S.FREE,
        "event ALLOC has no actor",
    ),
    "an undeclared initial state": (STATES[1:], EVENTS, (), S.FREE, "FREE: 0> is not declared"),
    "a rule on an unknown state": (NO_CACHED, EVENTS, RULES, S.FREE, "uses unknown state"),
    "a rule on an event with no actor": (
        STATES,
        tuple(e for e in EVENTS if e.event is not E.EVICT),
        RULES,
        S.FREE,
        "uses event",
    ),
    "an impossible relation": (
        STATES,
        EVENTS,
        (*RULES, Rule(S.FREE, E.ADMIT, R.OWNER, S.RUNNING, KEEP)),
        S.FREE,
        "cannot stand in relation OWNER to a FREE slot",
    ),
    "no effect": (STATES, EVENTS, (replace(RULES[0], effect=tuple(RULES[0].effect)), *RULES[1:]), S.FREE, "no effect"),
    "a field from a wrong source": (
        STATES,
        EVENTS,
        (replace(RULES[0], effect=Effect(Source.INC, Source.CLEAR, Source.CLEAR, Source.CLEAR)), *RULES[1:]),
        S.FREE,
        "takes its owner from INC",
    ),
    "a duplicate rule": (STATES, EVENTS, (*RULES, RULES[0]), S.FREE, "duplicate rule for FREE --ALLOC [NONE]"),
    "unreachable states": (
        STATES,
        EVENTS,
        tuple(r for r in RULES if r.event is not E.INSERT),
        S.FREE,
        "unreachable states: ['CACHED', 'CACHING']",
    ),
}
REQUEST, PAD = ROWS
ROW_FAULTS = {  # what is broken -> (rows, pad slot, readable), words the refusal must hold
    "an unknown row kind": ((REQUEST, replace(PAD, kind=7)), 0, READABLE, "unknown row kind 7"),
    "a row kind declared twice": ((*ROWS, PAD), 0, READABLE, "row kind PAD is declared twice"),
    "a pad row with an actor": ((REQUEST, replace(PAD, actor=ActorKind.REQUEST)), 0, READABLE, "only the pad slot"),
    "a pad row with an access": ((REQUEST, replace(PAD, reads=REQUEST.reads)), 0, READABLE, "only the pad slot"),
    "a real row with no actor": ((replace(REQUEST, actor=None), PAD), 0, READABLE, "names the kind of its actor"),
    "an unknown state": (
        (replace(REQUEST, writes=(Access(99, R.OWNER),)), PAD),
        0,
        READABLE,
        "addresses unknown state 99",
    ),
    "an impossible relation": (
        (replace(REQUEST, reads=(*REQUEST.reads, Access(S.FREE, R.OWNER))), PAD),
        0,
        READABLE,
        "OWNER: 1> to a FREE slot",
    ),
    "an unknown fill": (ROWS, 0, (*READABLE, 9), "unknown fill 9"),
    "a pad slot that is no int": (ROWS, True, READABLE, "the pad slot True is not a slot id"),
}
R1, R2 = Actor.request(1), Actor.request(2)


def problems(declare=lifecycle_api.declare, declare_write_set=write_set_api.declare_write_set) -> list[str]:
    out = []
    for what, (states, events, rules, initial, words) in FAULTS.items():
        out += _refused(f"a lifecycle with {what}", lambda: declare("broken", states, events, rules, initial), words)
    for what, (rows, pad, readable, words) in ROW_FAULTS.items():
        out += _refused(f"a write set with {what}", lambda: declare_write_set(LIFECYCLE, rows, pad, readable), words)
    again = declare(LIFECYCLE.name, STATES, EVENTS, RULES)
    if again.rules != LIFECYCLE.rules or again.states != LIFECYCLE.states:
        out.append("the declared lifecycle, declared again, is not the same lifecycle")
    kept = declare_write_set(LIFECYCLE, ROWS, WRITE_SET.pad_slot, READABLE)
    if kept.rows != WRITE_SET.rows or kept.readable != frozenset((Fill.ZEROED, Fill.COPIED, Fill.WRITTEN)):
        out.append("the declared write set, declared again, is not the same write set")
    return out + _pool_refusals() + _lookups()


def _pool_refusals() -> list[str]:
    pool = abstract.new_pool(3, locks=True)
    cached = pool._replace(slots=(_cached(pool.slots[0]), *pool.slots[1:]), free=(2, 3))
    locked = abstract.apply(cached, E.LOCK, (1,), R1)
    cases = {
        "an id that is no int": (lambda: abstract.apply(pool, E.ALLOC, ("1",), R1), BadSlotId, "not an integer"),
        "an id that is a bool": (lambda: abstract.apply(pool, E.ALLOC, (True,), R1), BadSlotId, "not an integer"),
        "a second lock": (lambda: abstract.apply(locked, E.LOCK, (1,), R1), IllegalMove, "already holds a lock"),
        "an unheld unlock": (lambda: abstract.apply(locked, E.UNLOCK, (1,), R2), IllegalMove, "holds no lock"),
        "an alloc of no slot": (lambda: abstract.alloc(pool, 0, R1), BadSlotId, "cannot allocate 0 slots"),
    }
    out = []
    for what, (move, kind, words) in cases.items():
        out += _refused(f"the abstract pool's {what}", move, words, kind)
    if abstract.apply(locked, E.UNLOCK, (1,), R1).locks != ():
        out.append("the abstract pool's unlock by the lock's holder leaves the lock recorded")
    return out


def _cached(slot):
    """`slot` as a published cached slot of node 3."""
    return slot._replace(state=S.CACHED, owner=3)


def _lookups() -> list[str]:
    out = []
    for state in State:
        for event in Event:
            for by in Relation:
                rule = LIFECYCLE.rule(state, event, by)
                got = lookup(TABLE, state, event, by)
                if got is not (None if rule is None else rule.dest):
                    out.append(f"lookup({state.name}, {event.name}, {by.name}) = {got}; the declaration: {rule}")
    return out[:3]


def _refused(what: str, build, words: str, kind=DeclarationError) -> list[str]:
    try:
        build()
    except kind as e:
        return [] if words in str(e) else [f"{what} is refused in other words: {str(e)[:160]!r}, want {words!r}"]
    except Exception as e:  # noqa: BLE001 - a refusal of the wrong type is the problem to report
        return [f"{what} raises {type(e).__name__}: {str(e)[:120]}, not a {kind.__name__}"]
    return [f"{what} is accepted"]
