"""The declaration API: a lifecycle is data (states, events, rules), checked when declared.

A `Rule` says: in state `source`, `event` fired by an actor standing in relation `by` to the
slot moves it to `dest`, and `effect` says where each field of the new record comes from.
Whatever is not declared is illegal. `declare` refuses an unknown state, an event with no
actor, a relation the state cannot have, a field taken from a source it cannot have (an id
counted, a count set to an id), a duplicate rule and an unreachable state.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Iterable, NamedTuple

from slotwarden.model.errors import DeclarationError, shown
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Actor, ActorKind, Event, Group, Relation, Slot, State


class Source(IntEnum):
    """Where one field of the next slot record comes from."""

    KEEP = 0  # unchanged
    ACTOR = 1  # the id of the actor firing the event
    TARGET = 2  # the event's target (the borrowing request of a lend, the session of a park)
    EPOCH = 3  # the step in flight when the event fires (a release waits for its fence)
    CLEAR = 4  # NOBODY (fence, readers: 0)
    INC = 5  # one more (the lock count: a lock)
    DEC = 6  # one fewer (the lock count: an unlock)


class Effect(NamedTuple):
    """How a rule rewrites the owner, borrower, fence and readers (lock count) fields."""

    owner: Source
    borrower: Source
    fence: Source
    readers: Source = Source.KEEP


ID_SOURCES = frozenset({Source.KEEP, Source.ACTOR, Source.TARGET, Source.EPOCH, Source.CLEAR})
"""Where an owner, a borrower or a fence may come from (an id or a step is never counted)."""
COUNT_SOURCES = frozenset({Source.KEEP, Source.CLEAR, Source.INC, Source.DEC})
"""Where the lock count may come from (it is never an id or a step)."""

TAKE = Effect(Source.ACTOR, Source.CLEAR, Source.CLEAR, Source.CLEAR)
KEEP = Effect(Source.KEEP, Source.KEEP, Source.KEEP, Source.KEEP)
LEND = Effect(Source.KEEP, Source.TARGET, Source.KEEP, Source.KEEP)
RETURN = Effect(Source.KEEP, Source.CLEAR, Source.KEEP, Source.KEEP)
HAND_OVER = Effect(Source.TARGET, Source.CLEAR, Source.KEEP, Source.KEEP)
RELEASE = Effect(Source.CLEAR, Source.CLEAR, Source.EPOCH, Source.CLEAR)
CLEAR = Effect(Source.CLEAR, Source.CLEAR, Source.CLEAR, Source.CLEAR)
DONATE = Effect(Source.TARGET, Source.CLEAR, Source.EPOCH, Source.CLEAR)
PUBLISH = Effect(Source.KEEP, Source.CLEAR, Source.CLEAR, Source.CLEAR)
READ_LOCK = Effect(Source.KEEP, Source.KEEP, Source.KEEP, Source.INC)
READ_UNLOCK = Effect(Source.KEEP, Source.KEEP, Source.KEEP, Source.DEC)
STAMP = Effect(Source.KEEP, Source.KEEP, Source.EPOCH, Source.KEEP)


@dataclass(frozen=True)
class StateSpec:
    """A state and what a slot record in it holds: an owner of which kind, a borrower, a fence,
    and (`shared`) a lock count of the requests reading it."""

    state: State
    group: Group
    owner: ActorKind | None = None
    lent: bool = False
    fenced: bool = False
    doc: str = ""
    shared: bool = False


@dataclass(frozen=True)
class EventSpec:
    """An event, the kind of actor that fires it, and the kind of its target, if it has one."""

    event: Event
    actor: ActorKind | None
    target: ActorKind | None = None
    doc: str = ""


@dataclass(frozen=True)
class Rule:
    """One legal move: `source --event [by]--> dest`, rewriting the record by `effect`."""

    source: State
    event: Event
    by: Relation
    dest: State
    effect: Effect
    why: str = ""


def relations_for(spec: StateSpec, kind: ActorKind) -> tuple[Relation, ...]:
    """Every relation an actor of `kind` can stand in to a slot in `spec`'s state."""
    if spec.fenced and kind is ActorKind.SCHEDULER:
        return (Relation.DUE, Relation.EARLY)
    found = [Relation.NONE]
    if spec.owner is kind:
        found.append(Relation.OWNER)
        if spec.shared:
            found.append(Relation.PINNED)
    if spec.lent and kind is ActorKind.REQUEST:
        found.append(Relation.BORROWER)
    if spec.shared and kind is ActorKind.REQUEST:
        found.extend((Relation.READER, Relation.FULL))
    return tuple(found)


