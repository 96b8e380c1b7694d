"""The checker's moves: the declaration compiled into the runtime's per-event tables
(`runtime/ledger/tables.py`), read one slot at a time.

A slot's key is its state and the relation bits the table reads (owner, borrower, fence, lock
count against the actor). `EventMoves` holds, per event, the kind of actor that fires it, whether
it needs a target, and per key the next state and the four field sources; `free_events` holds,
per actor kind and key, the event a raw free makes (`model/free.py`'s rule). `move` makes the move
the table gives, or returns None where the table has none: the caller then hands the move to the
model's own `step` (or `free_rule`), which raises the model's error. So every move is checked
against the declaration, and every refusal is worded by the model.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from slotwarden.model.declaration import Lifecycle, Source, relation_of
from slotwarden.model.free import free_rule_for
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.table import ILLEGAL
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, ActorKind, Slot, State
from slotwarden.runtime.ledger.tables import BITS, BOR, DUE, FULL, IDLE, KEYS, OWN, _realise, compile_events

ALL_BITS = OWN | BOR | DUE | IDLE | FULL
_KEEP, _CLEAR, _INC, _DEC = int(Source.KEEP), int(Source.CLEAR), int(Source.INC), int(Source.DEC)
_new = tuple.__new__


class EventMoves(NamedTuple):
    """One event's compiled moves."""

    kind: ActorKind  # the only kind of actor that may fire it
    needs_target: bool  # a lend's borrower, a park's session
    relevant: tuple  # per state: the relation bits that can change the outcome
    moves: list  # per key: None (no rule) or (next State, owner, borrower, fence, lock-count Source codes)


@lru_cache(maxsize=4)
def compiled(lifecycle: Lifecycle = LIFECYCLE) -> dict:
    """Every event's `EventMoves` (computed once per lifecycle)."""
    out = {}
    for event, table in compile_events(lifecycle).items():
        spec = lifecycle.event(event)
        cols = [c.tolist() for c in (table.owner_from, table.borrower_from, table.fence_from, table.readers_from)]
        moves = [
            None if nxt == ILLEGAL else (State(nxt), *(c[key] for c in cols))
            for key, nxt in enumerate(table.next_state.tolist())
        ]
        relevant = tuple(table.relevant) if table.relevant else (ALL_BITS,) * len(State)
        out[event] = EventMoves(spec.actor, spec.target is not None, relevant, moves)
    return out


@lru_cache(maxsize=4)
def free_events(lifecycle: Lifecycle = LIFECYCLE) -> dict:
    """Per actor kind, per key (every relation bit read): the event of a raw free, or None."""
    out = {}
    for kind in ActorKind:
        row = [None] * KEYS
        for state in State:
            for bits in range(BITS):
                slot, actor = _realise(state, bits, lifecycle, kind)
                rule = free_rule_for(lifecycle, state, kind, relation_of(lifecycle.spec(state), slot, actor))
                row[int(state) * BITS + bits] = None if rule is None else rule.event
        out[kind] = row
    return out


def key(rec: Slot, actor_id: int, bits: int = ALL_BITS) -> int:
    """The key of `rec` against actor `actor_id`, reading only the relation `bits`."""
    k = rec[0] * BITS
    if bits:
        if bits & OWN and rec[1] == actor_id:
            k += OWN
        if bits & BOR and rec[2] == actor_id:
            k += BOR
        if bits & DUE and rec[3] <= actor_id:
            k += DUE
        if bits & IDLE and rec[4] == 0:
            k += IDLE
        if bits & FULL and rec[4] >= MAX_READERS:
            k += FULL
    return k


def move(rec: Slot, found: tuple | None, actor_id: int, target: int, epoch: int) -> Slot | None:
    """`rec` after the move `found` (an `EventMoves.moves` entry), or None when there is none.
    Sources as `model.step.apply_effect` reads them: KEEP, ACTOR, TARGET, EPOCH, else cleared; the
    lock count KEEP, INC, DEC, else 0."""
    if found is None:
        return None
    dest, o, b, f, r = found
    given = (None, actor_id, target, epoch)
    return _new(
        Slot,
        (
            dest,
            rec[1] if o == _KEEP else given[o] if o < _CLEAR else NOBODY,
            rec[2] if b == _KEEP else given[b] if b < _CLEAR else NOBODY,
            rec[3] if f == _KEEP else given[f] if f < _CLEAR else 0,
            rec[4] if r == _KEEP else rec[4] + 1 if r == _INC else rec[4] - 1 if r == _DEC else 0,
        ),
    )
