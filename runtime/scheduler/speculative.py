"""Speculative decoding: the verify step over each request's window, and greedy acceptance.

A request with `spec_k` > 0 proposes up to k drafts (`drafter.py`) and takes a window of one
slot per verified position (drafts + 1). The verify step runs the target one position at a
time, batched over requests: position i copies the state before it (the committed slot for
i = 0, else window slot i - 1) into window slot i and feeds token i (the last generated token,
then the drafts), so window slot i holds the state after position i and `outputs[i]` is the
target's greedy token there. The committed slot is read, never written: a rollback has nothing
to restore. `accept` reads the outputs once the step is fenced: the drafts that match the
target's own tokens, then its token after them, cut to the budget; the window slot of the last
token fed is the state to commit.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from slotwarden.kernels.slots import copy_slots
from slotwarden.runtime.pool import to_device


class Window(NamedTuple):
    """A request's window for one verify step: its slots (one per position) and its drafts."""

    slots: tuple
    drafts: tuple


class VerifyPlan(NamedTuple):
    """The verify step's rows, position by position (`per_position[i]`: the row numbers at
    position i), and per row its request, the window slot it writes, the slot it reads first
    (`sources`) and the token it feeds. `slots`, `sources`, `actors` are int64 host arrays,
    the launch check's and the kernel's one index."""

    items: tuple  # (request, its Window)
    slots: np.ndarray
    sources: np.ndarray
    actors: np.ndarray
    tokens: list
    per_position: tuple
    first_row: tuple  # per item, its position-0 row

    kind = "verify"  # read beside a `rows.Step`'s kind
    pads = 0  # a verify step is not padded


def plan(items: list) -> VerifyPlan:
    """The rows of a verify step over `items` (request, Window); a request's last generated
    token (`output[-1]`, on the host) is its position-0 token."""
    slots, sources, actors, tokens, first, by_pos = [], [], [], [], [], {}
    for req, win in items:
        fed = (req.output[-1],) + tuple(win.drafts)
        first.append(len(slots))
        for i, w in enumerate(win.slots):
            by_pos.setdefault(i, []).append(len(slots))
            slots.append(w)
            sources.append(req.slot if i == 0 else win.slots[i - 1])
            actors.append(req.rid)
            tokens.append(fed[i])
    as_array = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    per_position = tuple(as_array(by_pos[i]) for i in sorted(by_pos))
    return VerifyPlan(
        tuple(items), as_array(slots), as_array(sources), as_array(actors), tokens, per_position, tuple(first)
    )


def run(step: VerifyPlan, model, pool) -> torch.Tensor:
    """Run the target over the plan (the pool's state, in place): returns each row's greedy
    token as a device tensor, in row order. No host sync (ids and tokens go to the device
    through pinned memory)."""
    device = pool.conv[0].device
    conv, ssm = pool.conv[0], pool.ssm
    slots = to_device(torch.from_numpy(step.slots), device)
    sources = to_device(torch.from_numpy(step.sources), device)
    tokens = to_device(torch.tensor(step.tokens, dtype=torch.int64), device)
    out = torch.empty(len(step.tokens), dtype=torch.int64, device=device)
    for rows in step.per_position:  # position i reads what position i - 1 wrote
        at = to_device(torch.from_numpy(rows), device)
        dst = slots[at]
        copy_slots(pool.tensors, sources[at], dst)
        out[at] = model.decode(tokens[at], dst, conv, ssm)
    return out


def accept(drafts: tuple, outputs: list, remaining: int) -> tuple:
    """(the tokens generated, the window position whose state to commit, the drafts among
    them): the drafts the target agrees with, then its own next token, at most `remaining` of
    them; the state to commit is the one after the last token fed (position len(tokens) - 1)."""
    n = 0
    while n < len(drafts) and drafts[n] == outputs[n]:
        n += 1
    tokens = (tuple(drafts[:n]) + (outputs[n],))[:remaining]
    return tokens, len(tokens) - 1, min(n, len(tokens))