def relation_of(spec: StateSpec, slot: Slot, actor: Actor) -> Relation:
    """The relation of `actor` to `slot` (whose state is described by `spec`).

    On a shared (cached) slot the relation reads the lock count, as a fence reads the step a
    released slot waits for: its owner is PINNED while any lock is held, and a request is a
    READER (FULL at the bound) while the count is above zero. The record counts locks, it does
    not name their holders: the pool model keeps who holds which lock (`Pool.locks`) and refuses
    an unlock by a request that holds none on the slot (`slotwarden.model.pool.relock`), and
    `slotwarden.model.properties.locks_match` judges the count against that record."""
    if spec.fenced and actor.kind is ActorKind.SCHEDULER:
        return Relation.DUE if actor.id >= slot.fence else Relation.EARLY
    if spec.owner is actor.kind and actor.id == slot.owner and slot.owner != NOBODY:
        return Relation.PINNED if spec.shared and slot.readers > 0 else Relation.OWNER
    if spec.lent and actor.kind is ActorKind.REQUEST and actor.id == slot.borrower and slot.borrower != NOBODY:
        return Relation.BORROWER
    if spec.shared and actor.kind is ActorKind.REQUEST and slot.readers > 0:
        return Relation.FULL if slot.readers >= MAX_READERS else Relation.READER
    return Relation.NONE


@dataclass(frozen=True)
class Lifecycle:
    """A checked declaration. Build it with `declare`; look rules up with `rule`."""

    name: str
    states: tuple[StateSpec, ...]
    events: tuple[EventSpec, ...]
    rules: tuple[Rule, ...]
    initial: State
    _specs: dict = field(repr=False, compare=False, default_factory=dict)
    _events: dict = field(repr=False, compare=False, default_factory=dict)
    _rules: dict = field(repr=False, compare=False, default_factory=dict)

    def spec(self, state: State) -> StateSpec:
        return self._specs[state]

    def event(self, event: Event) -> EventSpec:
        return self._events[event]

    def rule(self, state: State, event: Event, by: Relation) -> Rule | None:
        """The rule for this (state, event, relation), or None: the move is illegal."""
        return self._rules.get((state, event, by))

    def rules_from(self, state: State) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.source is state)


def declare(
    name: str,
    states: Iterable[StateSpec],
    events: Iterable[EventSpec],
    rules: Iterable[Rule],
    initial: State = State.FREE,
) -> Lifecycle:
    """Check a lifecycle and return it; raise `DeclarationError` naming the first fault."""
    states, events, rules = tuple(states), tuple(events), tuple(rules)
    specs = _index(states, "state", lambda s: s.state, State)
    event_specs = _index(events, "event", lambda e: e.event, Event)
    for e in events:
        if not isinstance(e.actor, ActorKind):
            raise DeclarationError(f"{name}: event {e.event.name} has no actor that may fire it")
    if initial not in specs:
        raise DeclarationError(f"{name}: initial state {shown(initial)} is not declared")
    table: dict = {}
    for r in rules:
        for s in (r.source, r.dest):
            if s not in specs:
                raise DeclarationError(f"{name}: rule {_show(r)} uses unknown state {s!r}")
        if r.event not in event_specs:
            raise DeclarationError(f"{name}: rule {_show(r)} uses event {r.event!r}, which has no declared actor")
        kind = event_specs[r.event].actor
        if r.by not in relations_for(specs[r.source], kind):
            raise DeclarationError(
                f"{name}: rule {_show(r)}: a {kind.name.lower()} cannot stand in relation "
                f"{r.by.name} to a {r.source.name} slot"
            )
        if not isinstance(r.effect, Effect):
            raise DeclarationError(f"{name}: rule {_show(r)} has no effect")
        for fname, src in zip(Effect._fields, r.effect):
            allowed = COUNT_SOURCES if fname == "readers" else ID_SOURCES
            if src not in allowed:
                raise DeclarationError(f"{name}: rule {_show(r)} takes its {fname} from {getattr(src, 'name', src)}")
        key = (r.source, r.event, r.by)
        if key in table:
            raise DeclarationError(f"{name}: duplicate rule for {r.source.name} --{r.event.name} [{r.by.name}]")
        table[key] = r
    unreachable = set(specs) - _reachable(initial, rules)
    if unreachable:
        raise DeclarationError(f"{name}: unreachable states: {sorted(s.name for s in unreachable)}")
    return Lifecycle(name, states, events, rules, initial, specs, event_specs, table)


def _index(items, what, key, enum):
    found = {}
    for item in items:
        k = key(item)
        if not isinstance(k, enum):
            raise DeclarationError(f"unknown {what} {shown(k)}: not a member of {enum.__name__}")
        if k in found:
            raise DeclarationError(f"{what} {k.name} is declared twice")
        found[k] = item
    return found


def _reachable(initial: State, rules: tuple[Rule, ...]) -> set:
    seen, todo = {initial}, deque([initial])
    while todo:
        here = todo.popleft()
        for r in rules:
            if r.source is here and r.dest not in seen:
                seen.add(r.dest)
                todo.append(r.dest)
    return seen


def _show(r: Rule) -> str:
    src = getattr(r.source, "name", r.source)
    dst = getattr(r.dest, "name", r.dest)
    ev = getattr(r.event, "name", r.event)
    by = getattr(r.by, "name", r.by)
    return f"{src} --{ev} [{by}]--> {dst}"
