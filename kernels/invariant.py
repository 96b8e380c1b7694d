"""Batch-invariant primitives: a row's result never depends on the other rows.

The kernels promise that a request's output and state are bitwise the same
whether it runs alone or inside any batch, at any row position. Library
reductions (``sum``, ``matmul``) and several CPU activations (``silu``,
``softplus``, ``log1p``) do not promise that: BLAS and CUDA reductions pick
their summation order from the shape, and CPU elementwise kernels run the tail
of a buffer through a scalar path that can differ from the vector path in the
last bit. These helpers are built only from IEEE-exact operations (add, mul,
div, compare, select) plus ``exp`` and ``log``, which are evaluated the same
way at every position, and reduce in a fixed order set by the reduced length
alone. No helper makes a host-device sync.
"""

from __future__ import annotations

import torch


def tree_sum(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sum ``t`` over ``dim`` by pairwise halving; ``dim`` is removed.

    The order of additions depends only on ``t.shape[dim]``, so each output
    element is bitwise independent of the sizes of the other dimensions.
    """
    dim = dim % t.dim()
    if t.shape[dim] == 0:
        return t.sum(dim)
    while t.shape[dim] > 1:
        n = t.shape[dim]
        half = n // 2
        head = t.narrow(dim, 0, half) + t.narrow(dim, half, half)
        t = head if n % 2 == 0 else torch.cat([head, t.narrow(dim, n - 1, 1)], dim)
    return t.squeeze(dim)


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight`` with a fixed summation order: x [batch, n], weight [n, m] -> [batch, m]."""
    return tree_sum(x.unsqueeze(-1) * weight, dim=-2)


def silu(x: torch.Tensor) -> torch.Tensor:
    """``x * sigmoid(x)`` computed as ``x / (1 + exp(-x))``."""
    return x / (1 + torch.exp(-x))


def softplus(x: torch.Tensor) -> torch.Tensor:
    """``log(1 + exp(x))`` computed as ``max(x, 0) + log1p(exp(-|x|))``.

    ``log1p(e)`` is evaluated as ``log(u) * e / (u - 1)`` with ``u = 1 + e``
    (exact ``e`` where ``u == 1``), accurate to a few ulps. Unlike
    ``torch.nn.functional.softplus`` there is no linear cut-off above 20.
    """
    e = torch.exp(-x.abs())
    u = 1 + e
    log1p_e = torch.where(u == 1, e, torch.log(u) * (e / (u - 1)))
    return torch.clamp(x, min=0) + log1p_e
