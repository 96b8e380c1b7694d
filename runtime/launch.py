"""The check of a launched step's write set against a ledger, batched, before the step launches.

A step's kernels index the state by a host-side tensor of slot ids, one per batch row (SGLang:
each request's `mamba_pool_idx`, gathered for the batch; the tiny scheduler: each running
request's slot, then the pad rows). `check_step` judges every row at once against the ledger's
columns as `WRITE_SET` declares (a request row writes and reads only a slot it holds, reads
besides only a cached slot it has locked, never a stale one; a pad row only the pad slot; no
-1, no id past the pool; no slot written twice) and raises the model's `IllegalStep`, naming
the first bad row, its slot, the slot's holder and the row's actor, in the model's words; it
changes nothing. It reads only host memory: no device sync (ids handed over on a device are
copied to the host, which syncs: pass the host copy).
"""

from __future__ import annotations

import numpy as np
import torch

from slotwarden.model import launch as model
from slotwarden.model.errors import BadInput, IllegalStep
from slotwarden.model.lifecycle import LIFECYCLE, WRITE_SET
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, ActorKind, Relation
from slotwarden.model.write_set import ALL_WRITTEN, Fill, Row, RowKind, WriteSet
from slotwarden.runtime import launch_compiled as compiled

_READ_LOCKED = (int(Relation.READER), int(Relation.FULL))


class Tables:
    """The declaration as arrays: per state code and relation, whether a request row may write
    (`write`) or read (`read`) such a slot; per state, its owner kind, lent and shared flags."""

    def __init__(self, write_set: WriteSet = WRITE_SET, lifecycle=LIFECYCLE):
        self.write_set, self.lifecycle = write_set, lifecycle
        spec = write_set.row(RowKind.REQUEST)
        states, relations = 256, len(Relation)
        self.write = np.zeros((states, relations), dtype=bool)
        self.read = np.zeros((states, relations), dtype=bool)
        for a in spec.writes if spec else ():
            self.write[int(a.state), int(a.by)] = True
        for a in spec.reads if spec else ():
            self.read[int(a.state), int(a.by)] = True
        self.owner_kind = np.full(states, 255, dtype=np.uint8)
        self.lent = np.zeros(states, dtype=bool)
        self.shared = np.zeros(states, dtype=bool)
        for s in lifecycle.states:
            self.owner_kind[int(s.state)] = 255 if s.owner is None else int(s.owner)
            self.lent[int(s.state)], self.shared[int(s.state)] = s.lent, s.shared
        self.readable = np.zeros(256, dtype=bool)
        self.readable[[int(f) for f in write_set.readable]] = True
        self.request_rows = spec is not None and spec.actor is ActorKind.REQUEST
        pad = write_set.row(RowKind.PAD)
        self.pad_rows = pad is not None and pad.pad_only


TABLES = Tables()


def check_step(ledger, slot_indices, actors, pad: int = 0, sources=None, fills=None, tables: Tables = TABLES) -> None:
    """Refuse (`IllegalStep`) a step whose rows write `slot_indices` (row i writes slot
    `slot_indices[i]`), each for request `actors[i]` (NOBODY: a pad row), reading besides
    `sources[i]` (None: each row reads only the slot it writes), unless every row may; `pad` is
    the pad slot the engine's pad rows address (the declaration's, `WRITE_SET.pad_slot`);
    `fills` (uint8 per slot id, `Fill` codes), when given, must say each slot read is filled.
    `ledger` is a `SlotLedger` or anything holding one as `.ledger` (a pool, a guard)."""
    ledger = getattr(ledger, "ledger", ledger)
    ledger.check_thread()
    if compiled.AVAILABLE:  # the common call: arrays as the bound check takes them, nothing converted
        check = getattr(ledger, compiled.ATTRIBUTE, None)
        verdict = (
            False if check is None else check.check(ledger.cols, tables, slot_indices, actors, pad, sources, fills)
        )
        if verdict is None:
            return
        if verdict is not False:
            src = slot_indices if sources is None else sources
            return _judged(ledger, verdict, slot_indices, actors, src, fills, tables)
    if not isinstance(pad, int) or isinstance(pad, bool) or pad != tables.write_set.pad_slot:
        raise BadInput(f"this pool's pad slot is {tables.write_set.pad_slot}", argument="pad", value=pad)
    ids = _ints(slot_indices, "slot_indices")
    who = _ints(actors, "actors", ids.size)
    src = ids if sources is None else _ints(sources, "sources", ids.size)
    if fills is not None and (not isinstance(fills, np.ndarray) or fills.shape != (ledger.capacity + 1,)):
        raise BadInput(f"one fill code per slot id 0..{ledger.capacity}", argument="fills", value=fills)
    if compiled.AVAILABLE and (fills is None or fills.dtype == np.uint8):
        row, pair = compiled.first_bad(ledger, ids, who, src, pad, fills, tables)
        if row >= 0:
            _refuse(ledger, row, ids, who, src, fills, tables)
        if pair is not None:
            _refuse_pair(ledger, np.array([pair[0]]), np.array([pair[1]]), ids, who, src, fills, tables)
        return
    bad = _faults(ledger, ids, who, src, pad, fills, tables)
    if bad.any():
        _refuse(ledger, int(np.argmax(bad)), ids, who, src, fills, tables)
    written = ids[ids != pad]  # a slot written by two rows: the second row's
    if written.size > 1:
        order = np.argsort(written, kind="stable")
        twice = np.flatnonzero(written[order][1:] == written[order][:-1])
        if twice.size:
            rows = np.flatnonzero(ids != pad)
            _refuse_pair(ledger, rows[order[twice]], rows[order[twice + 1]], ids, who, src, fills, tables)


