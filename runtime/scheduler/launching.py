"""The scheduler's launch of a built batch: the write-set check of its rows, the forward pass,
and what a fault of either leaves (mixed into `Scheduler`).

A fault before the model is called leaves the batch's requests admitted and unfed (the next step
feeds them; a verify's windows go back untouched); once it was called, they end, since their
slots may hold anything. The rows are planned once (`Forward.plan`): the launch check reads the
row -> slot index the kernel reads, and a refused step is not launched.
"""

from __future__ import annotations

from collections import deque

import torch

from slotwarden.runtime.scheduler.admission import Batch
from slotwarden.runtime.scheduler.errors import StepFailed
from slotwarden.runtime.scheduler.forward import InFlight, ended_words, sample_rows


class Launching:
    """`_launch` and its fault path; `_forward` and `_sample` are the seams tests replace."""

    def _launch(self, batch: Batch) -> InFlight:
        """Launch `batch` (the module docstring says what a fault leaves)."""
        rows = self.forward.plan(batch)
        marker = self.device.marker(self.pool.ledger.launched + 1)
        try:
            step = self.pool.launch(
                marker, slots=rows.slots, actors=rows.actors, sources=getattr(rows, "sources", None)
            )
        except BaseException:
            if batch.kind == "verify":  # refused: nothing launched, the windows go back
                self.unverify(batch)
            raise
        self._tally["steps"] += 1
        self.forward.written = False
        try:
            if batch.kind == "verify":
                self.launched_verify(batch)
            tokens, rows = self._forward(batch)
        except BaseException as exc:
            self.device.finish(step)  # nothing more of this step will run
            if not self.forward.written:
                if batch.kind == "verify":
                    self.unverify(batch)
                raise
            ended = ended_words(batch)  # before `_fail` ends them (a prompt request forgets its siblings)
            self._fail(batch, step, exc)
            if isinstance(exc, Exception):
                raise StepFailed(f"the forward pass of step {step} raised: {exc!r}; {ended}") from exc
            raise
        done = InFlight(step, batch.kind, tokens, deque(rows))
        if batch.kind == "verify":
            self.verified.append(done)
        return done

    def _fail(self, batch: Batch, step: int, exc: BaseException) -> None:
        """The slots of a failed step may hold anything: end its requests (a session turn's
        lent slot goes back to its session, marked stale). A fault in here breaks the scheduler."""
        self._critical = f"ending the requests of failed step {step}"
        for req, _ in batch.items:
            if not req.done:
                self._abort_running(req, f"step {step} failed: {exc!r}")
                self._turn_ended(req)
        self._critical = None

    def _forward(self, batch: Batch) -> tuple:  # (tests replace it to record batches)
        return self.forward.run(batch)

    @staticmethod
    def _sample(logits: torch.Tensor, items: list) -> torch.Tensor:
        """Each row's next token (see `forward.sample_rows`)."""
        return sample_rows(logits, items)
