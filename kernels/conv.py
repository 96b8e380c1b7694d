"""One decode step of the causal depthwise conv1d over a pool of slots."""

from __future__ import annotations

import torch

from slotwarden.kernels.invariant import silu, tree_sum


def conv_update(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    slots: torch.Tensor,
    pad_slot: int = 0,
) -> torch.Tensor:
    """Advance the conv windows of ``slots`` by one input column and return the output.

    Shapes: x [batch, dim]; conv_state [num_slots + 1, dim, k - 1] (one layer's
    view of the pool); weight [dim, k]; bias [dim] or None; slots [batch] int64.

    For each row b with s = slots[b]: window = cat(conv_state[s], x[b]) along
    the last axis; conv_state[s] <- window[:, 1:] (in place, shifted left by one);
    y[b] = silu(sum_k window[:, k] * weight[:, k] + bias). Returns y [batch, dim].

    Pad convention: rows with slots[b] == pad_slot are padding. They are
    computed like any row, write their window into slot ``pad_slot`` (several
    pad rows may race there; that slot's content is garbage by contract), and
    their output row is zero. Real (non-pad) slots in one call must be
    distinct; slots not named in ``slots`` are never written.

    Each row's result is bitwise independent of the batch it is in. No
    host-device sync.
    """
    batch, dim = x.shape
    k = weight.shape[-1]
    if conv_state.shape[1:] != (dim, k - 1) or weight.shape != (dim, k):
        raise ValueError(
            f"shape mismatch: x {tuple(x.shape)}, conv_state {tuple(conv_state.shape)}, weight {tuple(weight.shape)}"
        )
    if slots.shape != (batch,):
        raise ValueError(f"slots must be [{batch}], got {tuple(slots.shape)}")
    window = torch.cat([conv_state[slots], x.unsqueeze(-1)], dim=-1)
    conv_state.index_copy_(0, slots, window[:, :, 1:])
    out = tree_sum(window * weight, dim=-1)
    if bias is not None:
        out = out + bias
    y = silu(out)
    return torch.where((slots == pad_slot).unsqueeze(-1), torch.zeros_like(y), y)
