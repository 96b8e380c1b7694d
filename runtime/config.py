"""The shape of a pool of recurrent-state slots, validated at construction."""

from __future__ import annotations

from slotwarden.model.errors import cut, shown

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class PoolConfig:
    """One hybrid model's recurrent state per slot, and how many slots.

    conv state: one tensor per entry of `conv_dims`, each `[layers, slots + 1, dim, conv_kernel - 1]`;
    SSM state: `[layers, slots + 1, heads, head_dim, state_size]`. Slot 0 is the pad slot.
    Defaults follow engines: conv state in bf16, SSM state in fp32.
    """

    num_slots: int
    layers: int
    conv_dims: tuple = (256,)
    conv_kernel: int = 4
    heads: int = 8
    head_dim: int = 64
    state_size: int = 128
    conv_dtype: torch.dtype = torch.bfloat16
    ssm_dtype: torch.dtype = torch.float32
    device: str | torch.device = field(default="cpu")

    def __post_init__(self):
        for name in ("num_slots", "layers", "conv_kernel", "heads", "head_dim", "state_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PoolConfig.{name} must be a positive int, not {shown(value)}")
        if self.conv_kernel < 2:
            raise ValueError(
                "PoolConfig.conv_kernel must be at least 2 (the window keeps kernel - 1 columns), "
                f"not {self.conv_kernel}"
            )
        if (
            not isinstance(self.conv_dims, tuple)
            or not self.conv_dims
            or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in self.conv_dims)
        ):
            raise ValueError(
                f"PoolConfig.conv_dims must be a non-empty tuple of positive ints, not {shown(self.conv_dims)}"
            )
        for name in ("conv_dtype", "ssm_dtype"):
            dtype = getattr(self, name)
            if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
                raise ValueError(f"PoolConfig.{name} must be a floating torch dtype, not {shown(dtype)}")
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError) as e:  # torch raises these for a malformed device
            raise ValueError(
                f"PoolConfig.device must name a torch device, not {shown(self.device)} ({cut(str(e), 80)})"
            ) from None

    def conv_shapes(self) -> list[tuple]:
        return [(self.layers, self.num_slots + 1, d, self.conv_kernel - 1) for d in self.conv_dims]

    def ssm_shape(self) -> tuple:
        return (self.layers, self.num_slots + 1, self.heads, self.head_dim, self.state_size)

    def bytes_per_slot(self) -> int:
        """State bytes one slot takes (all layers, conv and SSM); the ledger adds 30 bytes."""
        conv = sum(self.layers * d * (self.conv_kernel - 1) for d in self.conv_dims) * _size(self.conv_dtype)
        ssm = self.layers * self.heads * self.head_dim * self.state_size * _size(self.ssm_dtype)
        return conv + ssm

    @classmethod
    def fit(cls, budget_bytes: int, **shape) -> "PoolConfig":
        """The config with as many slots as `budget_bytes` holds (the pad slot included)."""
        probe = cls(num_slots=1, **shape)
        slots = budget_bytes // probe.bytes_per_slot() - 1
        if slots < 1:
            raise ValueError(
                f"a budget of {budget_bytes} bytes holds no slot besides the pad slot "
                f"({probe.bytes_per_slot()} bytes a slot)"
            )
        return cls(num_slots=int(slots), **shape)


def _size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
