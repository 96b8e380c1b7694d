"""`GuardMachine`: the pool machine against an engine's own allocator (FIFO like SGLang's)
behind `LedgerGuard` (`GuardUnderTest`), which holds no state: bookkeeping only."""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY
from slotwarden.runtime.free_list import FreeList as TensorFreeList
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.verification.machines.pool import PoolMachine


class GuardUnderTest:
    """An engine's own allocator (FIFO like SGLang's) behind `LedgerGuard`."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.engine = TensorFreeList(capacity)
        self.guard = LedgerGuard(self.engine, capacity)

    def alloc(self, n, actor):
        ids = self.guard.alloc(n, actor)
        return None if ids is None else tuple(ids.tolist())

    def fire(self, event, ids, actor, target=NOBODY):
        self.guard.fire(event, ids, actor, target)

    def launch(self):
        return self.guard.launch()

    def fence(self, step):
        self.guard.fence(step)

    def records(self):
        return tuple(self.guard.ledger.record(i) for i in range(1, self.capacity + 1))

    def free_list(self):
        return tuple(self.engine.free_slots.tolist())


class GuardMachine(PoolMachine):
    under_test = GuardUnderTest
