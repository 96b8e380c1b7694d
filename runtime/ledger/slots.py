"""The ledger's per-slot path: a batch of up to `SlotLedger.small` slots checked and written a
slot at a time, in Python over memoryviews of the ledger's columns, the compiled table read as
lists. Any batch it would refuse it leaves untouched (returns None or False): the vectorised
path then runs the same checks and raises the model's error."""

from __future__ import annotations

import numpy as np

from slotwarden.runtime.ledger.transition import (
    Batch,
    expand,
    look_up_slots,
    write_slots,
)
from slotwarden.model.table import ILLEGAL
from slotwarden.model.vocabulary import NOBODY, Actor, Event

from slotwarden.runtime.ledger.recorder import Actors
from slotwarden.runtime.ledger.codes import _ALLOC, _FENCE, _FREE, _ONE, _RELEASED
from slotwarden.runtime.ledger.ring import FreeRing


class SlotPath(FreeRing):
    """`SlotLedger`'s per-slot path (a mixin over `LedgerState` and its free ring)."""

    def _alloc_slots(self, n: int, actor: Actor | Actors, before_write) -> np.ndarray | None:
        """`alloc` a slot at a time (`actor`: one for all, or `Actors`, the i-th slot's owner
        the i-th); None (nothing done) if a check fails: the vectorised path then runs the
        same checks and raises."""
        each = type(actor) is Actors
        if not each and actor[0] is not self._alloc_kind:
            return None
        h, ring, state = self._head, self._ring_slots, self._slots.state
        if n == 1:  # one request's slot: the common case, without the loop
            s = ring[h]
            if state[s] != _FREE:  # the free list is the FREE set, or the ledger is corrupt
                return None
            lst, after = [s], [self._alloc_next]
            ids = (
                _ONE.copy()
            )  # the caller's to keep (and write into): a copy of a one-id template is the cheapest array
            ids[0] = s
        else:
            lst = ring[h : h + n].tolist()
            if len(lst) < n:  # the ring wraps
                lst += ring[: n - len(lst)].tolist()
            for s in lst:
                if state[s] != _FREE:
                    return None
            after = [self._alloc_next] * n
            ids = np.array(lst, dtype=np.int64)
        if before_write is not None:
            before_write(expand(Batch(ids, self._alloc_key, _FREE, self._alloc_next)))
        launched = self.launched
        who = list(actor.ids) if each else [actor[1]] * n
        owner, self._thread = self._thread, self._marks[_ALLOC]  # the write's parts: one unit
        write_slots(self._slots, self._alloc_list, lst, [self._alloc_key] * n, after, _ALLOC, who, NOBODY, launched)
        self.recorder.record(_ALLOC, actor, NOBODY, launched, lst, _FREE, after)  # fresh lists, never changed
        self._advance(n)
        self._thread = owner
        return ids

    def _apply_slots(self, ids: np.ndarray, event: Event, actor: Actor | Actors, target: int, before_write) -> bool:
        """`_apply` a slot at a time, for a batch of real, distinct ids (`actor`: one for the
        batch, or `Actors`, one per slot). False (nothing done) if a move is refused: the
        vectorised path then raises the model's error for it."""
        kind, needs_target = self._actor_ok[event]
        if (actor.kind if type(actor) is Actors else actor[0]) is not kind or (needs_target and target < 0):
            return False
        table = self._lists[event]
        lst = ids.tolist()
        who = list(actor.ids) if type(actor) is Actors else [actor[1]] * len(lst)
        keys, before, after = look_up_slots(self._slots, table, lst, who)
        if ILLEGAL in after:
            return False
        if before_write is not None:
            before_write(Batch(ids, np.array(keys), np.array(before, dtype=np.uint8), np.array(after, dtype=np.uint8)))
        launched = self.launched
        owner, self._thread = self._thread, self._marks[event]  # the write's parts: one unit
        write_slots(self._slots, table, lst, keys, after, event, who, target, launched)
        if len(lst) == 1:  # one slot: no loops
            self._settle_one(lst, after[0], event)
            self.recorder.record(event, actor, target, launched, lst, before, after)  # fresh lists, never changed
            self._thread = owner
            return True
        if _FREE in after and self.has_free_list and event is not _ALLOC:
            self._push_slots([s for s, a in zip(lst, after) if a == _FREE])
        if not self._waits.isdisjoint(after):
            fence, by_step, waits = self._slots.fence, {}, self._waits
            for s, a in zip(lst, after):
                if a in waits:
                    by_step.setdefault(fence[s], []).append(s)
            for f, released in by_step.items():
                self._waiting.setdefault(f, []).append(released)
        self.recorder.record(event, actor, target, launched, lst, before, after)  # fresh lists, never changed
        self._thread = owner
        return True

    def _settle_one(self, lst: list, a: int, event: Event) -> None:
        """After one slot (`lst`, a fresh one-id list) moved to `a`: to the free ring if FREE, or
        filed under its fence's step if it waits for one (`_settle` for one slot, inline)."""
        if a == _FREE:
            if self.has_free_list and event is not _ALLOC:  # `_push_slots` inline, for one slot
                count, cap = self._count, self.capacity
                if count >= cap:  # cannot happen while the lifecycle holds
                    raise RuntimeError(f"free list overflow: {count} + 1 > {cap}")
                tail = self._head + count
                self._ring_slots[tail if tail < cap else tail - cap] = lst[0]
                self._count = count + 1
        elif a in self._waits:
            self._waiting.setdefault(self._slots.fence[lst[0]], []).append(lst)

    def _fence_released_slots(self, due: np.ndarray, actor: Actor, before_write) -> np.ndarray:
        """`_fence_released` a slot at a time (the key and next state are the same for all)."""
        key, after = self._released_key
        lst, n, launched = due.tolist(), due.size, self.launched
        if before_write is not None:
            before_write(expand(Batch(due, key, _RELEASED, after)))
        afters = [after] * n
        owner, self._thread = self._thread, self._marks[_FENCE]  # the write's parts: one unit
        write_slots(self._slots, self._lists[_FENCE], lst, [key] * n, afters, _FENCE, [actor[1]] * n, NOBODY, launched)
        if after == _FREE and self.has_free_list:
            self._push_slots(lst)
        self.recorder.record(_FENCE, actor, NOBODY, launched, lst, _RELEASED, afters)  # fresh lists, never changed
        self._thread = owner
        return due if after == _FREE else due[:0]
