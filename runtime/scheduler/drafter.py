"""Drafters for speculative decoding: what a request proposes to verify next, from its own tokens.

A drafter's `propose(contexts, ks)` takes, per request, the tokens it has fed and generated
(its context, the last one not yet fed) and how many drafts it may propose, and returns up to
that many tokens each. What it proposes changes only how many the verify step accepts, never
the tokens a request generates: acceptance is greedy against the target. `NgramDrafter` looks
the context's last n tokens up earlier in the context; `ModelDrafter` runs a small TinyMamba.
The model drafter keeps no state between steps: it reads each context from zero into scratch
tensors of its own (no slot, so nothing of it enters the slot lifecycle).
"""

from __future__ import annotations

import torch

from slotwarden.kernels.layer import TinyMamba


class NgramDrafter:
    """Prompt lookup: the tokens that followed the latest earlier occurrence of the context's
    last `n` tokens (trying n = `max_n` down to 1); none found: no drafts."""

    def __init__(self, max_n: int = 3):
        self.max_n = max_n

    def propose(self, contexts: list, ks: list) -> list:
        return [_lookup(ctx, k, self.max_n) for ctx, k in zip(contexts, ks)]


def _lookup(ctx: list, k: int, max_n: int) -> list:
    for n in range(min(max_n, len(ctx) - 1), 0, -1):
        tail = ctx[-n:]
        for start in range(len(ctx) - n - 1, -1, -1):
            if ctx[start : start + n] == tail:
                return list(ctx[start + n : start + n + k])
    return []


class ModelDrafter:
    """A small TinyMamba (same vocabulary as the target) proposes its greedy continuation: each
    context is fed from zero, in one batched prefill over scratch state, then k decode steps."""

    def __init__(self, model: TinyMamba):
        self.model = model

    def propose(self, contexts: list, ks: list) -> list:
        live = [i for i, k in enumerate(ks) if k > 0 and contexts[i]]
        out: list = [[] for _ in contexts]
        if not live:
            return out
        conv, ssm = self.model.new_state(len(live))
        slots = torch.arange(1, len(live) + 1, dtype=torch.int64)
        chunks = [torch.tensor(contexts[i], dtype=torch.int64) for i in live]
        nxt = self.model.prefill(chunks, slots, conv, ssm)
        steps = max(ks[i] for i in live)
        for step in range(steps):
            host = nxt.tolist()  # the drafter's own state lives on the host: no device sync
            for j, i in enumerate(live):
                if step < ks[i]:
                    out[i].append(host[j])
            if step + 1 < steps:
                nxt = self.model.decode(nxt, slots, conv, ssm)
        return out
