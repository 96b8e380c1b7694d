"""The pools the pool machine drives: what it needs of one (`PoolUnderTest`), and the library's
`StatePool` behind that interface (`StatePoolUnderTest`). A pool that holds state also copies,
forks, zeroes and fills, and the machine then checks data movement too."""

from __future__ import annotations

from typing import Protocol

import torch

from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.scheduler.shapes import pool_config
from slotwarden.verification.machines.shared import MODEL


class PoolUnderTest(Protocol):
    """What the pool machine drives. `records()` gives slot ids 1..capacity as model `Slot`s;
    `free_list()` the hand-out order, or None if the implementation does not expose one."""

    capacity: int

    def alloc(self, n: int, actor: Actor): ...

    def fire(self, event: Event, ids, actor: Actor, target: int = NOBODY): ...

    def launch(self) -> int: ...

    def fence(self, step: int): ...

    def records(self) -> tuple: ...

    def free_list(self) -> tuple | None: ...

    # optional, for pools that hold state: the machine checks data movement when present
    # copy(src, dst, actor), zero(ids, actor), fork(src, actor) -> tuple of ids or None,
    # fill(slot, value) (a step writes the slot), values() -> per slot id 1..capacity, the value
    # every element of its state holds (NaN if they differ)


class StatePoolUnderTest:
    reads_cached = names_lockers = hasattr(StatePool, "lock")
    """Whether the pool copies (and forks) from a published cached slot the copying request
    holds a lock on (copy-on-write from the prefix cache; without it an actor reads only the
    slots it holds, never another request's or session's), and keeps who holds each lock (so
    it refuses a second lock by the same request)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.pool = StatePool(pool_config(MODEL, capacity))

    def alloc(self, n, actor):
        ids = self.pool.alloc(n, actor)
        return None if ids is None else tuple(ids.tolist())

    def fire(self, event, ids, actor, target=NOBODY):
        lock_op = getattr(self.pool, _LOCK_OPS.get(event, ""), None)  # a pool that names who locks
        if lock_op is not None:
            lock_op(ids, actor)
        else:
            self.pool.fire(event, ids, actor, target)

    def launch(self):
        return self.pool.launch()

    def fence(self, step):
        self.pool.fence(step)

    def records(self):
        return tuple(self.pool.ledger.record(i) for i in range(1, self.capacity + 1))

    def free_list(self):
        return tuple(self.pool.ledger.free_list().tolist())

    def copy(self, src, dst, actor):
        self.pool.copy(list(src), list(dst), actor)

    def zero(self, ids, actor):
        self.pool.zero(list(ids), actor)

    def fork(self, src, actor):
        ids = self.pool.fork(src, actor)
        return None if ids is None else tuple(ids.tolist())

    def fill(self, slot, value):
        for t in self.pool.tensors:
            t[:, slot] = value

    def values(self):
        """Per slot id 1..capacity, the value every element of its state holds (NaN if they differ)."""
        rows = torch.cat([t.transpose(0, 1).reshape(t.shape[1], -1) for t in self.pool.tensors], dim=1)[1:]
        uniform = (rows == rows[:, :1]).all(dim=1)
        return tuple(torch.where(uniform, rows[:, 0], torch.nan).tolist())


_LOCK_OPS = {Event.LOCK: "lock", Event.UNLOCK: "unlock"}
"""The pool operations that keep the lock record, where the pool has them (`fire` only counts)."""
