"""Batched slot data movement: zero, copy. Each is one indexed tensor op per state tensor.

`ids`/`src`/`dst` are int64 tensors on the state's device; on CUDA the ops are enqueued on
the current stream with no host sync (host ids reach the device through `to_device`).
"""

from __future__ import annotations

from typing import Sequence

import torch


def to_device(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`host` on `device` without a sync: on CUDA a host tensor is first copied into pinned
    memory (PyTorch's caching host allocator), so that the copy to the device is truly
    asynchronous (from pageable memory it would be staged while the host waits)."""
    device = torch.device(device)
    if device.type != "cuda" or host.device.type != "cpu":
        return host.to(device, non_blocking=True)
    return host.pin_memory().to(device, non_blocking=True)


def zero_slots(tensors: Sequence[torch.Tensor], ids: torch.Tensor) -> None:
    """state[:, ids] = 0 for every `[layers, slots + 1, ...]` tensor."""
    for t in tensors:
        t.index_fill_(1, ids, 0)


def copy_slots(tensors: Sequence[torch.Tensor], src: torch.Tensor, dst: torch.Tensor) -> None:
    """state[:, dst] = state[:, src] for every state tensor (src and dst must not overlap)."""
    for t in tensors:
        t.index_copy_(1, dst, t.index_select(1, src))
