"""Apply one lifecycle event to a batch of slots: gather, look up, check, scatter.

The kernels run over the ledger's columns (numpy views of host torch tensors: no device sync)
and read the per-event tables of `tables`. The common batch is *uniform*: every slot in one
state and one relation to its actor. `look_up` finds that out by comparing the gathered columns'
bytes and then computes one key and one next state, and `write` scatters scalars: one gather and
one scatter per column. A mixed batch gets a key per slot (`look_up_mixed`). For short batches
`look_up_slots`/`write_slots` do the same a slot at a time over memoryviews of the same columns
(`slot_views`), with the tables as Python lists. None of them changes a column for a batch it
refuses: `after == ILLEGAL` marks a refused move, and `write` takes only legal batches.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Event

from slotwarden.runtime.ledger.tables import (  # noqa: F401 (the tables' names, read from here too)
    BITS,
    BOR,
    DUE,
    FULL,
    IDLE,
    KEYS,
    OWN,
    PLAIN,
    WRITES,
    EventTable,
    ListTable,
    as_lists,
    compile_events,
    plain_of,
    released_key,
    sources_of,
    writes_of,
)
from slotwarden.runtime.ledger.tables import _ACTOR, _CLEAR, _DEC, _INC, _KEEP

_INT64 = struct.Struct("=q")  # an id as the owner and borrower columns hold it (native int64)


class Columns(NamedTuple):
    """The per-slot columns of a ledger, as numpy arrays indexed by slot id."""

    state: np.ndarray  # uint8
    owner: np.ndarray  # int64, NOBODY when none
    borrower: np.ndarray  # int64, NOBODY when none
    fence: np.ndarray  # int32 in the ledger, the step a RELEASED (or CACHING) slot waits for
    last_event: np.ndarray  # uint8, the last event that moved the slot
    readers: np.ndarray  # uint8, the locks held on a CACHED slot (bounded by MAX_READERS)
    code: np.ndarray | None = None  # uint16 over the same memory as state and last_event, where
    # they share one (state + last_event * 256): one scatter writes both; None: two scatters


class Batch(NamedTuple):
    """A batch looked up but not yet written: its keys, states before and after. For a uniform
    batch (every slot has the same key) `key`, `before` and `after` are plain ints, one for the
    whole batch; otherwise arrays, one entry per slot (`expand` gives the arrays either way)."""

    ids: np.ndarray
    key: np.ndarray | int
    before: np.ndarray | int
    after: np.ndarray | int


def expand(batch: Batch) -> Batch:
    """`batch` with `key`, `before` and `after` as arrays, one entry per slot (what a
    `before_write` hook is handed)."""
    if isinstance(batch.after, np.ndarray):
        return batch
    n = batch.ids.size
    key = np.empty(n, dtype=np.intp)
    key.fill(batch.key)
    before = np.empty(n, dtype=np.uint8)
    before.fill(batch.before)
    after = np.empty(n, dtype=np.uint8)
    after.fill(batch.after)
    return Batch(batch.ids, key, before, after)


def _relation_bit(column: np.ndarray, actor_id, n: int) -> int | None:
    """Whether every slot's field equals its actor (1), none does (0), or some do (None),
    decided by comparing bytes: `column` gathered for the batch, `actor_id` one id or one per
    slot. NOBODY matches no one (see `look_up`)."""
    got = column.tobytes()
    if isinstance(actor_id, np.ndarray):
        if got == actor_id.tobytes():
            return 1
    elif actor_id != NOBODY and got == _INT64.pack(actor_id) * n:
        return 1
    if got == got[:8] * n and (column[0] == NOBODY or not isinstance(actor_id, np.ndarray)):
        return 0  # one value for all, and not the (one) actor's: every bit is 0
    return None


def look_up(cols: Columns, table: EventTable, ids: np.ndarray, actor_id, at=None) -> Batch:
    """Gather the records of `ids`, compute their keys and next states. Changes nothing;
    `after == ILLEGAL` marks the slots whose move the lifecycle refuses. `actor_id`: one id
    for the whole batch, or an array of one per slot (no NOBODY in it). A uniform batch comes
    back with one key, one state before and one after (plain ints, see `Batch`). `at`: how
    the columns are indexed, `ids` itself (a gather per column), or for ids that are exactly
    one run of consecutive slots their slice (views: no gather; the ledger's run lane)."""
    n = ids.size
    if at is None:
        at = ids
    before = cols.state[at]
    states = before.tobytes()
    if n and states == states[:1] * n:  # one state: try for one key
        b = states[0]
        hit = PLAIN.get(id(table))  # `plain_of` inline, for its common case
        nxt, probes = hit[1:] if hit is not None and hit[0] is table else plain_of(table)
        key, probe = b * BITS, probes[b]  # the bits that matter for this state and event
        if probe:
            # `relation_of` never makes NOBODY an owner or borrower: an actor id of NOBODY (-1)
            # would otherwise match the NOBODY held by every unowned field
            each = type(actor_id) is np.ndarray  # one actor id per slot (validated: never NOBODY)
            if probe & OWN and not each and actor_id != NOBODY:  # one actor: `_relation_bit` inline
                got = cols.owner[at].tobytes()
                if got == _INT64.pack(actor_id) * n:
                    key += OWN
                elif got != got[:8] * n:
                    key = None
            elif probe & OWN and each:
                bit = _relation_bit(cols.owner[at], actor_id, n)
                key = None if bit is None else key + bit * OWN
            if key is not None and probe & BOR and (each or actor_id != NOBODY):
                bit = _relation_bit(cols.borrower[at], actor_id, n)
                key = None if bit is None else key + bit * BOR
            if key is not None and probe & DUE:
                fence = cols.fence[at]
                got = fence.tobytes()
                if not each and got == got[: fence.itemsize] * n:  # one fence for all: one comparison
                    key += DUE * (fence.item(0) <= actor_id)
                else:
                    due = int(np.count_nonzero(fence <= actor_id))
                    key = key + DUE if due == n else key if due == 0 else None
            if key is not None and probe & (IDLE | FULL):
                counts = cols.readers[at].tobytes()  # uint8: one byte a slot
                if counts == counts[:1] * n:  # one lock count for all
                    key += IDLE * (counts[0] == 0) + FULL * (counts[0] >= MAX_READERS)
                else:
                    key = None
        if key is not None:
            return Batch(ids, key, b, nxt[key])
    return look_up_mixed(cols, table, ids, actor_id, before, at)


def look_up_mixed(cols: Columns, table: EventTable, ids: np.ndarray, actor_id, before=None, at=None) -> Batch:
    """`look_up` with a key per slot, whatever the batch (what `look_up` falls back to when the
    slots differ in state or relation; `before`: the states, if already gathered; `at` as
    in `look_up`)."""
    if at is None:
        at = ids
    before = cols.state[at] if before is None else before
    if type(at) is slice:  # a view of the state column: the batch keeps the states before the write
        before = before.copy()
    each = isinstance(actor_id, np.ndarray)
    key = before.astype(np.intp) * BITS
    if table.reads_owner and (each or actor_id != NOBODY):
        key += (cols.owner[at] == actor_id) * OWN
    if table.reads_borrower and (each or actor_id != NOBODY):
        key += (cols.borrower[at] == actor_id) * BOR
    if table.reads_fence:
        key += (cols.fence[at] <= actor_id) * DUE
    if table.reads_readers:
        count = cols.readers[at]
        key += (count == 0) * IDLE + (count >= MAX_READERS) * FULL
    return Batch(ids, key, before, table.next_state[key])


def write(
    cols: Columns, table: EventTable, batch: Batch, event: Event, actor_id, target: int, epoch: int, at=None
) -> None:
    """Scatter the new records of a batch. Only for a batch with no ILLEGAL move. `actor_id`
    and `at` as in `look_up` (a slice: every column written as a slice, no scatter).

    A uniform batch (one key, see `Batch`) writes one value per column (the actor's id, or
    each slot's actor's); a mixed batch selects per slot with `where`."""
    ids, key = (batch.ids if at is None else at), batch.key
    if type(key) is int or not isinstance(key, np.ndarray):  # uniform: one source per column, one value per scatter
        # the fields this key rewrites (a field the state before holds clear by its declaration
        # is not cleared again), as Python data: no numpy scalar per column
        hit = WRITES.get(id(table))  # `writes_of` inline, for its common case
        for pos, src, clear in (hit[1] if hit is not None and hit[0] is table else writes_of(table))[key]:
            column = cols[pos]
            if src == _INC:  # distinct ids: one in-place step per slot
                column[ids] += 1  # below MAX_READERS: the FULL bit refuses the rest
            elif src == _DEC:
                column[ids] -= 1  # above 0: the IDLE bit refuses the rest
            else:
                column[ids] = (0, actor_id, target, epoch, clear)[src]
        if cols.code is not None:
            cols.code[ids] = int(batch.after) | event << 8  # the state and the last event, one scatter
        else:
            cols.state[ids] = batch.after
            cols.last_event[ids] = event
        return
    each = isinstance(actor_id, np.ndarray)  # one actor id per slot
    values = np.array((0, 0 if each else actor_id, target, epoch, 0), dtype=np.int64)  # indexed by Source
    owner_from, borrower_from, fence_from, readers_from = sources_of(table)  # as the uniform path writes
    for column, source, writes, cleared in (
        (cols.owner, owner_from, table.writes_owner, NOBODY),
        (cols.borrower, borrower_from, table.writes_borrower, NOBODY),
        (cols.fence, fence_from, table.writes_fence, 0),
    ):
        if not writes:
            continue
        values[_CLEAR] = cleared
        src = source[key]
        new = np.where(src == _ACTOR, actor_id, values[src]) if each else values[src]
        column[ids] = np.where(src == _KEEP, column[ids], new)
    if table.writes_readers:
        src = readers_from[key]
        old = cols.readers[ids].astype(np.int64)
        new = np.where(src == _INC, old + 1, np.where(src == _DEC, old - 1, np.where(src == _KEEP, old, 0)))
        cols.readers[ids] = new  # within 0..MAX_READERS: the IDLE and FULL bits refuse the rest
    cols.state[ids] = batch.after
    cols.last_event[ids] = event


def slot_views(cols: Columns) -> Columns:
    """The same columns as memoryviews: one storage, read and written a slot at a time with
    plain Python ints (a memoryview item costs a fraction of a numpy scalar access)."""
    return Columns(*(None if c is None else memoryview(c) for c in cols))


def _key(mv: Columns, s: int, b: int, me: int, probe: int) -> int:
    """The key of slot `s` (state `b`) moved by actor `me`: only the bits in `probe` are read."""
    key = b * BITS
    if probe & OWN and me != NOBODY and mv.owner[s] == me:  # as in `look_up`: NOBODY matches no one
        key += OWN
    if probe & BOR and me != NOBODY and mv.borrower[s] == me:
        key += BOR
    if probe & DUE and mv.fence[s] <= me:
        key += DUE
    if probe & (IDLE | FULL):
        count = mv.readers[s]
        key += IDLE * (count == 0) + FULL * (count >= MAX_READERS)
    return key


def look_up_slots(mv: Columns, table: ListTable, ids: list, actor_ids: list) -> tuple[list, list, list]:
    """`look_up` for a short list of ids over `slot_views`, a slot at a time, `ids[i]` moved
    by the actor `actor_ids[i]`: (keys, before, after). Changes nothing; ILLEGAL in `after`
    marks a refused move. Only the relation bits that matter for a slot's state are read."""
    state, relevant, nxt = mv.state, table.relevant, table.next_state
    if len(ids) == 1:  # one request's slot: the common case, without the loop (and `_key` inline)
        s = ids[0]
        b = state[s]
        key = b * BITS
        probe = relevant[b]
        if probe:
            me = actor_ids[0]
            if probe & OWN and me != NOBODY and mv.owner[s] == me:
                key += OWN
            if probe & BOR and me != NOBODY and mv.borrower[s] == me:
                key += BOR
            if probe & DUE and mv.fence[s] <= me:
                key += DUE
            if probe & (IDLE | FULL):
                count = mv.readers[s]
                key += IDLE * (count == 0) + FULL * (count >= MAX_READERS)
        return [key], [b], [nxt[key]]
    keys, before, after = [], [], []
    for s, me in zip(ids, actor_ids):
        b = state[s]
        probe = relevant[b]
        key = _key(mv, s, b, me, probe) if probe else b * BITS
        keys.append(key)
        before.append(b)
        after.append(nxt[key])
    return keys, before, after


def write_slots(
    mv: Columns,
    table: ListTable,
    ids: list,
    keys: list,
    after: list,
    event: Event,
    actor_ids: list,
    target: int,
    epoch: int,
) -> None:
    """`write` for a short list of ids over `slot_views` (`ids[i]` moved by `actor_ids[i]`).
    Only for moves that are all legal."""
    writes, state, last = table.writes, mv.state, mv.last_event
    if len(ids) == 1:  # one request's slot: the common case, without the loop
        s, me = ids[0], actor_ids[0]
        for pos, src, clear in writes[keys[0]]:
            column = mv[pos]
            if src == _INC:
                column[s] += 1
            elif src == _DEC:
                column[s] -= 1
            else:
                column[s] = (0, me, target, epoch, clear)[src]
        if mv.code is not None:
            mv.code[s] = int(after[0]) | event << 8  # the state and the last event, one write
        else:
            state[s] = after[0]
            last[s] = event
        return
    for s, key, a, me in zip(ids, keys, after, actor_ids):
        for pos, src, clear in writes[key]:
            column = mv[pos]
            if src == _INC:  # the lock count, below MAX_READERS: the FULL bit refuses the rest
                column[s] += 1
            elif src == _DEC:  # above 0: the IDLE bit refuses the rest
                column[s] -= 1
            else:
                column[s] = (0, me, target, epoch, clear)[src]
        state[s] = a
        last[s] = event  # an IntEnum: an int to the memoryview
