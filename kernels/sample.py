"""Sampling the next token: greedy, or Gumbel-max with counter-based noise.

A row with temperature 0 takes the argmax of its logits (first index on ties), as
`TinyMamba.prefill`/`decode` do. A row with temperature T > 0 takes `argmax(logits / T +
gumbel)`, a draw from `softmax(logits / T)`, where the noise of vocabulary entry v is a pure
function of (seed, position, v): SplitMix64's finaliser chained over the three (`noise_bits`),
mapped to a uniform in (0, 1). So a token depends only on its logits, its seed and its position
in the output: not on the batch, the slot, the step, nor the prefix cache.

The hash is written in int64 torch ops (wrapping multiplication, masked right shifts), so a batch
draws in a few element-wise kernels on the logits' device: no per-row loop, no host sync.
`noise_bits_reference` is the same hash on Python ints; `sibling_seed` derives the seed of a
group's i-th sample on the host.
"""

from __future__ import annotations

import torch

MIN_TEMPERATURE = 1e-30
"""The smallest positive temperature `sample` takes: logits are float32 (|logit| < 3.5e38) and
divided in float64, so `logits / T` stays finite for every T >= this bound (below it, a
denormal T overflows them to infinity and the draw is garbage). Callers refuse smaller
positive temperatures; at the bound the draw is already greedy for any logits a model makes."""

MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def _signed(x: int) -> int:
    """A 64-bit pattern as the int64 torch stores."""
    x &= MASK64
    return x - (1 << 64) if x >> 63 else x


def to_int64(x: int) -> int:
    """Any Python int reduced modulo 2**64, as a signed int64 (a seed as the device keeps it)."""
    return _signed(x)


def _mix_ref(x: int) -> int:
    x = (x + _GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * _M1) & MASK64
    x = ((x ^ (x >> 27)) * _M2) & MASK64
    return x ^ (x >> 31)


def noise_bits_reference(seed: int, position: int, index: int) -> int:
    """The 64 noise bits of vocabulary entry `index` at `position` for `seed`, on Python ints."""
    return _mix_ref((_mix_ref((_mix_ref(seed & MASK64) + position) & MASK64) + index) & MASK64)


def sibling_seed(seed: int, i: int) -> int:
    """The seed of sample `i` of a group submitted with `seed` (as a signed int64)."""
    return _signed(_mix_ref((_mix_ref(seed & MASK64) + _GOLDEN * (i + 1)) & MASK64))


_G, _C1, _C2 = _signed(_GOLDEN), _signed(_M1), _signed(_M2)


def _shr(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns (torch's `>>` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def _mix(x: torch.Tensor) -> torch.Tensor:
    x = x + _G
    x = (x ^ _shr(x, 30)) * _C1
    x = (x ^ _shr(x, 27)) * _C2
    return x ^ _shr(x, 31)


def noise_bits(seed: torch.Tensor, position: torch.Tensor, vocab: int) -> torch.Tensor:
    """[batch, vocab] int64: `noise_bits_reference(seed[b], position[b], v)` as int64 patterns."""
    index = torch.arange(vocab, dtype=torch.int64, device=seed.device)
    return _mix(_mix(_mix(seed) + position).unsqueeze(-1) + index)


def gumbel(seed: torch.Tensor, position: torch.Tensor, vocab: int) -> torch.Tensor:
    """[batch, vocab] float64 standard Gumbel noise from the top 53 noise bits."""
    u = (_shr(noise_bits(seed, position, vocab), 11).to(torch.float64) + 0.5) * 2.0**-53  # in (0, 1)
    return -torch.log(-torch.log(u))


def sample(logits: torch.Tensor, temperature: torch.Tensor, seed: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """The next token of each row, [batch] int64 on the logits' device.

    logits [batch, vocab]; temperature [batch] float (0: greedy argmax); seed and position
    [batch] int64 (the token's index in its request's output). All on the logits' device;
    nothing is read back to the host."""
    greedy = logits.argmax(-1)
    hot = temperature > 0
    scale = torch.where(hot, temperature.to(torch.float64), torch.ones_like(temperature, dtype=torch.float64))
    scores = logits.to(torch.float64) / scale.unsqueeze(-1) + gumbel(seed, position, logits.shape[-1])
    return torch.where(hot, scores.argmax(-1), greedy)
