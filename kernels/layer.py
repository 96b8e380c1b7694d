"""TinyMamba: a deterministic Mamba-2-style model whose recurrent state lives in slot pools.

Every request is identified only by its slot; the model itself is stateless.
Prompt tokens and decode tokens go through the same one-token step, so chunked
prefill, multi-turn continuation and decode are bitwise consistent with one
pass over the concatenated input, and every row's result is bitwise
independent of the batch it runs in (see ``invariant``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
from torch.nn.utils.rnn import pad_sequence

from slotwarden.kernels.conv import conv_update
from slotwarden.kernels.invariant import linear
from slotwarden.kernels.slots import to_device
from slotwarden.kernels.ssm import selective_state_update


@dataclass(frozen=True)
class TinyMambaConfig:
    """Sizes, seed and dtype of a TinyMamba; ``conv_dim = heads * head_dim``."""

    layers: int = 2
    vocab: int = 64
    d_model: int = 16
    heads: int = 2
    head_dim: int = 8
    dstate: int = 8
    conv_kernel: int = 4
    seed: int = 0
    dtype: torch.dtype = torch.float64

    @property
    def conv_dim(self) -> int:
        return self.heads * self.head_dim


@dataclass(frozen=True)
class _LayerWeights:
    in_proj: torch.Tensor  # [d_model, conv_dim + heads + 2 * dstate]: x | dt | B | C
    conv_weight: torch.Tensor  # [conv_dim, conv_kernel]
    conv_bias: torch.Tensor  # [conv_dim]
    dt_bias: torch.Tensor  # [heads]
    A: torch.Tensor  # [heads], negative
    D: torch.Tensor  # [heads]
    out_proj: torch.Tensor  # [conv_dim, d_model]


@dataclass(frozen=True)
class _Weights:
    embed: torch.Tensor  # [vocab, d_model]
    layers: tuple[_LayerWeights, ...]
    lm_head: torch.Tensor  # [d_model, vocab]


def _to(w, device: torch.device):
    return type(w)(**{f.name: _move(getattr(w, f.name), device) for f in fields(w)})


def _move(v, device: torch.device):
    if isinstance(v, tuple):
        return tuple(_to(item, device) for item in v)
    return v.to(device)


def _init_weights(cfg: TinyMambaConfig) -> _Weights:
    g = torch.Generator().manual_seed(cfg.seed)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(cfg.dtype)

    def rand(*shape: int, lo: float, hi: float) -> torch.Tensor:
        u = torch.rand(*shape, generator=g, dtype=torch.float64)
        return (lo + (hi - lo) * u).to(cfg.dtype)

    embed = randn(cfg.vocab, cfg.d_model)
    layers = tuple(
        _LayerWeights(
            in_proj=randn(cfg.d_model, cfg.conv_dim + cfg.heads + 2 * cfg.dstate, scale=1 / math.sqrt(cfg.d_model)),
            conv_weight=randn(cfg.conv_dim, cfg.conv_kernel, scale=1 / math.sqrt(cfg.conv_kernel)),
            conv_bias=randn(cfg.conv_dim, scale=0.1),
            dt_bias=rand(cfg.heads, lo=-2.0, hi=0.0),
            A=-rand(cfg.heads, lo=0.5, hi=1.5),
            D=rand(cfg.heads, lo=0.5, hi=1.0),
            out_proj=randn(cfg.conv_dim, cfg.d_model, scale=0.5 / math.sqrt(cfg.conv_dim)),
        )
        for _ in range(cfg.layers)
    )
    lm_head = randn(cfg.d_model, cfg.vocab, scale=1 / math.sqrt(cfg.d_model))
    return _Weights(embed=embed, layers=layers, lm_head=lm_head)


class TinyMamba:
    """A tiny Mamba-2-style LM over slot pools.

    Per layer: in_proj d_model -> (x: conv_dim, dt: heads, B: dstate, C: dstate);
    x <- conv_update(x); y <- selective_state_update(x, dt, B, C); hidden +=
    out_proj(y). Tokens are embedded, the final hidden state is projected to
    the vocabulary, and the next token is the argmax (first index on ties).

    State pools (owned by the caller, modified in place):
    conv_state [layers, num_slots + 1, conv_dim, conv_kernel - 1] and
    ssm_state [layers, num_slots + 1, heads, head_dim, dstate]; slot
    ``pad_slot`` (default 0) is the pad slot. All computation runs on the
    device of ``conv_state``; weights are copied there on first use.
    """

    def __init__(self, config: TinyMambaConfig | None = None, device: torch.device | str | None = None):
        self.config = config if config is not None else TinyMambaConfig()
        cpu = _init_weights(self.config)
        self._weights: dict[torch.device, _Weights] = {torch.device("cpu"): cpu}
        if device is not None:
            self.weights(device)

    def weights(self, device: torch.device | str) -> _Weights:
        """The weights on ``device`` (copied there once, then cached)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device not in self._weights:
            self._weights[device] = _to(self._weights[torch.device("cpu")], device)
        return self._weights[device]

    def state_shapes(self, num_slots: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(conv_shape, ssm_shape) of pools holding ``num_slots`` real slots plus the pad slot."""
        c = self.config
        return (
            (c.layers, num_slots + 1, c.conv_dim, c.conv_kernel - 1),
            (c.layers, num_slots + 1, c.heads, c.head_dim, c.dstate),
        )

    def new_state(self, num_slots: int, device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero-filled (conv_state, ssm_state) pools in the config dtype."""
        conv_shape, ssm_shape = self.state_shapes(num_slots)
        dtype = self.config.dtype
        return (
            torch.zeros(conv_shape, dtype=dtype, device=device),
            torch.zeros(ssm_shape, dtype=dtype, device=device),
        )

    def _check_state(self, conv_state: torch.Tensor, ssm_state: torch.Tensor) -> None:
        num_slots = conv_state.shape[1] - 1
        expected = self.state_shapes(num_slots)
        if (tuple(conv_state.shape), tuple(ssm_state.shape)) != expected:
            raise ValueError(f"state shapes {tuple(conv_state.shape)}, {tuple(ssm_state.shape)}; expected {expected}")
        if conv_state.device != ssm_state.device:
            raise ValueError(f"states on {conv_state.device} and {ssm_state.device}")

    def _step(
        self,
        w: _Weights,
        tokens: torch.Tensor,
        slots: torch.Tensor,
        conv_state: torch.Tensor,
        ssm_state: torch.Tensor,
        pad_slot: int,
    ) -> torch.Tensor:
        """One token per row through all layers; returns the final hidden state [batch, d_model]."""
        c = self.config
        batch = tokens.shape[0]
        hidden = w.embed[tokens]
        for layer, lw in enumerate(w.layers):
            proj = linear(hidden, lw.in_proj)
            x, dt, B, C = torch.split(proj, [c.conv_dim, c.heads, c.dstate, c.dstate], dim=-1)
            x = conv_update(x, conv_state[layer], lw.conv_weight, lw.conv_bias, slots, pad_slot)
            y = selective_state_update(
                ssm_state[layer],
                x.reshape(batch, c.heads, c.head_dim),
                dt,
                lw.A,
                B,
                C,
                lw.D,
                lw.dt_bias,
                slots,
                pad_slot,
            )
            hidden = hidden + linear(y.reshape(batch, c.conv_dim), lw.out_proj)
        return hidden

    def decode_logits(
        self,
        tokens: torch.Tensor,
        slots: torch.Tensor,
        conv_state: torch.Tensor,
        ssm_state: torch.Tensor,
        pad_slot: int = 0,
    ) -> torch.Tensor:
        """Feed one token per request; return logits [batch, vocab] for the next token.

        tokens, slots: [batch] int64. Advances the states of ``slots`` by one
        token in place (pad rows write only into ``pad_slot``; real slots must
        be distinct). No host-device sync when tokens and slots already live
        on the state's device.
        """
        self._check_state(conv_state, ssm_state)
        device = conv_state.device
        w = self.weights(device)
        tokens = to_device(tokens, device)  # no sync: host tensors go through pinned memory
        slots = to_device(slots, device)
        if tokens.shape != slots.shape or tokens.dim() != 1:
            raise ValueError(f"tokens {tuple(tokens.shape)} and slots {tuple(slots.shape)} must be [batch]")
        hidden = self._step(w, tokens, slots, conv_state, ssm_state, pad_slot)
        return linear(hidden, w.lm_head)

    def decode(
        self,
        tokens: torch.Tensor,
        slots: torch.Tensor,
        conv_state: torch.Tensor,
        ssm_state: torch.Tensor,
        pad_slot: int = 0,
    ) -> torch.Tensor:
        """``decode_logits(...).argmax(-1)``: next token [batch] int64, left on the device."""
        return self.decode_logits(tokens, slots, conv_state, ssm_state, pad_slot).argmax(-1)

    def prefill_logits(
        self,
        tokens: list[torch.Tensor],
        slots: torch.Tensor,
        conv_state: torch.Tensor,
        ssm_state: torch.Tensor,
        pad_slot: int = 0,
    ) -> torch.Tensor:
        """Feed each prompt from its slot's current state; return logits [batch, vocab] after its last token.

        tokens: one 1-D int64 tensor per request, lengths >= 1 (may differ);
        slots: [batch] int64. Runs ``max(len)`` one-token steps; at step t a
        row whose prompt is already consumed is pointed at ``pad_slot`` so its
        slot does not advance. The state of each slot ends as if its prompt had
        been decoded token by token, so calling this again with the next chunk
        continues the prompt exactly (chunked prefill, multi-turn sessions).

        Lengths are read from tensor metadata on the host; the prompts and the
        lengths reach the device through pinned memory (`to_device`): no host-device
        sync.
        """
        self._check_state(conv_state, ssm_state)
        device = conv_state.device
        w = self.weights(device)
        slots = to_device(slots, device)
        batch = len(tokens)
        if slots.shape != (batch,):
            raise ValueError(f"slots must be [{batch}], got {tuple(slots.shape)}")
        lengths = [int(t.numel()) for t in tokens]
        if any(n < 1 for n in lengths):
            raise ValueError(f"every prompt needs at least one token, lengths {lengths}")
        logits = torch.zeros(batch, self.config.vocab, dtype=self.config.dtype, device=device)
        if batch == 0:
            return logits
        padded = pad_sequence(
            [to_device(torch.as_tensor(t, dtype=torch.int64).reshape(-1), device) for t in tokens], batch_first=True
        )
        lengths_dev = to_device(torch.tensor(lengths, dtype=torch.int64), device)
        ends = set(n - 1 for n in lengths)
        for t in range(max(lengths)):
            step_slots = torch.where(lengths_dev > t, slots, pad_slot)
            hidden = self._step(w, padded[:, t], step_slots, conv_state, ssm_state, pad_slot)
            if t in ends:
                done = (lengths_dev - 1 == t).unsqueeze(-1)
                logits = torch.where(done, linear(hidden, w.lm_head), logits)
        return logits

    def prefill(
        self,
        tokens: list[torch.Tensor],
        slots: torch.Tensor,
        conv_state: torch.Tensor,
        ssm_state: torch.Tensor,
        pad_slot: int = 0,
    ) -> torch.Tensor:
        """``prefill_logits(...).argmax(-1)``: the token after each prompt, [batch] int64."""
        return self.prefill_logits(tokens, slots, conv_state, ssm_state, pad_slot).argmax(-1)
