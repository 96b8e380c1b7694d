"""The ledger's batch paths, for batches above the per-slot size: the compiled move's lane
(`_move`: the C kernel of `compiled` checks and writes the batch, then the free ring,
the releases filed under their fence's step and the flight recorder), and, where it is not
built, the numpy kernel (`transition`: one gather per column it reads and one scatter
per column it writes). A batch the compiled move refuses goes to the numpy checks, which raise
(`_refuse`).

The numpy path's run lane: a batch whose ids are exactly one run of consecutive slots, in
increasing order (what the free ring hands out, and what comes back together), is read and
written through slices of the columns (views: no gather, no scatter), checked against the table
like any other batch, and needs no duplicate check (a run names each slot once); the free ring
takes it back as a run. The lane takes batches of at least `run_min` slots
(`codes.RUN_MIN`); any larger `run_min` turns it off (the tests compare the two)."""

from __future__ import annotations

import numpy as np

from slotwarden.runtime.ledger.compiled import ASK_WITH_STATES, MIXED, refusal
from slotwarden.runtime.ledger.transition import (
    Batch,
    writes_of,
    expand,
    look_up,
    write,
)
from slotwarden.model.table import ILLEGAL
from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime.ledger.checks import Checks, _first_illegal as _first_illegal_position
from slotwarden.runtime.ledger.recorder import Actors
from slotwarden.runtime.ledger.slots import SlotPath
from slotwarden.runtime.ledger.codes import (
    _INT64,
    _UNIT,
    _ALLOC,
    _EPOCH,
    _FENCE,
    _FENCE_POS,
    _FREE,
    _FREE_BYTE,
    _RELEASED,
    _RELEASED_BYTE,
)


_NONE = np.zeros(0, dtype=np.int64)  # no slot due: one empty array for every fence (nothing can be written into it)


