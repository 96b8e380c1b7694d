"""Behaviour of the slot-pool Mamba kernels and TinyMamba: references, pad slot, bitwise consistency."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from slotwarden.kernels import TinyMamba, TinyMambaConfig, conv_update, selective_state_update
from slotwarden.kernels.invariant import linear, silu, softplus, tree_sum

F64 = torch.float64
MODEL = TinyMamba(TinyMambaConfig())
NUM_SLOTS = 6
FAST = settings(max_examples=25, deadline=None, derandomize=True)


def randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=F64) * scale


def naive_conv(x, conv_state, weight, bias, slots):
    """Per-row reference; returns (y, new conv_state)."""
    state = conv_state.clone()
    ys = []
    for b, s in enumerate(slots.tolist()):
        window = torch.cat([conv_state[s], x[b].unsqueeze(-1)], dim=-1)
        state[s] = window[:, 1:]
        ys.append(F.silu((window * weight).sum(-1) + bias))
    return torch.stack(ys), state


def naive_ssm(state, x, dt, A, B, C, D, dt_bias, slots):
    """Per-row, per-head reference; returns (y, new state)."""
    new = state.clone()
    ys = torch.empty_like(x)
    for b, s in enumerate(slots.tolist()):
        for h in range(x.shape[1]):
            d = F.softplus(dt[b, h] + dt_bias[h])
            hs = torch.exp(d * A[h]) * state[s, h] + d * torch.outer(x[b, h], B[b])
            new[s, h] = hs
            ys[b, h] = hs @ C[b] + D[h] * x[b, h]
    return ys, new


def same_real_slots(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> bool:
    """Pools equal bitwise on every slot but the pad slot 0 (whose content is garbage by contract)."""
    return all(torch.equal(x[:, 1:], y[:, 1:]) for x, y in zip(a, b))


def real_rows(slots: torch.Tensor, pad: int = 0) -> list[int]:
    return [b for b, s in enumerate(slots.tolist()) if s != pad]


# --- kernels against references -------------------------------------------------------------


def test_conv_update_matches_reference_and_respects_pad():
    g = torch.Generator().manual_seed(1)
    batch, dim, k = 5, 6, 4
    slots = torch.tensor([3, 0, 1, 0, 5])
    x = randn(g, batch, dim)
    conv_state = randn(g, NUM_SLOTS + 1, dim, k - 1)
    weight, bias = randn(g, dim, k), randn(g, dim)
    ref_y, ref_state = naive_conv(x, conv_state, weight, bias, slots)
    before = conv_state.clone()

    y = conv_update(x, conv_state, weight, bias, slots, pad_slot=0)

    real = real_rows(slots)
    torch.testing.assert_close(y[real], ref_y[real], rtol=1e-13, atol=1e-13)
    assert torch.equal(y[[1, 3]], torch.zeros(2, dim, dtype=F64))
    for s in range(1, NUM_SLOTS + 1):
        expected = ref_state[s] if s in slots.tolist() else before[s]
        assert torch.equal(conv_state[s], expected), s


def test_conv_update_without_bias():
    g = torch.Generator().manual_seed(2)
    slots = torch.tensor([2, 4])
    x, conv_state, weight = randn(g, 2, 3), randn(g, NUM_SLOTS + 1, 3, 2), randn(g, 3, 3)
    ref_y, ref_state = naive_conv(x, conv_state, weight, torch.zeros(3, dtype=F64), slots)
    y = conv_update(x, conv_state, weight, None, slots)
    torch.testing.assert_close(y, ref_y, rtol=1e-13, atol=1e-13)
    assert torch.equal(conv_state[1:], ref_state[1:])


def test_selective_state_update_matches_reference_and_respects_pad():
    g = torch.Generator().manual_seed(3)
    batch, heads, head_dim, dstate = 5, 3, 4, 5
    slots = torch.tensor([0, 2, 6, 0, 4])
    state = randn(g, NUM_SLOTS + 1, heads, head_dim, dstate)
    x, dt = randn(g, batch, heads, head_dim), randn(g, batch, heads)
    A = -torch.rand(heads, generator=g, dtype=F64) - 0.5
    B, C = randn(g, batch, dstate), randn(g, batch, dstate)
    D, dt_bias = randn(g, heads), randn(g, heads)
    ref_y, ref_state = naive_ssm(state, x, dt, A, B, C, D, dt_bias, slots)
    before = state.clone()

    y = selective_state_update(state, x, dt, A, B, C, D, dt_bias, slots, pad_slot=0)

    real = real_rows(slots)
    torch.testing.assert_close(y[real], ref_y[real], rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(state[[2, 6, 4]], ref_state[[2, 6, 4]], rtol=1e-12, atol=1e-13)
    assert torch.equal(y[[0, 3]], torch.zeros(2, heads, head_dim, dtype=F64))
    for s in (1, 3, 5):
        assert torch.equal(state[s], before[s]), s


def test_invariant_primitives_agree_with_torch():
    g = torch.Generator().manual_seed(4)
    t = randn(g, 3, 7, 5, scale=4.0)
    for dim in range(3):
        torch.testing.assert_close(tree_sum(t, dim), t.sum(dim), rtol=1e-13, atol=1e-13)
    w = randn(g, 5, 9)
    torch.testing.assert_close(linear(t[0], w), t[0] @ w, rtol=1e-13, atol=1e-13)
    wide = torch.linspace(-60, 60, 1001, dtype=F64)
    torch.testing.assert_close(silu(wide), F.silu(wide), rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(softplus(wide), torch.logaddexp(wide, torch.zeros_like(wide)), rtol=1e-14, atol=0)


# --- TinyMamba --------------------------------------------------------------------------------


def prompts(draw_lengths: list[int], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, MODEL.config.vocab, (n,), generator=g) for n in draw_lengths]


def noisy_state(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-zero pools, so that 'unchanged' and 'continued from' are meaningful."""
    g = torch.Generator().manual_seed(seed)
    conv_shape, ssm_shape = MODEL.state_shapes(NUM_SLOTS)
    return randn(g, *conv_shape, scale=0.5), randn(g, *ssm_shape, scale=0.5)


