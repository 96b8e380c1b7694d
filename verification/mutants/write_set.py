"""The index bugs as runtime mutants: each a `Scheduler` whose step plan (`Forward.plan` over the
persistent batch, `runtime/scheduler/rows.py`) builds the step's rows as the buggy engine did.
Every slot move stays legal; what goes wrong is the row -> slot index the kernels use, and the
same index goes to the launch check, which refuses the step (`IllegalStep`) before it reaches
the device. Production code has no mutant branches.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY
from slotwarden.runtime.scheduler.config import SchedulerConfig
from slotwarden.runtime.scheduler.forward import Forward
from slotwarden.runtime.scheduler.rows import PersistentBatch, Step
from slotwarden.runtime.scheduler.scheduler import Scheduler


class _Rows(Scheduler):
    """A scheduler whose forward pass is `forward_cls` over a persistent batch `batch_cls`."""

    forward_cls: type = Forward
    batch_cls: type = PersistentBatch

    def __init__(self, pool, model, config: SchedulerConfig = SchedulerConfig()):
        super().__init__(pool, model, config)
        f = self.forward
        self.forward = self.forward_cls(f.pool, f.model, f.sample)
        self.forward.batch = self.batch_cls(f.batch.sizes)


class _Bent(Forward):
    """A forward pass whose plan's slot index is bent (`bend`) once it is built: the launch
    check and the kernel both read the bent one."""

    def plan(self, batch) -> Step:
        if self._planned[0] is not batch:
            step = super().plan(batch)
            self._planned = (batch, step._replace(slots=self.bend(batch, step, step.slots.copy())))
        return self._planned[1]

    def bend(self, batch, step: Step, slots):
        return slots


class _MinusOnePadRows(PersistentBatch):
    def _pad(self, rows) -> None:
        self.index[rows] = NOBODY  # PADDING_SLOT_ID: -1, taken as a real index


class MinusOnePad(_Rows):
    """vLLM #43810: CUDA-graph padding uses PADDING_SLOT_ID = -1 as a real index, and the state
    update writes through it (into the last real slot, where the index wraps)."""

    batch_cls = _MinusOnePadRows


class _StaleTailRows(PersistentBatch):
    def _pad(self, rows) -> None:
        pass  # the padded index buffer keeps what its rows held before


class PadStaleTail(_Rows):
    """TensorRT-LLM #13151: the padded index buffer is reused from step to step and its pad rows
    keep the tail of an earlier step's indices: a row kept for a request whose token is still in
    flight, or rows past the condensed batch, still name slots since released or moved on."""

    batch_cls = _StaleTailRows


class _RowBoundRows(PersistentBatch):
    def _move(self, src: int, dst: int) -> None:
        pass  # the state stays with the row: the request moved into it runs on the leaver's


class RowBoundState(_Rows):
    """tenstorrent/vllm #454: device state bound to the persistent batch's row, not the request:
    when a request leaves and the rows condense, the request moved into its row runs on its state."""

    batch_cls = _RowBoundRows


class ReusedSlotNotZeroed(Scheduler):
    """vLLM #56524 (SGLang #39862: a load-back setting the slot index directly, past the alloc
    that zeroes): a reused slot is never zeroed, so its first read inherits the last tenant's bytes."""

    def __init__(self, pool, model, config: SchedulerConfig = SchedulerConfig()):
        super().__init__(pool, model, config)
        self.pool._zero_batch = lambda batch: None  # the taken slot keeps its previous tenant's state


class _StepBehind(_Bent):
    before = None  # the slot index of the step before, by row

    def bend(self, batch, step: Step, slots):
        before, self.before = self.before, step.slots
        if before is not None:
            n = min(len(slots), len(before))
            real = step.actors[:n] != NOBODY
            slots[:n][real] = before[:n][real]
        return slots


class StaleRowMapping(_Rows):
    """vLLM #55951: with pipeline parallelism the state update indexes by the batch rows of an
    older batch: each row takes the slot its row had a step before (a neighbour's, or one freed
    and taken again)."""

    forward_cls = _StepBehind


class _WrongSeed(_Bent):
    def bend(self, batch, step: Step, slots):
        for row, (req, _) in zip(step.rows.tolist(), step.items):
            if batch.kind == "prefill" and req.fed == 0:
                slots[row] = req.slot % self.pool.capacity + 1  # the index seeded from the wrong group's size
        return slots


class WrongSeedSlot(_Rows):
    """vLLM #53142 (#55600): a new request's running state index is seeded from another group's
    block size, so its first step restores and writes an unrelated slot's state."""

    forward_cls = _WrongSeed