class BatchPath(SlotPath, Checks):
    """`SlotLedger`'s batch paths (a mixin over `LedgerState`, the per-slot path and the checks)."""

    def _run(self, ids: np.ndarray) -> slice | None:
        """The slice `ids` names if they are exactly the run first, first + 1, ..., first + n - 1
        of real slots (so real and distinct), n >= max(2, `run_min`); else None.
        Two item reads turn most other batches away; a run is confirmed by one memcmp."""
        n = ids.size
        if n < 2 or n < self.run_min:
            return None
        first = ids.item(0)
        end = first + n
        if ids.item(n - 1) != end - 1 or first < 1 or end > self.capacity + 1:
            return None
        if ids.tobytes() != np.arange(first, end, dtype=np.int64).tobytes():  # every id in its place
            return None
        return slice(first, end)

    def _due(self, step: int) -> tuple[np.ndarray, list, bool, slice | None]:
        """The slots waiting for a fence (RELEASED, or CACHING) whose fence is `step` or
        earlier, in id order (what a scan of the columns would find), read from the per-step
        lists of releases instead of a scan of the pool; the steps of the lists used; whether
        the slots were found all RELEASED with one fence, passed (their FENCE is then one key:
        `_fence_released` moves them without gathering them again); and their slice when they
        are one run (`_run`)."""
        steps = [s for s in self._waiting if s <= step] if self._waiting else []
        if not steps:
            return _NONE, steps, False, None
        chunks = [c for s in steps for c in self._waiting[s]]  # lists (per-slot path), arrays, or runs (ranges)
        if sum(map(len, chunks)) <= self.small:  # a slot at a time
            state, fence = self._slots.state, self._slots.fence
            waits = self._waits
            due = sorted({int(s) for ids in chunks for s in ids if state[s] in waits and fence[s] <= step})
            released = _RELEASED
            for s in due:
                if state[s] != released:
                    return np.array(due, dtype=np.int64), steps, False, None
            return np.array(due, dtype=np.int64), steps, True, None
        at = None
        if len(chunks) == 1:  # one batch's releases: distinct ids already
            cand = chunks[0]
            if type(cand) is range:  # one run, filed as such: in order, its slice known
                at = slice(cand.start, cand.stop)
                cand = np.arange(cand.start, cand.stop, dtype=np.int64)
            else:
                if type(cand) is list:
                    cand = np.array(cand, dtype=np.int64)
                cand.sort()  # in place: the ledger's own copy, filed by `_note_released`
        else:
            cand = np.unique(np.concatenate([np.asarray(ids, dtype=np.int64) for ids in chunks]))
            at = self._run(cand)
        c = self.cols
        where = cand if at is None else at
        state, fence = c.state[where], c.fence[where]
        # a slot still waiting may wait for a later step than the one it was filed under (an
        # unpublished write evicted while a later step is in flight): read its fence
        if state.tobytes() == _RELEASED_BYTE * cand.size:  # all RELEASED (the usual case)
            got = fence.tobytes()
            if got == got[: fence.itemsize] * cand.size and fence.item(0) <= step:  # one fence, passed: all due
                return cand, steps, True, at
        waiting = self._waits_mask[state]
        return cand[waiting & (fence <= step)], steps, False, None

    def _fence_released(self, due: np.ndarray, actor: Actor, before_write, at: slice | None = None) -> np.ndarray:
        """FENCE by `actor` (the step) of `due`, found by `_due` all RELEASED with a fence that
        has passed: that is the batch's look-up (the state, and the one relation bit FENCE
        reads of a RELEASED slot, DUE), so it is written with that one key (`_released_key`),
        without a second gather (up to `small` slots, a slot at a time; `at`: their slice, if
        one run). Returns the freed ids. A lifecycle whose FENCE of a RELEASED
        slot reads another bit, or refuses it, goes through `_apply` (which checks and raises)."""
        key, after = self._released_key
        if key is None or after == ILLEGAL:
            self._apply(due, _FENCE, actor, NOBODY, before_write, at=at)
            return due[self.cols.state[due] == _FREE]
        if due.size <= self.small:
            return self._fence_released_slots(due, actor, before_write)
        if self.mover is not None:  # the compiled lane
            self._move(due, _FENCE, actor, actor[1], NOBODY, before_write)
            return due if after == _FREE else due[:0]
        batch = Batch(due, key, _RELEASED, after)
        if before_write is not None:
            before_write(expand(batch))
        self._write(batch, self.tables[_FENCE], _FENCE, actor[1], NOBODY, actor, at=at)
        return due if after == _FREE else due[:0]

    def _note_released(self, ids: np.ndarray, fence: int | None = None, at: slice | None = None) -> None:
        """File slots just moved into a state that waits for a fence (RELEASED) under the step
        their fence waits for (one array per step, or a range for a run); `fence`: that step,
        when the move wrote the same one into every slot; `at`: their slice, if one run."""
        if fence is None:
            fences = self.cols.fence[ids if at is None else at]
            codes = fences.tobytes()
            if codes == codes[: fences.itemsize] * ids.size:  # one fence for all (the usual case)
                fence = fences.item(0)
        if fence is not None:
            self._waiting.setdefault(fence, []).append(ids.copy() if at is None else range(at.start, at.stop))
            return
        for f in np.unique(fences).tolist():
            self._waiting.setdefault(f, []).append(ids[fences == f])

    def _apply(
        self,
        ids: np.ndarray,
        event: Event,
        actor: Actor,
        target: int,
        before_write=None,
        raw: bytes | None = None,
        at: slice | None = None,
    ) -> np.ndarray:
        """Check and write one actor's batch (`raw`: their bytes, if read; `at`: their slice, if
        they are one run). The ids are real and distinct (checked by the caller), or, for the
        compiled lane, checked by the compiled move itself."""
        if ids.size <= self.small and self._apply_slots(ids, event, actor, target, before_write):
            return ids
        strict = self.check == "strict"
        if strict:
            kind, needs_target = self._actor_ok[event]
            if actor[0] is not kind or (needs_target and target < 0):
                self._check_actor(self._ids(ids, event, actor), event, actor, target)  # raises
        if self.mover is not None:  # the compiled lane: checked and written in one pass of C
            if ids.dtype is not _INT64 or ids.strides != _UNIT:  # 1-D: contiguous int64 or a copy
                ids = np.ascontiguousarray(ids, dtype=np.int64)
            self._move(ids, event, actor, actor[1], target, before_write)
            return ids
        detached = self._detached(ids)  # a view of a column: its moves would change it
        if detached is not ids:
            ids, raw, at = detached, None, None
        table = self.tables[event]
        batch = look_up(self.cols, table, ids, actor[1], at)
        if strict and (type(batch.after) is not int or batch.after == ILLEGAL):
            self._check_batch(batch, event, actor, target)
        if before_write is not None:
            before_write(expand(batch))
        self._write(batch, table, event, actor[1], target, actor, raw, at)
        return ids

    def _write(
        self, batch: Batch, table, event: Event, actor_id, target: int, actor, raw: bytes | None = None, at=None
    ) -> None:
        """Write a checked batch: the columns, the free list, the releases' fences, the recorder
        (`raw`: the ids' bytes, if read already; `at`: their slice, if they are one run)."""
        ids, after = batch.ids, batch.after
        owner, self._thread = self._thread, self._marks[event]  # the write's parts: one unit
        write(self.cols, table, batch, event, actor_id, target, self.launched, at)
        if type(after) is int and after in self._waits:  # uniform, into a state that waits for a fence
            # a key that sets the fence to the step in flight: every slot waits for that one
            epoch = any(pos == _FENCE_POS and src == _EPOCH for pos, src, _ in writes_of(table)[batch.key])
            self._note_released(ids, self.launched if epoch else None, at=at)
        else:
            self._settle(ids, after, event, at)
        # `ids` may be a view of the caller's tensor (and is returned to it): record a copy (bytes)
        raw = ids.tobytes() if raw is None else raw
        self.recorder.record(event, actor, target, self.launched, raw, batch.before, after)
        self._thread = owner

    def _move(
        self,
        ids: np.ndarray,
        event: Event,
        actor,
        actor_id,
        target: int,
        before_write,
        dup: bool = True,
        hold: bool = False,
    ) -> None:
        """The compiled lane: check `ids` (C-contiguous int64) whole and write them, by `actor`
        (one actor, `actor_id` its id; or `Actors`, `actor_id` their ids), in the kernel
        (`compiled`); then the free ring, the releases' fences and the recorder. With a
        `before_write` hook the kernel checks first and writes after the hook. A batch it
        refuses changes nothing and goes to `_refuse`, which raises the vectorised path's error.
        `dup=False`: the ids are known distinct (the free ring's), no duplicate check. From the
        kernel's write to the recorder the ledger holds the write's mark (`hold`: still at the
        return, for the caller's last part)."""
        ids = self._detached(ids)
        if type(actor_id) is np.ndarray:
            actor_id = self._detached(actor_id)
        n, mover, epoch, owner = ids.size, self.mover, self.launched, self._thread
        if before_write is None:  # the slots' states are needed only if they differ
            self._thread = self._marks[event]  # the kernel checks, then writes: one unit from here
            got = mover.move(event, ids, actor_id, target, epoch, None, None, None, True, dup)
            if got == ASK_WITH_STATES:
                before, after = np.empty(n, dtype=np.uint8), np.empty(n, dtype=np.uint8)
                got = mover.move(event, ids, actor_id, target, epoch, before, after, None, True, dup)
        else:
            before, after = np.empty(n, dtype=np.uint8), np.empty(n, dtype=np.uint8)
            keys = np.empty(n, dtype=np.int64)
            got = mover.move(event, ids, actor_id, target, epoch, before, after, keys, False, dup)
            if got >= 0:
                before_write(Batch(ids, keys, before, after))
                self._thread = self._marks[event]  # the write's parts: one unit from here
                got = mover.move(event, ids, actor_id, target, epoch, before, after, keys, True, dup)
        if got < 0:  # refused: nothing was written
            self._thread = owner
            self._refuse(ids, event, actor, actor_id, target, got)
        if got == MIXED:
            moved = after
        else:  # one state before and one after for every slot
            moved, before = got & 0xFF, got >> 8
        # ids that were one run (the kernel says so): filed and recorded as their slice, not a copy
        at = mover.last_run if n > 1 else None
        self._settle(ids, moved, event, at)
        self.recorder.record(
            event, actor, target, epoch, ids.tobytes() if at is None else range(at.start, at.stop), before, moved
        )
        if not hold:
            self._thread = owner

    def _shares_memory(self, array: np.ndarray) -> bool:
        """Whether `array` lies in memory of this ledger's own (a view of one of its columns, its
        free ring or its scratch column, handed in as ids or actor ids)."""
        return any(np.may_share_memory(array, t.numpy()) for t in self.tensors.values())

    def _detached(self, array: np.ndarray) -> np.ndarray:
        """`array`, or a copy of it when it is a view of this ledger's own memory (moving the
        slots it names would change it while it is read). An array that owns its memory (what
        `alloc` returns) costs one attribute read."""
        return array.copy() if array.base is not None and self._shares_memory(array) else array

    def _refuse(self, ids: np.ndarray, event: Event, actor, actor_id, target: int, code: int) -> None:
        """Raise the vectorised path's typed error for a batch the kernel refused (`code`): the
        same checks, nothing written. Should the vectorised path find nothing wrong, the two
        disagree: that raises too, and still nothing is written."""
        ids = self._ids(ids, event, actor)  # not a slot, or named twice: BadSlotId
        batch = look_up(self.cols, self.tables[event], ids, actor_id)
        p = _first_illegal_position(batch.after)
        if p is not None:
            self._check_batch(batch, event, actor[p] if type(actor) is Actors else actor, target, first=p)
        position, why = refusal(code)
        raise RuntimeError(
            f"the compiled move refused {event.name} of slot {int(ids[position])} (why {why}) but the vectorised "
            "path allows it: the two disagree; nothing was written"
        )

    def _settle(self, ids: np.ndarray, after, event: Event, at: slice | None = None) -> None:
        """After a batch is written: the freed slots go to the free ring, the released ones
        are filed under the step their fence waits for (`after`: one state for all, or one
        per slot; `at`: their slice, if one run)."""
        frees = self.has_free_list and event is not _ALLOC
        if type(after) is int:  # uniform: every slot moved to `after`
            if after == _FREE:
                if frees:
                    self._push(ids, at)
            elif after in self._waits:
                self._note_released(ids, at=at)
        elif not isinstance(after, np.ndarray):  # one numpy code for all
            after = int(after)
            if frees and after == _FREE:
                self._push(ids, at)
            elif after in self._waits:
                self._note_released(ids, at=at)
        else:  # a mixed batch: find the freed and released slots
            codes = after.tobytes()
            if frees and _FREE_BYTE in codes:
                self._push(ids[after == _FREE])
            waiting = self._waits_mask[after]
            if np.count_nonzero(waiting):
                self._note_released(ids[waiting])
