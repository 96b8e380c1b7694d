"""One decode step of the Mamba-2 selective state-space update over a pool of slots."""

from __future__ import annotations

import torch

from slotwarden.kernels.invariant import softplus, tree_sum


def selective_state_update(
    state: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    dt_bias: torch.Tensor,
    slots: torch.Tensor,
    pad_slot: int = 0,
) -> torch.Tensor:
    """Advance the SSM states of ``slots`` by one token and return the output.

    Shapes: state [num_slots + 1, heads, head_dim, dstate] (one layer's view of
    the pool); x [batch, heads, head_dim]; dt [batch, heads]; A [heads]
    (negative); B, C [batch, dstate]; D [heads]; dt_bias [heads]; slots [batch]
    int64.

    For each row b with s = slots[b], per head:
        dt' = softplus(dt[b] + dt_bias)
        h   = exp(dt' * A) * state[s] + (dt' * x[b]) outer B[b]
        y[b] = h @ C[b] + D * x[b]
    and state[s] <- h (in place). Returns y [batch, heads, head_dim].

    Pad convention: rows with slots[b] == pad_slot are padding. They are
    computed like any row, write into slot ``pad_slot`` (several pad rows may
    race there; that slot's content is garbage by contract), and their output
    row is zero. Real (non-pad) slots in one call must be distinct; slots not
    named in ``slots`` are never written.

    Each row's result is bitwise independent of the batch it is in. No
    host-device sync.
    """
    batch, heads, head_dim = x.shape
    dstate = B.shape[-1]
    if state.shape[1:] != (heads, head_dim, dstate):
        raise ValueError(f"shape mismatch: state {tuple(state.shape)}, x {tuple(x.shape)}, B {tuple(B.shape)}")
    if dt.shape != (batch, heads) or C.shape != (batch, dstate) or B.shape != (batch, dstate):
        raise ValueError(f"dt/B/C shapes {tuple(dt.shape)}, {tuple(B.shape)}, {tuple(C.shape)}")
    if slots.shape != (batch,):
        raise ValueError(f"slots must be [{batch}], got {tuple(slots.shape)}")
    dt = softplus(dt + dt_bias)
    decay = torch.exp(dt * A)[:, :, None, None]
    h = decay * state[slots] + (dt[:, :, None] * x)[..., None] * B[:, None, None, :]
    state.index_copy_(0, slots, h)
    y = tree_sum(h * C[:, None, None, :], dim=-1) + D[:, None] * x
    return torch.where((slots == pad_slot)[:, None, None], torch.zeros_like(y), y)
