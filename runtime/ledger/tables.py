"""The model's table compiled per event into flat arrays indexed by a *key* that a batched
kernel computes without branches:

    key = state * BITS + (owner == actor) * OWN + (borrower == actor) * BOR + (fence <= actor) * DUE
          + (readers == 0) * IDLE + (readers >= MAX_READERS) * FULL

For every key the relation is computed by the model's own `relation_of` on a slot and actor that
realise those bits; the next state and the field sources are read from the model's table, so
nothing about the lifecycle is restated here. `as_lists` gives the same tables as Python lists
for the per-slot path; `plain_of`, `writes_of` and `sources_of` are per-table views computed once.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from slotwarden.model.declaration import Lifecycle, Source, relation_of
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.table import ILLEGAL, compile_table
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Actor, Event, Slot, State

OWN, BOR, DUE, IDLE, FULL = 16, 8, 4, 2, 1
BITS = 32  # keys per state: one for each combination of the relation bits above
KEYS = len(State) * BITS
_KEEP, _CLEAR, _ACTOR = int(Source.KEEP), int(Source.CLEAR), int(Source.ACTOR)  # plain ints: numpy compares them fast
_INC, _DEC = int(Source.INC), int(Source.DEC)


class EventTable(NamedTuple):
    """One event's compiled columns, each indexed by key."""

    next_state: np.ndarray  # uint8[KEYS], ILLEGAL where the move is not allowed
    owner_from: np.ndarray  # uint8[KEYS] Source codes
    borrower_from: np.ndarray
    fence_from: np.ndarray
    readers_from: np.ndarray  # Source codes: KEEP, CLEAR, INC or DEC
    reads_owner: bool  # whether the owner bit can change the outcome (else skip the gather)
    reads_borrower: bool
    reads_fence: bool
    reads_readers: bool  # whether the lock-count bits can change the outcome
    writes_owner: bool  # whether any legal key rewrites the field (else skip the scatter)
    writes_borrower: bool
    writes_fence: bool
    writes_readers: bool
    relevant: tuple = ()  # per state: the relation bits (OWN | BOR | DUE | IDLE | FULL) that can change its outcome
    unused: tuple = ()  # per state: the fields it holds clear (OWNER | BORROWER | FENCE | READERS), by its declaration


OWNER, BORROWER, FENCE, READERS = 1, 2, 4, 8  # the fields, as bits of `EventTable.unused`


def _unused(spec) -> int:
    """The fields a well-formed record of a state holds clear (NOBODY, fence 0, no readers), as
    `_realise` builds them: clearing one of them again writes nothing new."""
    return (
        (OWNER if spec.owner is None else 0)
        | (BORROWER if not spec.lent else 0)
        | (FENCE if not spec.fenced else 0)
        | (READERS if not spec.shared else 0)
    )


def _realise(state: State, bits: int, lifecycle: Lifecycle, kind) -> tuple[Slot, Actor]:
    """A slot record and an actor whose comparisons give exactly `bits`."""
    spec = lifecycle.spec(state)
    me = 10
    slot = Slot(
        state,
        (me if bits & OWN else me + 1) if spec.owner is not None else NOBODY,
        (me if bits & BOR else me + 2) if spec.lent else NOBODY,
        (me if bits & DUE else me + 1) if spec.fenced else 0,
        (0 if bits & IDLE else MAX_READERS if bits & FULL else 1) if spec.shared else 0,
    )
    return slot, Actor(kind, me)


@lru_cache(maxsize=16)
def compile_events(lifecycle: Lifecycle = LIFECYCLE) -> dict[Event, EventTable]:
    """Every event's columns, derived from the model's table and relation rule (computed
    once per lifecycle; the arrays are read-only)."""
    table = compile_table(lifecycle)
    out = {}
    for event in Event:
        kind = lifecycle.event(event).actor
        cols = np.zeros((5, KEYS), dtype=np.uint8)
        cols[0, :] = ILLEGAL
        for state in State:
            for bits in range(BITS):
                slot, actor = _realise(state, bits, lifecycle, kind)
                rel = relation_of(lifecycle.spec(state), slot, actor)
                key = int(state) * BITS + bits
                cols[0, key] = table.next_state[state][event][rel]
                cols[1, key] = table.owner_from[state][event][rel]
                cols[2, key] = table.borrower_from[state][event][rel]
                cols[3, key] = table.fence_from[state][event][rel]
                cols[4, key] = table.readers_from[state][event][rel]
        legal = cols[0] != ILLEGAL

        def reads(bit):
            flipped = np.arange(KEYS) ^ bit
            return bool((cols[:, flipped] != cols).any())

        def relevant(state):
            keys = np.arange(int(state) * BITS, (int(state) + 1) * BITS)
            return sum(bit for bit in (OWN, BOR, DUE, IDLE, FULL) if (cols[:, keys ^ bit] != cols[:, keys]).any())

        def writes(row):
            return bool((cols[row][legal] != Source.KEEP).any())

        cols.setflags(write=False)
        out[event] = EventTable(
            *cols,
            reads(OWN),
            reads(BOR),
            reads(DUE),
            reads(IDLE) or reads(FULL),
            writes(1),
            writes(2),
            writes(3),
            writes(4),
            tuple(map(relevant, State)),
            tuple(_unused(lifecycle.spec(state)) for state in State),
        )
    return out