def test_state_shapes_new_state_and_seeded_weights():
    cfg = MODEL.config
    conv_shape, ssm_shape = MODEL.state_shapes(3)
    assert conv_shape == (cfg.layers, 4, cfg.heads * cfg.head_dim, cfg.conv_kernel - 1)
    assert ssm_shape == (cfg.layers, 4, cfg.heads, cfg.head_dim, cfg.dstate)
    conv_state, ssm_state = MODEL.new_state(3)
    assert conv_state.shape == conv_shape and ssm_state.shape == ssm_shape
    assert conv_state.dtype == ssm_state.dtype == F64
    assert not conv_state.any() and not ssm_state.any()
    again, other = TinyMamba(TinyMambaConfig()), TinyMamba(TinyMambaConfig(seed=1))
    assert torch.equal(again.weights("cpu").embed, MODEL.weights("cpu").embed)
    assert not torch.equal(other.weights("cpu").embed, MODEL.weights("cpu").embed)
    assert all((lw.A < 0).all() for lw in MODEL.weights("cpu").layers)


def test_model_pad_rows_touch_only_pad_slot_and_do_not_affect_real_rows():
    conv_state, ssm_state = noisy_state(5)
    before = (conv_state.clone(), ssm_state.clone())
    slots = torch.tensor([0, 2, 0, 5])
    tokens = torch.tensor([7, 3, 9, 11])
    logits = MODEL.decode_logits(tokens, slots, conv_state, ssm_state)

    alone = (before[0].clone(), before[1].clone())
    alone_logits = MODEL.decode_logits(tokens[[1, 3]], slots[[1, 3]], *alone)
    assert torch.equal(logits[[1, 3]], alone_logits)
    for s in range(1, NUM_SLOTS + 1):
        for pool, old, ref in zip((conv_state, ssm_state), before, alone):
            assert torch.equal(pool[:, s], ref[:, s]), s
            if s not in (2, 5):
                assert torch.equal(pool[:, s], old[:, s]), s


@FAST
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    cut_seed=st.integers(0, 2**16),
)
def test_chunked_prefill_equals_whole_prefill(lengths, cut_seed):
    toks = prompts(lengths, cut_seed)
    slots = torch.arange(1, len(lengths) + 1)
    whole = noisy_state(6)
    chunked = (whole[0].clone(), whole[1].clone())
    whole_logits = MODEL.prefill_logits(toks, slots, *whole)

    g = torch.Generator().manual_seed(cut_seed)
    cuts = [sorted(torch.randint(0, n + 1, (2,), generator=g).tolist()) for n in lengths]
    last = torch.zeros_like(whole_logits)
    for piece in range(3):
        bounds = [[0, a, b, len(t)][piece : piece + 2] for (a, b), t in zip(cuts, toks)]
        rows = [i for i, (lo, hi) in enumerate(bounds) if hi > lo]
        if rows:
            out = MODEL.prefill_logits([toks[i][slice(*bounds[i])] for i in rows], slots[rows], *chunked)
            last[rows] = out
    assert same_real_slots(chunked, whole)
    assert torch.equal(last, whole_logits)


