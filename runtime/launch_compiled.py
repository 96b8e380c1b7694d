"""The launched step's check in C (`runtime/_step.c`), over the ledger's columns and `Tables`.

`first_bad(ledger, ids, who, src, pad, fills, tables)` gives the first row the declaration
refuses (or -1) and the first pair of rows writing one slot (or None), as `launch._faults` and
the duplicate scan judge them: the tables are handed in, nothing about the lifecycle is
restated in C; rows reading a locked cached slot come back to be checked against the ledger's
lock record here. `AVAILABLE`: the extension is built and `SLOTWARDEN_NUMPY_ONLY=1` is not set.
"""

from __future__ import annotations

import os

import numpy as np

from slotwarden.model.vocabulary import MAX_READERS, NOBODY, ActorKind, Relation

try:
    from slotwarden.runtime._step import first_bad as _first_bad
except ImportError:  # built without a C compiler: launch keeps to numpy
    _first_bad = None
if os.environ.get("SLOTWARDEN_NUMPY_ONLY") == "1":
    _first_bad = None

AVAILABLE = _first_bad is not None

_CODES = (
    *(int(r) for r in (Relation.NONE, Relation.READER, Relation.FULL, Relation.BORROWER, Relation.OWNER)),
    int(ActorKind.REQUEST),
    MAX_READERS,
    NOBODY,
)


class _Scratch:
    """Per pool size: the lock-check buffer (grown to the largest batch, `room`) and the
    last-row-per-slot column (all -1 between calls: the kernel clears what it set)."""

    def __init__(self, cap: int):
        self.locks = np.empty(4, dtype=np.int64)
        self.seen = np.full(cap + 1, -1, dtype=np.int64)
        self.state = self.bytes = None
        self.stride = 1

    def room(self, n: int) -> None:
        """Room for two (row, slot) pairs a row in the lock-check buffer."""
        if self.locks.size < 4 * n:
            self.locks = np.empty(4 * n, dtype=np.int64)

    def bind(self, state: np.ndarray):
        """The state column as contiguous bytes and a stride (it may be every other byte of a wider code)."""
        self.state, self.bytes, self.stride = state, state, 1
        if not state.flags.c_contiguous:  # the same memory, read byte by byte from the first state on
            self.stride = state.strides[0]
            span = ((state.size - 1) * self.stride + 1,)
            self.bytes = np.lib.stride_tricks.as_strided(state, shape=span, strides=(1,), writeable=False)


_scratch: dict[int, _Scratch] = {}


def first_bad(ledger, ids, who, src, pad, fills, tables) -> tuple[int, tuple[int, int] | None]:
    """(the first refused row or -1, (row, later row) writing one slot, or None)."""
    c, cap = ledger.cols, ledger.capacity
    same = src is ids
    ids, who = np.ascontiguousarray(ids), np.ascontiguousarray(who)
    src = ids if same else np.ascontiguousarray(src)
    scratch = _scratch.get(cap)
    if scratch is None:
        scratch = _scratch[cap] = _Scratch(cap)
    scratch.room(ids.size)
    if scratch.state is not c.state:
        scratch.bind(c.state)
    compiled = getattr(tables, "_compiled", None)
    if compiled is None:
        u8 = [np.ascontiguousarray(t, dtype=np.uint8) for t in (tables.write, tables.read, tables.owner_kind)]
        flags = [np.ascontiguousarray(t, dtype=np.uint8) for t in (tables.lent, tables.shared, tables.readable)]
        compiled = tables._compiled = (*u8, *flags, (*_CODES, tables.write.shape[1]))
    *arrays, codes = compiled
    have = fills is not None
    bad, nlock, first, second = _first_bad(
        ids, who, src, pad, same, tables.request_rows, tables.pad_rows, have, scratch.stride,
        scratch.bytes, c.owner, c.borrower, c.readers, fills if have else scratch.bytes,
        *arrays, scratch.locks, scratch.seen, codes,
    )  # fmt: skip
    if nlock:
        for row, slot in scratch.locks[: 2 * nlock].reshape(-1, 2).tolist():  # rows reading a cached slot
            if int(who[row]) not in ledger.locks.get(slot, ()):
                return row, None
    return bad, None if second < 0 else (first, second)