PLAIN: dict = {}  # id(table) -> (table, next states as a list, per state the relation bits to read)


def plain_of(table: EventTable) -> tuple:
    """`table`'s next states as a Python list, and per state the relation bits that can change
    its outcome and that the event reads at all (computed once per table object)."""
    hit = PLAIN.get(id(table))
    if hit is None or hit[0] is not table:
        reads = (
            (OWN if table.reads_owner else 0)
            | (BOR if table.reads_borrower else 0)
            | (DUE if table.reads_fence else 0)
            | ((IDLE | FULL) if table.reads_readers else 0)
        )
        relevant = table.relevant or (OWN | BOR | DUE | IDLE | FULL,) * len(State)
        hit = PLAIN[id(table)] = (table, table.next_state.tolist(), tuple(r & reads for r in relevant))
    return hit[1], hit[2]


def released_key(table: EventTable, state: State = State.RELEASED) -> tuple[int | None, int]:
    """For slots all in `state` whose fence has passed (the DUE bit set): their one key under
    `table` and the state it moves them to, or (None, ILLEGAL) if the event reads any other
    relation bit of a slot in that state (then the key needs the other columns gathered)."""
    nxt, probes = plain_of(table)
    if probes[int(state)] & ~DUE:
        return None, ILLEGAL
    key = int(state) * BITS + (DUE if probes[int(state)] & DUE else 0)
    return key, nxt[key]


class ListTable(NamedTuple):
    """One event's compiled columns as Python lists: the same `EventTable`, read a slot at a
    time without numpy's per-call overhead. `relevant` (per state) and `writes` (per key) are
    what the per-slot path reads: the relation bits worth computing for a slot in that state,
    and the fields a move with that key rewrites."""

    next_state: list
    owner_from: list
    borrower_from: list
    fence_from: list
    reads_owner: bool
    reads_borrower: bool
    reads_fence: bool
    readers_from: list = ()
    reads_readers: bool = False
    relevant: tuple = ()  # per state: the relation bits that can change its outcome
    writes: tuple = ()  # per key: ((column position in `Columns`, Source code, the field's clear value), ...)


_FIELDS = (
    (1, 1, NOBODY),
    (2, 2, NOBODY),
    (3, 3, 0),
    (5, 4, 0),
)  # (Columns position, row of the compiled table, clear value)
_FIELD_BITS = (OWNER, BORROWER, FENCE, READERS)


def _writes(table: EventTable) -> tuple:
    """Per key, the fields a legal move rewrites: every source but KEEP, less the CLEAR of a
    field the state before holds clear by its declaration (as `write` skips it)."""
    rows = (table.owner_from, table.borrower_from, table.fence_from, table.readers_from)
    out = []
    for key in range(KEYS):
        unused = table.unused[key // BITS] if table.unused else 0
        fields = []
        if table.next_state[key] != ILLEGAL:
            for (pos, row, clear), bit in zip(_FIELDS, _FIELD_BITS):
                src = int(rows[row - 1][key])
                if src != _KEEP and not (src == _CLEAR and unused & bit):
                    fields.append((pos, src, clear))
        out.append(tuple(fields))
    return tuple(out)


WRITES: dict = {}  # id(table) -> (table, its `_writes`): the tables live as long as their lifecycle's cache


def writes_of(table: EventTable) -> tuple:
    """`_writes(table)`, computed once per table object."""
    hit = WRITES.get(id(table))
    if hit is None or hit[0] is not table:
        hit = WRITES[id(table)] = (table, _writes(table))
    return hit[1]


_SOURCES: dict = {}  # id(table) -> (table, its `_sources`)


def _sources(table: EventTable) -> tuple:
    """The table's source rows (owner, borrower, fence, lock count) as every path writes them:
    KEEP in place of the CLEAR of a field the state before holds clear by its declaration. A
    well-formed record holds that field clear already; a corrupt one keeps its stray value, on
    every path alike, for the audit to report (a move does not repair what it did not cause)."""
    rows = [np.array(r) for r in (table.owner_from, table.borrower_from, table.fence_from, table.readers_from)]
    if table.unused:
        for key in range(KEYS):
            unused = table.unused[key // BITS]
            for row, bit in zip(rows, _FIELD_BITS):
                if row[key] == _CLEAR and unused & bit:
                    row[key] = _KEEP
    for row in rows:
        row.setflags(write=False)
    return tuple(rows)


def sources_of(table: EventTable) -> tuple:
    """`_sources(table)`, computed once per table object."""
    hit = _SOURCES.get(id(table))
    if hit is None or hit[0] is not table:
        hit = _SOURCES[id(table)] = (table, _sources(table))
    return hit[1]


def as_lists(table: EventTable) -> ListTable:
    return ListTable(
        table.next_state.tolist(),
        table.owner_from.tolist(),
        table.borrower_from.tolist(),
        table.fence_from.tolist(),
        table.reads_owner,
        table.reads_borrower,
        table.reads_fence,
        table.readers_from.tolist() if table.writes_readers else (),  # empty: nothing to write, one test
        table.reads_readers,
        tuple(table.relevant) if table.relevant else (OWN | BOR | DUE | IDLE | FULL,) * len(State),
        writes_of(table),
    )
