"""The index bugs as runtime mutants: each a `Scheduler` whose forward pass (`Forward`) builds
the step's rows as the buggy engine did. Every slot move stays legal; what goes wrong is the row
-> slot index the kernels use, and the same index goes to the launch check, which refuses the
step (`IllegalStep`) before it reaches the device. Production code has no mutant branches.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY
from slotwarden.runtime.scheduler.config import SchedulerConfig
from slotwarden.runtime.scheduler.forward import Forward
from slotwarden.runtime.scheduler.scheduler import Scheduler


class _Rows(Scheduler):
    """A scheduler whose forward pass is `forward_cls`."""

    forward_cls: type = Forward

    def __init__(self, pool, model, config: SchedulerConfig = SchedulerConfig()):
        super().__init__(pool, model, config)
        f = self.forward
        self.forward = self.forward_cls(f.pool, f.model, f.sample)
        self.forward.sizes = f.sizes


class _MinusOnePad(Forward):
    def write_set(self, batch):
        rows = super().write_set(batch)
        return dict(rows, slots=[NOBODY if a == NOBODY else s for s, a in zip(rows["slots"], rows["actors"])])


class MinusOnePad(_Rows):
    """vLLM #43810: CUDA-graph padding uses PADDING_SLOT_ID = -1 as a real index, and the state
    update writes through it (into the last real slot, where the index wraps)."""

    forward_cls = _MinusOnePad


class _StaleTail(Forward):
    def __init__(self, *args):
        super().__init__(*args)
        self.tail: list = []  # the padded index buffer, kept from step to step

    def write_set(self, batch):
        rows = super().write_set(batch)
        slots = [
            self.tail[i] if a == NOBODY and i < len(self.tail) else s
            for i, (s, a) in enumerate(zip(rows["slots"], rows["actors"]))
        ]
        self.tail = slots
        return dict(rows, slots=slots)


class PadStaleTail(_Rows):
    """TensorRT-LLM #13151: the padded index buffer is reused from step to step and its pad rows
    keep the tail of an earlier step's indices: requests since parked, finished or moved on."""

    forward_cls = _StaleTail


class _RowBound(Forward):
    def __init__(self, *args):
        super().__init__(*args)
        self.bound: dict = {}  # row -> the slot of the first request that ran in it

    def write_set(self, batch):
        rows = super().write_set(batch)
        slots = []
        for i, (s, a) in enumerate(zip(rows["slots"], rows["actors"])):
            slots.append(s if a == NOBODY else self.bound.setdefault(i, s))  # bound to the row, not the request
        return dict(rows, slots=slots)


class RowBoundState(_Rows):
    """tenstorrent/vllm #454: device state bound to the persistent batch's row, not the request:
    when a request leaves and the rows condense, the next request in that row runs on its state."""

    forward_cls = _RowBound


class ReusedSlotNotZeroed(Scheduler):
    """vLLM #56524 (SGLang #39862: a load-back setting the slot index directly, past the alloc
    that zeroes): a reused slot is never zeroed, so its first read inherits the last tenant's bytes."""

    def __init__(self, pool, model, config: SchedulerConfig = SchedulerConfig()):
        super().__init__(pool, model, config)
        self.pool._zero_batch = lambda batch: None  # the taken slot keeps its previous tenant's state


class _StepBehind(Forward):
    def __init__(self, *args):
        super().__init__(*args)
        self.before: list = []  # the slots of the step before, by row

    def write_set(self, batch):
        rows = super().write_set(batch)
        slots = [
            self.before[i] if a != NOBODY and i < len(self.before) else s
            for i, (s, a) in enumerate(zip(rows["slots"], rows["actors"]))
        ]
        self.before = rows["slots"]
        return dict(rows, slots=slots)


class StaleRowMapping(_Rows):
    """vLLM #55951: with pipeline parallelism the state update indexes by the batch rows of an
    older batch: each row takes the slot its row had a step before (a neighbour's, or one freed
    and taken again)."""

    forward_cls = _StepBehind


class _WrongSeed(Forward):
    def write_set(self, batch):
        rows = super().write_set(batch)
        slots = list(rows["slots"])
        for i, (req, _) in enumerate(self.rows(batch)):
            if batch.kind == "prefill" and req.fed == 0:
                slots[i] = req.slot % self.pool.capacity + 1  # the index seeded from the wrong group's size
        return dict(rows, slots=slots)


class WrongSeedSlot(_Rows):
    """vLLM #53142 (#55600): a new request's running state index is seeded from another group's
    block size, so its first step restores and writes an unrelated slot's state."""

    forward_cls = _WrongSeed
