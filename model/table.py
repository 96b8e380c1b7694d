"""The declaration compiled into dense arrays, the form the runtime puts on a device.

`next_state[state][event][relation]` is the next state code or `ILLEGAL`; `owner_from`,
`borrower_from`, `fence_from`, `readers_from` say where each field of the new record comes from (`Source`
codes). Per-state columns (`owner_kind`, `lent`, `fenced`, `shared`, `group`) and the per-event
`actor_kind`/`has_target` are what a batched kernel needs to compute the relation itself.
Plain nested tuples of ints: no torch here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from slotwarden.model.declaration import Lifecycle
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import Event, Relation, State

ILLEGAL = 255
"""The next-state code of a move the declaration does not allow (fits a uint8)."""

NO_KIND = 255
"""The owner-kind code of a state that has no owner."""


class Table(NamedTuple):
    next_state: tuple  # [state][event][relation] -> state code or ILLEGAL
    owner_from: tuple  # [state][event][relation] -> Source code
    borrower_from: tuple
    fence_from: tuple
    readers_from: tuple
    owner_kind: tuple  # [state] -> ActorKind code or NO_KIND
    lent: tuple  # [state] -> 0/1
    fenced: tuple  # [state] -> 0/1
    shared: tuple  # [state] -> 0/1: the record counts readers' locks
    group: tuple  # [state] -> Group code
    actor_kind: tuple  # [event] -> ActorKind code
    has_target: tuple  # [event] -> 0/1


@lru_cache(maxsize=16)
def compile_table(lifecycle: Lifecycle = LIFECYCLE) -> Table:
    """Every (state, event, relation) of `lifecycle` as dense arrays (computed once per lifecycle)."""

    def column(pick, missing):
        return tuple(
            tuple(
                tuple(pick(rule) if (rule := lifecycle.rule(s, e, r)) is not None else missing for r in Relation)
                for e in Event
            )
            for s in State
        )

    specs = [lifecycle.spec(s) for s in State]
    events = [lifecycle.event(e) for e in Event]
    return Table(
        next_state=column(lambda r: int(r.dest), ILLEGAL),
        owner_from=column(lambda r: int(r.effect.owner), 0),
        borrower_from=column(lambda r: int(r.effect.borrower), 0),
        fence_from=column(lambda r: int(r.effect.fence), 0),
        readers_from=column(lambda r: int(r.effect.readers), 0),
        owner_kind=tuple(NO_KIND if s.owner is None else int(s.owner) for s in specs),
        lent=tuple(int(s.lent) for s in specs),
        fenced=tuple(int(s.fenced) for s in specs),
        shared=tuple(int(s.shared) for s in specs),
        group=tuple(int(s.group) for s in specs),
        actor_kind=tuple(int(e.actor) for e in events),
        has_target=tuple(int(e.target is not None) for e in events),
    )


def lookup(table: Table, state: State, event: Event, relation: Relation) -> State | None:
    """The next state the table gives, or None for ILLEGAL."""
    code = table.next_state[state][event][relation]
    return None if code == ILLEGAL else State(code)


TABLE = compile_table()