def _judged(ledger, verdict, ids, who, src, fills, tables: Tables) -> None:
    """Refuse as a compiled verdict says (the lock record judging the rows reading a cached slot)."""
    row = compiled.locked_out(ledger, verdict, who)
    if row >= 0:
        _refuse(ledger, row, ids, who, src, fills, tables)
    if verdict[3] >= 0:
        _refuse_pair(ledger, np.array([verdict[2]]), np.array([verdict[3]]), ids, who, src, fills, tables)


def _faults(ledger, ids, who, src, pad, fills, tables: Tables) -> np.ndarray:
    """Per row, whether the declaration refuses it alone (all rows at once, no Python loop but
    over rows reading a cached slot, whose lock holders the ledger keeps per slot)."""
    cap, c = ledger.capacity, ledger.cols
    padded = who == NOBODY
    bad = padded & ((ids != pad) | (src != pad)) if tables.pad_rows else padded.copy()
    real = ~padded
    if not tables.request_rows:
        return bad | real
    for slot_ids, writes in ((ids, True),) if src is ids else ((ids, True), (src, False)):  # a row's own slot: once
        inside = (slot_ids >= 1) & (slot_ids <= cap)
        bad |= real & ~inside
        at = np.where(inside, slot_ids, 0)
        state = c.state[at]
        rel = np.zeros(at.size, dtype=np.int64)  # Relation.NONE
        shared = tables.shared[state] & (c.readers[at] > 0)
        rel[shared] = np.where(c.readers[at][shared] >= MAX_READERS, int(Relation.FULL), int(Relation.READER))
        rel[tables.lent[state] & (c.borrower[at] == who)] = int(Relation.BORROWER)
        rel[(tables.owner_kind[state] == int(ActorKind.REQUEST)) & (c.owner[at] == who)] = int(Relation.OWNER)
        ok = tables.read[state, rel]
        if writes:
            ok &= tables.write[state, rel]
        locked = real & inside & ((rel == _READ_LOCKED[0]) | (rel == _READ_LOCKED[1])) & ok
        for i in np.flatnonzero(locked).tolist():  # only rows reading a cached slot: the lock record is per slot
            ok[i] = int(who[i]) in ledger.locks.get(int(at[i]), ())
        if fills is not None:
            ok &= tables.readable[fills[at]]
        bad |= real & inside & ~ok
    return bad


class _Records:
    """The ledger's records as the model's check reads them (`slots[i]`: slot i + 1), built
    only for the slots it looks at."""

    def __init__(self, ledger):
        self.ledger = ledger

    def __len__(self) -> int:
        return self.ledger.capacity

    def __getitem__(self, i: int):
        return self.ledger.record(i + 1)


class _Fills:
    def __init__(self, fills):
        self.fills = fills

    def __getitem__(self, i: int) -> Fill:
        return Fill(int(self.fills[i + 1]))


def _filled(fills):
    """The fills as the model's check reads them (`fills[i]`: slot i + 1's); none: all written."""
    return ALL_WRITTEN if fills is None else _Fills(fills)


def _row(i: int, ids, who, src) -> Row:
    kind = RowKind.PAD if who[i] == NOBODY else RowKind.REQUEST
    return Row(kind, int(who[i]), int(ids[i]), int(src[i]))


def _refuse(ledger, i: int, ids, who, src, fills, tables: Tables):
    """Raise the model's refusal of row `i`, in its words."""
    locks = ledger.locks
    model.check_row(
        i, _row(i, ids, who, src), _Records(ledger), _filled(fills), locks, tables.write_set, tables.lifecycle
    )
    raise IllegalStep("refused by the batched check", row=i, slot_id=int(ids[i]), slot=None, holder=None, actor=None)


def _refuse_pair(ledger, first, second, ids, who, src, fills, tables: Tables):
    """Raise the model's refusal of the earliest second row writing what a row before it writes."""
    j = int(np.argmin(second))
    i, k = int(first[j]), int(second[j])
    rows = (_row(i, ids, who, src), _row(k, ids, who, src))
    try:
        model.check_step(rows, _Records(ledger), _filled(fills), ledger.locks, tables.write_set, tables.lifecycle)
    except IllegalStep as e:
        e.row = k  # the model saw the two rows as rows 0 and 1
        e._reason = f"row {i} writes it too"
        raise
    raise IllegalStep("written by two rows", row=k, slot_id=int(ids[k]), slot=None, holder=None, actor=None)


def _ints(value, what: str, n: int | None = None) -> np.ndarray:
    """`value` (a 1-D integer tensor, array, list or tuple) as an int64 numpy array."""
    if isinstance(value, torch.Tensor):
        if value.dtype is torch.bool or value.is_floating_point() or value.is_complex() or value.device.type == "meta":
            raise BadInput("a 1-D tensor of integers on the host", argument=what, value=value)
        value = value.cpu().numpy()  # device sync only for a tensor handed over on a device: pass the host copy
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        raise BadInput("a 1-D batch of integers", argument=what, value=value) from None
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or (n is not None and arr.size != n):
        need = "a 1-D batch of integers" if n is None else f"a 1-D batch of {n} integers, one per row"
        raise BadInput(need, argument=what, value=value)
    return arr.astype(np.int64, copy=False)
