"""Shared engine allocators for guard tests: the in-repo tensor free list of SGLang's
`MambaSlotAllocator` shape, SGLang's own where installed (`ENGINES`, a pytest parameter list),
and `Untouched`, what a refused guard call must leave as it was."""

import pytest
import torch

from slotwarden.bench.pool import load_sglang_allocator
from slotwarden.runtime.free_list import FreeList as TensorFreeList
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.trace_examples import FreeList  # SGLang's allocator's shape, in the repository

SGLANG = load_sglang_allocator()

ENGINES = [
    pytest.param(FreeList, id="in-repo"),
    pytest.param(
        SGLANG,
        id="sglang",
        marks=pytest.mark.skipif(SGLANG is None, reason="sglang not installed (pip install --no-deps sglang==0.5.23)"),
    ),
]


class Untouched:
    def __init__(self, engine: TensorFreeList, guard: LedgerGuard):
        self.engine, self.guard = engine, guard
        self.free = engine.free_slots.clone()
        self.ledger = guard.ledger.snapshot()

    def check(self) -> None:
        assert torch.equal(self.engine.free_slots, self.free), "the engine's free list changed"
        now = self.guard.ledger.snapshot()
        for k, v in self.ledger.items():
            assert (v == now[k]) if k == "counters" else torch.equal(v, now[k]), f"ledger {k} changed"
