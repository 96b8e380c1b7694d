"""The ledger's queries: what a slot holds, who holds what, the free list, the counts per group,
and the per-state facts of the compiled declaration that a caller reads to judge a slot itself
(`owner_kinds`, `lent`). None of them changes anything; each starts with the thread check."""

from __future__ import annotations

import numpy as np

from slotwarden.model.vocabulary import Actor, ActorKind, Group, Slot, State

from slotwarden.runtime import inputs
from slotwarden.runtime.ledger.checks import Checks
from slotwarden.runtime.ledger.transition import Columns


class Queries(Checks):
    """`SlotLedger`'s queries (a mixin over `LedgerState`, its ids checked by `Checks`)."""

    def available(self) -> int:
        """How many slots `alloc` can hand out now."""
        self.check_thread()
        return self._count

    def state_of(self, ids) -> np.ndarray:
        """The state code of each slot of `ids` (checked: real, each named once; may be empty)."""
        self.check_thread()
        ids = self._ids(ids, "state_of", None, allow_empty=True)
        return self.cols.state[ids].copy()

    def record(self, slot: int) -> Slot:
        """Slot `slot`'s record: state, owner, borrower, fence, lock count."""
        self.check_thread()
        return self._record(inputs.slot(slot, self.capacity, "record"))

    def held_by(self, actor: Actor) -> np.ndarray:
        """The slot ids `actor` owns or borrows, in id order."""
        self.check_thread()
        actor = inputs.actor(actor)
        c = self.cols
        owns = (c.owner == actor.id) & (self._owner_kind[c.state] == int(actor.kind))
        if actor.kind is ActorKind.REQUEST:
            owns |= (c.borrower == actor.id) & self._lent[c.state]
        owns[0] = False
        return np.flatnonzero(owns)

    def free_list(self) -> np.ndarray:
        """The free list, head first (what the next allocs will take, in order)."""
        self.check_thread()
        pos = (self._head + np.arange(self._count)) % self.capacity
        return self._ring[pos].astype(np.int64)

    def counts(self) -> dict:
        """Slots per group, read from the state column (a corrupt state counts in no group)."""
        self.check_thread()
        per_state = np.bincount(self.cols.state[1:], minlength=len(State))[: len(State)]
        per_group = np.bincount(self._group, weights=per_state, minlength=len(Group))
        return {g: int(per_group[g]) for g in Group}

    def awaits_fence(self) -> bool:
        """Whether some slot waits for a fence: released (free at the fence of a step that may
        still use it) or cached and not yet published. Read from the per-step lists of what
        waits, not a scan of the columns; no thread check (one dict read)."""
        return bool(self._waiting)

    @property
    def views(self) -> Columns:
        """The columns as memoryviews over the same memory as `cols`: read a slot at a time with
        plain Python ints (cheaper than a numpy scalar). For reading; writing one bypasses
        every check, the free list and the flight recorder."""
        return self._slots

    @property
    def owner_kinds(self) -> np.ndarray:
        """Per state code, the `ActorKind` that owns a slot in that state (`NO_KIND`: nobody), as
        the declaration says (a read-only uint8 array)."""
        return self._owner_kind

    @property
    def lent(self) -> np.ndarray:
        """Per state code, whether a slot in that state is lent to a borrower, as the declaration
        says (a read-only bool array)."""
        return self._lent
