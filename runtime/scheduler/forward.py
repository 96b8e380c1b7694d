"""The forward pass: a batch's inputs gathered, the layer run over the pool's state by slot index.

`Forward.run(batch)` returns the step's tokens tensor (a device future: no host sync here) and,
per batch item, (request, its generation, the row of its token or None). It sets `written` as
soon as the layer may have written a slot's state: a fault after that point leaves the batch's
slots untrustworthy (the scheduler then ends those requests). `InFlight` is a launched step whose
results the host has not yet all processed. Each batch is planned once (`plan`, a `rows.Step`):
decode steps run over a persistent batch, padded to a captured size as a CUDA graph captured at
that size needs; the launch check and the kernel read the plan's one row -> slot index. Pad rows
feed token 0 to the pad slot and their tokens are dropped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import torch

from slotwarden.kernels.sample import sample
from slotwarden.runtime.pool import to_device
from slotwarden.runtime.scheduler.admission import Batch
from slotwarden.runtime.scheduler import speculative
from slotwarden.runtime.scheduler.rows import PersistentBatch, Step, captured_sizes, prefill_step


@dataclass(eq=False)
class InFlight:
    """A launched step's results: the tokens tensor (a device future) and, per batch item not
    yet processed, (request, its generation at launch, row of its token or None)."""

    step: int
    kind: str
    tokens: torch.Tensor
    rows: deque
    host: list | None = field(default=None)  # the tokens on the host, once read


class Forward:
    """The layer `model` over `pool`'s state; `sample` draws the tokens of sampled rows; decode
    steps run over a persistent batch (`rows.py`), padded to the next of `captured_sizes(pad_to)`
    (None: not padded)."""

    def __init__(self, pool, model, sample: Callable, pad_to: int | None = None):
        self.pool, self.model, self.sample = pool, model, sample
        self.batch = PersistentBatch(None if pad_to is None else captured_sizes(pad_to))
        self.written = False
        self._planned: tuple = (None, None)  # (batch, its Step): each batch is planned once

    @property
    def planned(self) -> Step | None:
        """The step planned last."""
        return self._planned[1]

    def plan(self, batch: Batch) -> Step:
        """The step's rows (`rows.Step`), built once per batch: the launch check and the kernel
        read the same row -> slot index."""
        if self._planned[0] is not batch:
            if batch.kind == "verify":
                step = speculative.plan([(req, req.window) for req, _ in batch.items])
            else:
                step = prefill_step(batch.items) if batch.kind == "prefill" else self.batch.decode(batch.items)
            self._planned = (batch, step)
        return self._planned[1]

    def run(self, batch: Batch) -> tuple:
        """Run the layer on the batch (reading and writing the pool by the plan's slot index).
        Returns the tokens tensor (a device future, one token per request in row order) and, per
        request, (request, generation, its token's row in that tensor or None). No host sync."""
        step = self.plan(batch)
        if batch.kind == "verify":  # the rows to commit once fenced: (request, generation, window, first row)
            self.written = True  # the windows' slots from here on
            tokens = speculative.run(step, self.model, self.pool)
            return tokens, [(req, req.generation, win, row) for (req, win), row in zip(step.items, step.first_row)]
        items = step.items
        slots = self.pool.on_device(step.slots)
        conv, ssm = self.pool.conv[0], self.pool.ssm
        sampled = any(req.temperature > 0 for req, _ in items)  # host floats: greedy batches run as before
        if batch.kind == "prefill":
            chunks = [torch.tensor(req.input[req.fed : req.fed + n], dtype=torch.int64) for req, n in items]
            self.written = True  # from here on the slots' state may be written
            if sampled:
                nxt = self.sample(self.model.prefill_logits(chunks, slots, conv, ssm), items)
            else:
                nxt = self.model.prefill(chunks, slots, conv, ssm)
        else:  # each request's last token, gathered from the step that produced it, into its row
            last = _gather_last(step)
            self.written = True
            real = _real_rows(step, slots.device)
            if sampled:
                nxt = self.sample(_take(self.model.decode_logits(last.to(slots.device), slots, conv, ssm), real), items)
            else:
                nxt = _take(self.model.decode(last.to(slots.device), slots, conv, ssm), real)
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


def _gather_last(step: Step) -> torch.Tensor:
    """Each row's input token: a request's last token, one index per tensor it comes from (the
    rows go to the device through pinned memory, asynchronously: no sync); a pad row's, 0."""
    tails = [req.tail for req, _ in step.items]
    size, first = len(step.slots), tails[0][0]
    if len({t[2] for t in tails}) == 1 and _is_prefix(step):
        last = first[to_device(torch.tensor([t[1] for t in tails], dtype=torch.int64), first.device)]
        if size > len(tails):
            last = torch.cat([last, torch.zeros(size - len(tails), dtype=last.dtype, device=last.device)])
        return last
    groups: dict = {}
    for (tensor, at, source), row in zip(tails, step.rows.tolist()):
        group = groups.setdefault(source, (tensor, [], []))
        group[1].append(at)
        group[2].append(row)
    last = torch.zeros(size, dtype=first.dtype, device=first.device)
    for tensor, at, rows in groups.values():
        taken = tensor[to_device(torch.tensor(at, dtype=torch.int64), tensor.device)]
        last[to_device(torch.tensor(rows, dtype=torch.int64), last.device)] = taken.to(last.device)
    return last


def _is_prefix(step: Step) -> bool:
    """Whether the requests' rows are rows 0, 1, ... (then pads only follow them)."""
    n = len(step.items)
    return bool(n == 0 or (step.rows[0] == 0 and step.rows[-1] == n - 1))


def _real_rows(step: Step, device) -> slice | torch.Tensor:
    """The rows of the step's requests in the kernel's output: a slice when they lead."""
    if _is_prefix(step):
        return slice(0, len(step.items))
    return to_device(torch.from_numpy(step.rows), device)


def _take(out: torch.Tensor, real) -> torch.Tensor:
    return out[real]


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
