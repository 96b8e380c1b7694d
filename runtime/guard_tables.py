"""A `GuardedAllocator`'s free table (`_free_table`, compiled from `model/free.py`: per actor
kind, state and relation to the slot, the event a free makes), and what it reads of it: per
actor kind, event and state, whether a batch of slots all in that state that the ledger
lets such an actor move by that event is, slot for slot, the free table's move (`_one_move`)."""

from __future__ import annotations

import numpy as np

from slotwarden.model.free import free_rule_for
from slotwarden.model.table import ILLEGAL
from slotwarden.model.vocabulary import ActorKind, Event, Relation, State

from slotwarden.runtime.ledger.tables import BITS, BOR, OWN, plain_of

_ILLEGAL = -1
_NONE, _OWNER, _BORROWER = int(Relation.NONE), int(Relation.OWNER), int(Relation.BORROWER)


def _one_move(ledger, free_event: np.ndarray) -> list:
    """[actor kind][event][state]: whether a batch of slots all in that state that the ledger
    lets an actor of that kind move by that event is, slot for slot, the free table's move: the
    ledger's keys for the state carry the relation bits the free table reads (owner, borrower;
    `tables.plain_of`) and each key it accepts maps to that event in the free table."""
    out = []
    for kind in ActorKind:
        per_event = []
        for event in Event:
            table = ledger.tables[event]
            probes = plain_of(table)[1]
            row = []
            for s in range(len(State)):
                own = ledger.owner_kinds[s] == kind
                bor = kind is ActorKind.REQUEST and bool(ledger.lent[s])
                reads = (OWN if own else 0) | (BOR if bor else 0)
                ok = probes[s] & reads == reads
                for bits in range(BITS):
                    if ok and bits & ~probes[s] == 0 and table.next_state[s * BITS + bits] != ILLEGAL:
                        rel = _BORROWER if bor and bits & BOR else _OWNER if own and bits & OWN else _NONE
                        ok = free_event[kind, s, rel] == event
                row.append(bool(ok))
            per_event.append(row)
        out.append(per_event)
    return out


def _free_table(lifecycle) -> tuple[np.ndarray, np.ndarray]:
    """[actor kind, state, relation] -> the event of a free, or -1; and the state it ends in
    (or -1): compiled from the model."""
    table = np.full((len(ActorKind), len(State), len(Relation)), _ILLEGAL, dtype=np.int64)
    dest = table.copy()
    for kind in ActorKind:
        for state in State:
            for relation in Relation:
                rule = free_rule_for(lifecycle, state, kind, relation)
                if rule is not None:
                    table[kind, state, relation], dest[kind, state, relation] = int(rule.event), int(rule.dest)
    return table, dest
