"""The launched step's check in C (`runtime/_step.c`), over the ledger's columns and `Tables`.

`bound(ledger, tables)` gives the ledger's `Check`: its columns, the tables and its scratch
bound once (kept on the ledger, made again when `ledger.cols` or the tables are not the ones
bound). `Check.check(cols, tables, ids, who, pad, src, fills)` judges a step as `launch._faults`
and the duplicate scan do: None when it passes, False when it cannot judge the arguments as
given, else (first refused row or -1, the (row, slot) pairs of rows reading a locked cached
slot, the first pair of rows writing one slot or -1, -1). The tables are handed in, nothing
about the lifecycle is restated in C. `first_bad` adds the lock record's verdict. `AVAILABLE`:
the extension is built and `SLOTWARDEN_NUMPY_ONLY=1` is not set.
"""

from __future__ import annotations

import os

import numpy as np

from slotwarden.model.vocabulary import MAX_READERS, NOBODY, ActorKind, Relation

try:
    from slotwarden.runtime._step import Check
except ImportError:  # built without a C compiler: launch keeps to numpy
    Check = None
if os.environ.get("SLOTWARDEN_NUMPY_ONLY") == "1":
    Check = None

AVAILABLE = Check is not None
ATTRIBUTE = "_launch_check"  # where a ledger keeps its bound check

_CODES = (
    *(int(r) for r in (Relation.NONE, Relation.READER, Relation.FULL, Relation.BORROWER, Relation.OWNER)),
    int(ActorKind.REQUEST),
    MAX_READERS,
    NOBODY,
)


def _state_bytes(state: np.ndarray) -> tuple[np.ndarray, int]:
    """The state column as contiguous bytes and a stride (it may be every other byte of a wider code)."""
    if state.flags.c_contiguous:
        return state, 1
    stride = state.strides[0]  # the same memory, read byte by byte from the first state on
    span = ((state.size - 1) * stride + 1,)
    return np.lib.stride_tricks.as_strided(state, shape=span, strides=(1,), writeable=False), stride


def _arrays(tables) -> tuple:
    """The tables as uint8 arrays, made once per `Tables`."""
    arrays = getattr(tables, "_compiled", None)
    if arrays is None:
        u8 = (tables.write, tables.read, tables.owner_kind, tables.lent, tables.shared, tables.readable)
        arrays = tables._compiled = tuple(np.ascontiguousarray(t, dtype=np.uint8) for t in u8)
    return arrays


def bound(ledger, tables):
    """The ledger's `Check` over its current columns and `tables`, bound again where they changed."""
    check = getattr(ledger, ATTRIBUTE, None)
    c = ledger.cols
    if check is None or check.check(c, tables, _NO_ROWS, _NO_ROWS, tables.write_set.pad_slot, None, None) is not None:
        state, stride = _state_bytes(c.state)
        codes = (*_CODES, tables.write.shape[1])
        pad = tables.write_set.pad_slot
        check = Check(c, tables, np.ndarray, state, stride, c.owner, c.borrower, c.readers, *_arrays(tables), codes,
                      pad, tables.request_rows, tables.pad_rows)  # fmt: skip
        setattr(ledger, ATTRIBUTE, check)
    return check


_NO_ROWS = np.zeros(0, dtype=np.int64)


def locked_out(ledger, verdict, who) -> int:
    """The first refused row of a `Check` verdict, the lock record's refusals included (-1: none)."""
    bad, pairs = verdict[0], verdict[1]
    locks = ledger.locks
    for row, slot in zip(pairs[::2], pairs[1::2]):  # rows reading a cached slot, before `bad`
        if int(who[row]) not in locks.get(slot, ()):
            return row
    return bad


def first_bad(ledger, ids, who, src, pad, fills, tables) -> tuple[int, tuple[int, int] | None]:
    """(the first refused row or -1, (row, later row) writing one slot, or None), for int64
    arrays `ids`, `who`, `src` and uint8 `fills` (or None), each checked by the caller."""
    ids, who = np.ascontiguousarray(ids), np.ascontiguousarray(who)
    src = None if src is ids else np.ascontiguousarray(src)
    fills = None if fills is None else np.ascontiguousarray(fills)
    verdict = bound(ledger, tables).check(ledger.cols, tables, ids, who, pad, src, fills)
    if verdict is False:
        raise ValueError("the compiled check cannot judge these arrays")
    if verdict is None:
        return -1, None
    row = locked_out(ledger, verdict, who)
    if row != verdict[0]:
        return row, None
    first, second = verdict[2], verdict[3]
    return row, None if second < 0 else (first, second)
