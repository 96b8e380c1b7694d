"""The free ring: the FREE slots in the order `alloc` takes them, `_count` of them from `_head`,
wrapping at the capacity. Allocs take from the head, frees go to the tail; a pass round the end
turns the ring so that the next allocs are one contiguous slice again. `plant` sets a slot's
record by hand, the ring following it (for a harness that starts from a given record)."""

from __future__ import annotations

import numpy as np

from slotwarden.model.vocabulary import Slot, State

from slotwarden.runtime import inputs
from slotwarden.runtime.ledger.state import LedgerState


class FreeRing(LedgerState):
    """The ledger's free ring (a mixin over `LedgerState`)."""

    def _advance(self, n: int) -> None:
        """The free ring's head moves past `n` slots just handed out. When they wrapped round
        its end, the ring is turned (its order kept) so that the head is at its start again:
        the next allocs are contiguous slices, not two pieces joined (one copy of the ring per
        pass round it)."""
        h, cap = self._head + n, self.capacity
        self._count -= n
        if h < cap:
            self._head = h
        elif h == cap:
            self._head = 0
        else:  # wrapped: turn the ring
            self._ring[:] = np.roll(self._ring, cap - h)
            self._head = 0

    def _peek(self, n: int) -> np.ndarray:
        """The next `n` slots the ring hands out (it does not move), as an int64 array."""
        h = self._head
        if h + n <= self.capacity:
            return self._ring[h : h + n].astype(np.int64)
        return np.concatenate((self._ring[h:], self._ring[: h + n - self.capacity])).astype(np.int64)

    def _push(self, ids: np.ndarray, at: slice | None = None) -> None:
        """Put `ids` at the tail of the free ring (`at`: their slice, if one run: copied as the
        run it is, int32 to int32)."""
        if at is not None:
            ids = np.arange(at.start, at.stop, dtype=np.int32)
        n, count, cap = ids.size, self._count, self.capacity
        if count + n > cap:  # cannot happen while the lifecycle holds
            raise RuntimeError(f"free list overflow: {count} + {n} > {cap}")
        tail = self._head + count
        if tail >= cap:
            tail -= cap
        if tail + n <= cap:
            self._ring[tail : tail + n] = ids
        else:  # the ring wraps
            first = cap - tail
            self._ring[tail:] = ids[:first]
            self._ring[: n - first] = ids[first:]
        self._count = count + n

    def _push_slots(self, freed: list) -> None:
        """`_push` for a short list of plain ints (the per-slot path)."""
        count, cap = self._count, self.capacity
        if count + len(freed) > cap:  # cannot happen while the lifecycle holds
            raise RuntimeError(f"free list overflow: {count} + {len(freed)} > {cap}")
        ring, tail = self._ring_slots, self._head + count
        if len(freed) == 1:
            ring[tail if tail < cap else tail - cap] = freed[0]
            self._count = count + 1
            return
        for s in freed:
            ring[tail if tail < cap else tail - cap] = s
            tail += 1
        self._count = count + len(freed)

    def plant(self, slot: int, record: Slot) -> None:
        """Set `slot`'s record (state, owner, borrower, fence, lock count) by hand, for a harness
        that starts a ledger from a given record: not a lifecycle move, so nothing is checked or
        recorded (the audit judges the result). The free ring follows: the slot is on it exactly
        when planted FREE (at its tail, if it was not on it already)."""
        self.check_thread()
        slot = inputs.slot(slot, self.capacity, "plant")
        c = self.cols
        c.state[slot], c.owner[slot], c.borrower[slot] = int(record.state), record.owner, record.borrower
        c.fence[slot], c.readers[slot] = record.fence, record.readers
        if self.has_free_list:
            free = self._ring[(self._head + np.arange(self._count)) % self.capacity]
            kept = free[free != slot]
            if record.state is State.FREE:
                kept = free if kept.size < free.size else np.append(kept, np.int32(slot))
            self._ring[: kept.size] = kept
            self._head, self._count = 0, int(kept.size)
