"""`FreeList`: an engine's slot allocator of SGLang's `MambaSlotAllocator` shape, with no checks.

A tensor free list of slots 1..size (0 is the pad slot), sliced by `alloc`, extended by `free`.
It owns nothing and refuses nothing: it is the unguarded engine that `LedgerGuard` and
`GuardedAllocator` wrap in the tests, the verification machines and the trace examples.
"""

from __future__ import annotations

import torch


class FreeList:
    def __init__(self, size: int, device: str = "cpu"):
        self.size, self.device = size, device
        self.clear()

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, need_size: int):
        if need_size > len(self.free_slots):
            return None
        select_index = self.free_slots[:need_size]
        self.free_slots = self.free_slots[need_size:]
        return select_index

    def free(self, free_index: torch.Tensor) -> None:
        if free_index.numel() == 0:
            return
        self.free_slots = torch.cat((self.free_slots, free_index))

    def clear(self) -> None:
        self.free_slots = torch.arange(1, self.size + 1, dtype=torch.int64, device=self.device)
