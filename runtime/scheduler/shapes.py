"""The pool a TinyMamba layer needs, and the check that a pool fits one.

The layer reads and writes its state by slot index in the pool's tensors, so the pool must have
exactly the layer's shapes and dtype: one conv state `[layers, slots + 1, conv_dim, conv_kernel
- 1]` and the SSM state `[layers, slots + 1, heads, head_dim, dstate]`, both in the layer's
dtype. `Scheduler` checks this when it is built, so a mismatch never reaches a step.
"""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError
import torch

from slotwarden.runtime.config import PoolConfig


class PoolMismatch(SlotwardenError, ValueError):
    """A pool whose state does not have the layer's shapes or dtype; the message names every
    field that differs, with the pool's value and the layer's (`fields` holds their names)."""

    def __init__(self, differences: list[tuple[str, object, object]]):
        self.differences = list(differences)
        self.fields = tuple(name for name, _, _ in differences)
        lines = [f"  {name}: the pool has {mine!r}, the layer needs {theirs!r}" for name, mine, theirs in differences]
        super().__init__("the pool does not fit the layer:\n" + "\n".join(lines))

    def __reduce__(self):  # pickle's default would call it with the text alone
        return (PoolMismatch, (self.differences,))


def layer_config(model):
    """The `TinyMambaConfig` of `model` (a TinyMamba, or anything with such a `config`), or
    `model` itself when it is one."""
    return model.config if hasattr(model, "config") else model


def pool_config(model, slots: int, *, device: str | torch.device = "cpu") -> PoolConfig:
    """The `PoolConfig` of `slots` slots whose state has exactly `model`'s shapes and dtype."""
    mc = layer_config(model)
    return PoolConfig(
        num_slots=slots,
        layers=mc.layers,
        conv_dims=(mc.conv_dim,),
        conv_kernel=mc.conv_kernel,
        heads=mc.heads,
        head_dim=mc.head_dim,
        state_size=mc.dstate,
        conv_dtype=mc.dtype,
        ssm_dtype=mc.dtype,
        device=device,
    )


def check_fits(config: PoolConfig, model) -> None:
    """Raise `PoolMismatch` unless a pool of `config` has `model`'s shapes and dtype (the
    number of slots and the device are the pool's own choice)."""
    needed = pool_config(model, config.num_slots, device=config.device)
    differences = [
        (name, getattr(config, name), getattr(needed, name))
        for name in ("layers", "conv_dims", "conv_kernel", "heads", "head_dim", "state_size", "conv_dtype", "ssm_dtype")
        if getattr(config, name) != getattr(needed, name)
    ]
    if differences:
        raise PoolMismatch(differences)
