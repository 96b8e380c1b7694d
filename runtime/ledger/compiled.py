"""The ledger's compiled move (`runtime/ledger/_move.c`), built from the tables of `tables`.

`mover(cols, stamp, tables)` binds a C `Mover` to a ledger's columns and to every event's
compiled table: its `move` checks a whole batch (real slots, each named once, every move legal
by the table) and then writes it, in C over the columns, with no numpy call (a batch in a few
runs of consecutive slots through contiguous memory, any other a slot at a time). The key and
the writes follow `transition.look_up` and `transition.write` exactly: the tables and the key's
bit layout are handed in (the kernel checks the layout is the one it was built for), nothing
about the lifecycle is restated in C.

`AVAILABLE` says whether the extension was built (`pip install` builds it where a C compiler
is found; without one the ledger keeps to its numpy path, with the same results and errors).
`SLOTWARDEN_NUMPY_ONLY=1` in the environment leaves it out even where it is built.
"""

from __future__ import annotations

import os

import numpy as np

from slotwarden.model.declaration import Source
from slotwarden.model.table import ILLEGAL
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Event, State

from slotwarden.runtime.ledger.tables import (
    BITS,
    BOR,
    DUE,
    FULL,
    IDLE,
    KEYS,
    OWN,
    EventTable,
    plain_of,
    sources_of,
)
from slotwarden.runtime.ledger.transition import Columns

try:
    from slotwarden.runtime.ledger._move import Mover
except ImportError:  # built without a C compiler: the numpy path does the work
    Mover = None
if os.environ.get("SLOTWARDEN_NUMPY_ONLY") == "1":  # the compiled move left out, to run the numpy path
    Mover = None

AVAILABLE = Mover is not None

LAYOUT = (BITS, OWN, BOR, DUE, IDLE, FULL, MAX_READERS, NOBODY, ILLEGAL)
SOURCES = tuple(
    int(s) for s in (Source.KEEP, Source.ACTOR, Source.TARGET, Source.EPOCH, Source.CLEAR, Source.INC, Source.DEC)
)

# the outcome codes of `Mover.move` (see `_move.c`): a refusal is -(1 + 4 * position + why)
NOT_A_SLOT, TWICE, REFUSED, CORRUPT = 0, 1, 2, 3
MIXED = 1 << 16  # the slots were in, or moved to, different states (else `after + 256 * before`)
ASK_WITH_STATES = 1 << 17  # they were, and no arrays were handed in for their states: nothing written


def packed(tables: dict[Event, EventTable]) -> tuple[np.ndarray, np.ndarray]:
    """Every event's table as the kernel reads it: [event, (next state, owner, borrower, fence,
    lock count sources), key] (the sources as every path writes them, `sources_of`), and per
    event and state the relation bits worth reading (`plain_of`)."""
    rows = np.zeros((len(Event), 5, KEYS), dtype=np.uint8)
    probes = np.zeros((len(Event), len(State)), dtype=np.uint8)
    for event in Event:
        table = tables[event]
        rows[event, 0] = table.next_state
        rows[event, 1:] = np.stack(sources_of(table))
        probes[event] = plain_of(table)[1]
    return rows, probes


def mover(cols: Columns, stamp: np.ndarray, tables: dict[Event, EventTable]):
    """A `Mover` over `cols` (the ledger's numpy views) and `stamp` (an int32 scratch column,
    which the kernel leaves as it found it, but for -1 in the slots it checked), or None when
    the extension is not built."""
    if Mover is None:
        return None
    rows, probes = packed(tables)
    columns = (cols.state, cols.last_event, cols.owner, cols.borrower, cols.fence, cols.readers, stamp)
    return Mover(columns, rows, probes, LAYOUT, SOURCES)


def refusal(code: int) -> tuple[int, int]:
    """A refused `move`'s (position, why)."""
    p, why = divmod(-1 - code, 4)
    return p, why
