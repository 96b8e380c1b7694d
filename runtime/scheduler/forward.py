"""The forward pass: a batch's inputs gathered, the layer run over the pool's state by slot index.

`Forward.run(batch)` returns the step's tokens tensor (a device future: no host sync here) and,
per batch item, (request, its generation, the row of its token or None). It sets `written` as
soon as the layer may have written a slot's state: a fault after that point leaves the batch's
slots untrustworthy (the scheduler then ends those requests). `InFlight` is a launched step whose
results the host has not yet all processed. With captured sizes (`captured_sizes`), a decode
batch is padded up to the next one, as a CUDA graph captured at that size needs: the pad rows
feed token 0 to the pad slot and their tokens are dropped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import torch

from slotwarden.kernels.sample import sample
from slotwarden.model.vocabulary import NOBODY, PAD_SLOT
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


def captured_sizes(max_running: int) -> tuple:
    """The batch sizes a decode step is padded to: 1, 2, 4, ... below `max_running`, then it."""
    sizes = [1]
    while sizes[-1] * 2 < max_running:
        sizes.append(sizes[-1] * 2)
    return tuple(sizes) + ((max_running,) if sizes[-1] < max_running else ())


class Forward:
    """The layer `model` over `pool`'s state; `sample` draws the tokens of sampled rows; decode
    batches are padded to the next of `captured_sizes(pad_to)` (None: not padded)."""

    def __init__(self, pool, model, sample: Callable, pad_to: int | None = None):
        self.pool, self.model, self.sample = pool, model, sample
        self.sizes = None if pad_to is None else captured_sizes(pad_to)
        self.written = False

    def pads(self, batch: Batch) -> int:
        """How many pad rows follow the batch's rows."""
        if self.sizes is None or batch.kind == "prefill":
            return 0
        n = len(batch.items)
        return next((m for m in self.sizes if m >= n), n) - n

    @staticmethod
    def rows(batch: Batch) -> list:
        """The batch's items in the order of its rows: row i reads and writes the slot of the
        i-th item's request (the write set the launch checks is built from the same list)."""
        return batch.items if batch.kind == "prefill" else _by_source(batch.items)

    def write_set(self, batch: Batch) -> dict:
        """What the step's rows address, for `StatePool.launch`: row i writes (and reads) the
        slot of the i-th request of `rows(batch)`, for that request; then the pad rows, on the
        pad slot. The kernel indexes by the same list."""
        items, pads = self.rows(batch), self.pads(batch)
        slots = [req.slot for req, _ in items] + [PAD_SLOT] * pads
        return dict(slots=slots, actors=[req.rid for req, _ in items] + [NOBODY] * pads)

    def run(self, batch: Batch) -> tuple:
        """Run the layer on the batch (reading and writing the pool by slot index). Returns the
        tokens tensor (a device future) and, per item, (request, generation, row of its token
        in that tensor or None). No host sync here."""
        items, pads = self.rows(batch), self.pads(batch)
        slots = self.pool.on_device(self.write_set(batch)["slots"])
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
            if pads:
                last = torch.cat([last, torch.zeros(pads, dtype=last.dtype, device=last.device)])
            self.written = True
            if sampled:
                logits = self.model.decode_logits(last.to(slots.device), slots, conv, ssm)  # pad rows: slot 0
                nxt = self.sample(logits[: len(items)], items)
            else:
                nxt = self.model.decode(last.to(slots.device), slots, conv, ssm)[: len(items)]
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
