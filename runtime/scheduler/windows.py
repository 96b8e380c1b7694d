"""The scheduler's speculative windows: opened while the batch is built, verified at the launch,
committed once the verify step is fenced.

A running request with `spec_k` > 0 whose last token is on the host drafts (the scheduler's
`drafter`) and takes a window of drafts + 1 slots (`Moves.open_window`; too few free: one slot
and no drafts; none free: it decodes plainly this step). A verify step runs only such requests;
while plain requests wait, verify and decode steps alternate. The verify step lands at once,
even with overlap on: its accepted count is read after its fence (`commit_verified`), and the
request's next step is built only then. Each verified request commits the state after its last
accepted token (`Moves.commit_window`); an aborted, retracted or failed one rolls its window
back instead (`Moves.rollback_window`), and its rows are void.
"""

from __future__ import annotations

from collections import deque

import torch

from slotwarden.runtime.scheduler.speculative import Window, accept


def open_windows(ready: list, moves, plain_waits: bool) -> tuple:
    """(verify items, starved): the requests of `ready` that verify this step, each with the
    number of its window's slots, and those that found no free slot for a window (they decode
    plainly). None verifies while `plain_waits` (a verify ran last and plain requests wait)."""
    spec = [r for r in ready if r.spec_k and r.pending_outputs == 0 and r.window is None]
    if not spec or plain_waits:
        return [], []
    ks = [min(r.spec_k, r.remaining() - 1) for r in spec]
    proposed = moves.drafter.propose([list(r.input) + list(r.output) for r in spec], ks)
    items, starved = [], []
    for req, k, drafts in zip(spec, ks, proposed):
        drafts = tuple(drafts[:k])
        slots = moves.open_window(req, len(drafts) + 1)
        if slots is None and drafts:
            slots, drafts = moves.open_window(req, 1), ()
        if slots is None:
            starved.append(req)
            continue
        req.window = Window(slots, drafts)
        items.append((req, len(slots)))
    return items, starved


class Windows:
    """The scheduler's part in speculative decoding (mixed into `Scheduler`)."""

    verified: deque  # launched verify steps (`InFlight`) whose windows are not all committed yet

    def launched_verify(self, batch) -> None:
        """The verify step of `batch` was just launched: its windows are written by it (VERIFY)."""
        self.verify_windows([req for req, _ in batch.items])

    def unverify(self, batch) -> None:
        """A verify step that never reached the model: every window goes back untouched."""
        for req, _ in batch.items:
            self.rollback_window(req)

    def commit_verified(self) -> None:
        """Commit every fenced verify step's windows, in launch order: each request keeps the
        drafts the target agrees with and the target's next token (to its budget), and its
        committed slot gets the state after the last of them. Each row is taken off only once
        done, so a fault leaves exactly the rest for the next call."""
        tally = self._tally
        while (
            self.verified and self.verified[0].host is not None and self.pool.ledger.completed >= self.verified[0].step
        ):
            done = self.verified[0]
            rows = done.rows
            while rows:
                req, generation, win, first = rows[0]
                if not (req.done or generation != req.generation):  # else void: its window went back
                    tokens, at, agreed = accept(win.drafts, done.host[first : first + len(win.slots)], req.remaining())
                    self.commit_window(req, at)
                    req.output.extend(tokens)
                    # its last token, on the host: a tensor of its own (`_gather_last` groups by the key)
                    req.tail = (torch.tensor(tokens[-1:], dtype=torch.int64), 0, ("verified", done.step, req.rid))
                    tally["verified"] += 1
                    tally["drafted"] += len(win.drafts)
                    tally["accepted"] += agreed
                    if len(req.output) >= req.max_new_tokens:
                        self.finishing.append(req)
                rows.popleft()
            self.verified.popleft()
