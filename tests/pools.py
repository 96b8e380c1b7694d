"""Shared builders for pool tests: a small config, a populated pool, and `Frozen`, what a refused
call must leave as it was (every ledger column and counter, every state tensor)."""

import numpy as np
import torch

from slotwarden.model.vocabulary import Actor
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool

CFG = PoolConfig(num_slots=8, layers=2, conv_dims=(6, 3), conv_kernel=4, heads=2, head_dim=3, state_size=5)
R1, R2 = Actor.request(1), Actor.request(2)
S6 = Actor.session(6)


def dirty(pool: StatePool, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    for t in pool.tensors:
        t.copy_(torch.randn(t.shape, generator=g) + 3)  # never 0


def populated() -> StatePool:
    """Slots 1-3 RUNNING for request 1; 4 PARKED in session 5; 5 LENT by session 6 to request 7;
    6 RELEASED (waiting for step 1); 7, 8 FREE. State tensors full of non-zero noise."""
    pool = StatePool(CFG)
    pool.admit(pool.alloc(3, R1), R1)
    four = pool.alloc(1, R2)
    pool.admit(four, R2)
    pool.park(four, R2, 5)
    five = pool.alloc(1, Actor.request(3))
    pool.admit(five, Actor.request(3))
    pool.park(five, Actor.request(3), 6)
    pool.lend(five, S6, 7)
    six = pool.alloc(1, Actor.request(4))
    pool.admit(six, Actor.request(4))
    pool.launch(lambda: False)
    pool.finish(six, Actor.request(4))
    dirty(pool)
    return pool


class Frozen:
    """Everything a call could change: every ledger column and counter, every state tensor."""

    def __init__(self, pool: StatePool):
        self.pool = pool
        self.ledger = pool.ledger.snapshot()
        self.tensors = [t.clone() for t in pool.tensors]
        self.free = pool.ledger.free_list().copy()
        self.seq = pool.ledger.recorder.seq

    def unchanged(self) -> bool:
        now = self.pool.ledger.snapshot()
        assert now.keys() == self.ledger.keys()
        for k, v in self.ledger.items():
            assert (v == now[k]) if k == "counters" else torch.equal(v, now[k]), f"ledger {k} changed"
        for before, t in zip(self.tensors, self.pool.tensors):
            assert torch.equal(before, t), "state changed"
        assert np.array_equal(self.free, self.pool.ledger.free_list())
        assert self.seq == self.pool.ledger.recorder.seq, "a refused call was recorded"
        return True
