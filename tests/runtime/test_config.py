"""PoolConfig: shapes, dtypes, validation with clear messages, bytes per slot, fit to a budget."""

import pytest
import torch

from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool

SMALL = dict(layers=3, conv_dims=(6, 2), conv_kernel=4, heads=2, head_dim=3, state_size=5)


def test_defaults_follow_engines():
    c = PoolConfig(num_slots=4, layers=2)
    assert c.conv_dtype is torch.bfloat16
    assert c.ssm_dtype is torch.float32
    assert c.conv_shapes() == [(2, 5, 256, 3)]
    assert c.ssm_shape() == (2, 5, 8, 64, 128)
    assert torch.device(c.device).type == "cpu"


def test_shapes_have_a_pad_slot_and_one_conv_tensor_per_dim():
    c = PoolConfig(num_slots=7, **SMALL)
    assert c.conv_shapes() == [(3, 8, 6, 3), (3, 8, 2, 3)]
    assert c.ssm_shape() == (3, 8, 2, 3, 5)


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_slots", 0),
        ("num_slots", -1),
        ("num_slots", 2.0),
        ("num_slots", True),
        ("num_slots", "4"),
        ("layers", 0),
        ("conv_kernel", 0),
        ("heads", -2),
        ("head_dim", 1.5),
        ("state_size", None),
    ],
)
def test_bad_sizes_raise_value_error_naming_the_field(field, value):
    args = dict(num_slots=4, **SMALL)
    args[field] = value
    with pytest.raises(ValueError, match=rf"PoolConfig\.{field} must be a positive int, not {value!r}"):
        PoolConfig(**args)


def test_a_conv_kernel_of_one_keeps_no_window():
    with pytest.raises(ValueError, match=r"PoolConfig\.conv_kernel must be at least 2.*not 1"):
        PoolConfig(num_slots=4, **{**SMALL, "conv_kernel": 1})


@pytest.mark.parametrize("dims", [(), [6, 2], (0,), (6, -1), (True,), (2.0,), 6])
def test_bad_conv_dims_raise(dims):
    with pytest.raises(ValueError, match=r"PoolConfig\.conv_dims must be a non-empty tuple of positive ints"):
        PoolConfig(num_slots=4, **{**SMALL, "conv_dims": dims})


@pytest.mark.parametrize("field", ["conv_dtype", "ssm_dtype"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.complex64, "bfloat16", float])
def test_bad_dtypes_raise(field, dtype):
    with pytest.raises(ValueError, match=rf"PoolConfig\.{field} must be a floating torch dtype"):
        PoolConfig(num_slots=4, **SMALL, **{field: dtype})


@pytest.mark.parametrize("device", ["nonsense", None, "cpu:x"])
def test_bad_device_raises_value_error(device):
    with pytest.raises(ValueError, match=r"PoolConfig\.device must name a torch device"):
        PoolConfig(num_slots=4, **SMALL, device=device)


def test_bytes_per_slot_by_hand():
    c = PoolConfig(num_slots=4, **SMALL)
    conv = 3 * (6 + 2) * 3 * 2  # layers * sum(dims) * (kernel - 1) * bf16
    ssm = 3 * 2 * 3 * 5 * 4  # layers * heads * head_dim * state * fp32
    assert c.bytes_per_slot() == conv + ssm
    wide = PoolConfig(num_slots=4, **SMALL, conv_dtype=torch.float32, ssm_dtype=torch.float16)
    assert wide.bytes_per_slot() == conv * 2 + ssm // 2


def test_bytes_per_slot_is_what_the_pool_allocates_per_slot():
    c = PoolConfig(num_slots=5, **SMALL)
    pool = StatePool(c)
    per_slot = sum(t[:, 0].numel() * t.element_size() for t in pool.tensors)
    assert per_slot == c.bytes_per_slot()
    total = sum(t.numel() * t.element_size() for t in pool.tensors)
    assert total == (c.num_slots + 1) * c.bytes_per_slot()


@pytest.mark.parametrize("extra", [0, 1, 977])
@pytest.mark.parametrize("slots", [1, 2, 50])
def test_fit_takes_as_many_slots_as_the_budget_holds_pad_included(slots, extra):
    per = PoolConfig(num_slots=1, **SMALL).bytes_per_slot()
    budget = (slots + 1) * per + min(extra, per - 1)
    c = PoolConfig.fit(budget, **SMALL)
    assert c.num_slots == slots
    assert (c.num_slots + 1) * c.bytes_per_slot() <= budget < (c.num_slots + 2) * c.bytes_per_slot()
    assert (c.layers, c.conv_dims, c.heads, c.head_dim, c.state_size) == (3, (6, 2), 2, 3, 5)


def test_fit_keeps_dtypes_and_counts_them():
    c32 = PoolConfig.fit(1 << 20, **SMALL, conv_dtype=torch.float32)
    c16 = PoolConfig.fit(1 << 20, **SMALL)
    assert c32.conv_dtype is torch.float32
    assert c32.num_slots < c16.num_slots


@pytest.mark.parametrize("budget", [0, -5, 1, None])
def test_fit_refuses_a_budget_with_no_room_beside_the_pad_slot(budget):
    per = PoolConfig(num_slots=1, **SMALL).bytes_per_slot()
    budget = 2 * per - 1 if budget is None else budget
    with pytest.raises(ValueError, match=r"holds no slot besides the pad slot .*bytes a slot"):
        PoolConfig.fit(budget, **SMALL)


def test_fit_validates_the_shape():
    with pytest.raises(ValueError, match=r"PoolConfig\.heads"):
        PoolConfig.fit(1 << 20, **{**SMALL, "heads": 0})


def test_config_is_frozen():
    c = PoolConfig(num_slots=4, **SMALL)
    with pytest.raises(Exception):
        c.num_slots = 5