def test_turns_continue_state_like_one_request_over_concatenation():
    a = prompts([5, 2, 7], 7)
    b = prompts([3, 6, 1], 8)
    slots = torch.tensor([4, 1, 6])
    turns = MODEL.new_state(NUM_SLOTS)
    MODEL.prefill(a, slots, *turns)
    # the second turn runs in a different batch composition and order
    second = MODEL.prefill([b[2], b[0], b[1]], slots[[2, 0, 1]], *turns)

    once = MODEL.new_state(NUM_SLOTS)
    joined = MODEL.prefill([torch.cat([x, y]) for x, y in zip(a, b)], slots, *once)
    assert same_real_slots(turns, once)
    assert torch.equal(second, joined[[2, 0, 1]])


def test_decode_after_prefill_equals_prefill_of_prompt_plus_token():
    toks = prompts([4, 8, 1], 9)
    slots = torch.tensor([2, 3, 5])
    stepped = noisy_state(10)
    extended = (stepped[0].clone(), stepped[1].clone())
    nxt = MODEL.prefill(toks, slots, *stepped)
    after = MODEL.decode_logits(nxt, slots, *stepped)
    direct = MODEL.prefill_logits([torch.cat([t, n.view(1)]) for t, n in zip(toks, nxt)], slots, *extended)
    assert torch.equal(after, direct)
    assert same_real_slots(stepped, extended)


@FAST
@given(
    chosen=st.lists(st.integers(1, NUM_SLOTS), min_size=1, max_size=NUM_SLOTS, unique=True),
    pads=st.integers(0, 3),
    seed=st.integers(0, 2**16),
    steps=st.integers(1, 3),
)
def test_batched_decode_equals_each_request_alone(chosen, pads, seed, steps):
    g = torch.Generator().manual_seed(seed)
    slots = torch.tensor(chosen + [0] * pads)
    tokens = torch.randint(0, MODEL.config.vocab, (len(slots),), generator=g)
    batched = noisy_state(seed)
    singles = (batched[0].clone(), batched[1].clone())
    for _ in range(steps):
        out = MODEL.decode_logits(tokens, slots, *batched)
        for row, slot in enumerate(chosen):
            alone = MODEL.decode_logits(tokens[row : row + 1], slots[row : row + 1], *singles)
            assert torch.equal(out[row : row + 1], alone)
        tokens = out.argmax(-1)
    assert same_real_slots(batched, singles)


@FAST
@given(perm_seed=st.integers(0, 2**16), lengths=st.lists(st.integers(1, 6), min_size=2, max_size=5))
def test_permuting_batch_rows_gives_same_per_slot_results(perm_seed, lengths):
    toks = prompts(lengths, perm_seed)
    slots = torch.arange(1, len(lengths) + 1)
    perm = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(perm_seed))
    base, permuted = noisy_state(11), noisy_state(11)
    out = MODEL.prefill_logits(toks, slots, *base)
    out_p = MODEL.prefill_logits([toks[i] for i in perm.tolist()], slots[perm], *permuted)
    assert torch.equal(out_p, out[perm])
    nxt = MODEL.decode_logits(out.argmax(-1), slots, *base)
    nxt_p = MODEL.decode_logits(out_p.argmax(-1), slots[perm], *permuted)
    assert torch.equal(nxt_p, nxt[perm])
    assert same_real_slots(base, permuted)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu_and_is_batch_invariant():
    toks = prompts([5, 3, 8], 12)
    slots = torch.tensor([1, 4, 2])
    cpu = noisy_state(13)
    gpu = tuple(t.cuda() for t in cpu)
    single = tuple(t.clone() for t in gpu)
    out_cpu = MODEL.prefill_logits(toks, slots, *cpu)
    out_gpu = MODEL.prefill_logits([t.cuda() for t in toks], slots.cuda(), *gpu)
    torch.testing.assert_close(out_gpu.cpu(), out_cpu, rtol=1e-10, atol=1e-10)
    for row in range(3):
        alone = MODEL.prefill_logits([toks[row].cuda()], slots[row : row + 1].cuda(), *single)
        assert torch.equal(alone, out_gpu[row : row + 1])
    assert same_real_slots(gpu, single)
    torch.testing.assert_close(gpu[1].cpu()[:, 1:], cpu[1][:, 1:], rtol=1e-10, atol=1e-10)
