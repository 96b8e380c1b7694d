"""The forward pass: a batch's inputs gathered, the layer run over the pool's state by slot index.

`Forward.run(batch)` returns the step's tokens tensor (a device future: no host sync here) and,
per batch item, (request, its generation, the row of its token or None). It sets `written` as
soon as the layer may have written a slot's state: a fault after that point leaves the batch's
slots untrustworthy (the scheduler then ends those requests). `InFlight` is a launched step whose
results the host has not yet all processed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import torch

from slotwarden.kernels.sample import sample
from slotwarden.runtime.pool import to_device
from slotwarden.runtime.scheduler.admission import Batch


@dataclass(eq=False)
class InFlight:
    """A launched step's results: the tokens tensor (a device future) and, per batch item not
    yet processed, (request, its generation at launch, row of its token or None)."""

    step: int
    kind: str
    tokens: torch.Tensor
    rows: deque
    host: list | None = field(default=None)  # the tokens on the host, once read


def _by_source(items: list) -> list:
    """Decode items ordered by the step whose tensor holds their last token (usually one), so
    their inputs gather with one index per source tensor (a stable, reproducible order)."""
    return sorted(items, key=lambda item: item[0].tail[2])


class Forward:
    """The layer `model` over `pool`'s state; `sample` draws the tokens of sampled rows."""

    def __init__(self, pool, model, sample: Callable):
        self.pool, self.model, self.sample = pool, model, sample
        self.written = False

    @staticmethod
    def rows(batch: Batch) -> list:
        """The batch's items in the order of its rows: row i reads and writes the slot of the
        i-th item's request (the write set the launch checks is built from the same list)."""
        return batch.items if batch.kind == "prefill" else _by_source(batch.items)

    def write_set(self, batch: Batch) -> dict:
        """What the step's rows address, for `StatePool.launch`: row i writes (and reads) the
        slot of the i-th request of `rows(batch)`, for that request."""
        items = self.rows(batch)
        return dict(slots=[req.slot for req, _ in items], actors=[req.rid for req, _ in items])

    def run(self, batch: Batch) -> tuple:
        """Run the layer on the batch (reading and writing the pool by slot index). Returns the
        tokens tensor (a device future) and, per item, (request, generation, row of its token
        in that tensor or None). No host sync here."""
        items = self.rows(batch)
        slots = self.pool.on_device([req.slot for req, _ in items])
        conv, ssm = self.pool.conv[0], self.pool.ssm
        sampled = any(req.temperature > 0 for req, _ in items)  # host floats: greedy batches run as before
        if batch.kind == "prefill":
            chunks = [torch.tensor(req.input[req.fed : req.fed + n], dtype=torch.int64) for req, n in items]
            self.written = True  # from here on the slots' state may be written
            if sampled:
                nxt = self.sample(self.model.prefill_logits(chunks, slots, conv, ssm), items)
            else:
                nxt = self.model.prefill(chunks, slots, conv, ssm)
        else:  # each request's last token, gathered from the step that produced it
            groups: dict = {}
            for req, _ in items:
                groups.setdefault(req.tail[2], (req.tail[0], []))[1].append(req.tail[1])
            # the rows go to the device through pinned memory, asynchronously: no sync here
            last = torch.cat(
                [t[to_device(torch.tensor(rows, dtype=torch.int64), t.device)] for t, rows in groups.values()]
            )
            self.written = True
            if sampled:
                nxt = self.sample(self.model.decode_logits(last.to(slots.device), slots, conv, ssm), items)
            else:
                nxt = self.model.decode(last.to(slots.device), slots, conv, ssm)
        rows = []
        for i, (req, n) in enumerate(items):
            if batch.kind == "prefill":
                req.fed += n
            makes_token = not req.prefilling
            if makes_token:
                req.tail = (nxt, i, self.pool.ledger.launched)  # the step launched last is this one
                req.pending_outputs += 1
            rows.append((req, req.generation, i if makes_token else None))
        return nxt, rows


def sample_rows(logits: torch.Tensor, items: list) -> torch.Tensor:
    """Each row's next token (`kernels/sample.py`): its temperature and seed, and the token's
    position in its output (outputs so far, made or in flight). The three columns go to the
    device through pinned memory, asynchronously: no sync here."""
    device = logits.device
    temperature = to_device(torch.tensor([req.temperature for req, _ in items], dtype=torch.float64), device)
    seed = to_device(torch.tensor([req.seed for req, _ in items], dtype=torch.int64), device)
    position = [len(req.output) + req.pending_outputs for req, _ in items]
    return sample(logits, temperature, seed, to_device(torch.tensor(position, dtype=torch.int64), device))


def ended_words(batch) -> str:
    """What a failed step ends, in words: the requests with a Result, and each parallel-sampling
    group's prompt request (no Result, not counted: its siblings go on as plain requests)."""
    live = [req for req, _ in batch.items if not req.done]
    shown = [req.rid for req in live if not req.shared]
    words = [f"ended requests {shown} (each with a Result, reason 'step N failed')"] if shown else []
    for req in live:
        if req.shared:
            sibs = [sib.rid for sib in req.siblings if not sib.done]
            words.append(
                f"ended the prompt request {req.rid} of parallel-sampling siblings {sibs} (no Result, not counted: "
                "the siblings go on as plain requests, each prefilling the prompt or matching what the cache holds)"
            )
    return "; ".join(words)
