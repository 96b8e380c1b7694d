"""The persistent decode batch (runtime/scheduler/rows.py): rows kept across steps, condensed
last-into-hole when a request leaves, newcomers at the end, rows kept as pad rows for a token in
flight, padding to captured sizes; the index it keeps is the one the launch check and the kernel
read."""

from dataclasses import dataclass

import numpy as np
import pytest

from slotwarden.model.vocabulary import NOBODY, PAD_SLOT
from slotwarden.runtime.scheduler.rows import PersistentBatch

from scheduling import make_scheduler


@dataclass(eq=False)
class Req:
    rid: int
    slot: int
    generation: int = 0


def decode(batch, reqs):
    step = batch.decode([(r, 1) for r in reqs])
    return [r.rid for r, _ in step.items], step.rows.tolist(), step.slots.tolist(), step.actors.tolist()


def leave(req):
    req.generation += 1


class IndexStaysWithRow(PersistentBatch):  # a broken variant: the condense forgets the index
    def _move(self, src, dst):
        pass


class PadsKeepTail(PersistentBatch):  # a broken variant: pad rows keep what the buffer held
    def _pad(self, rows):
        pass


def test_rows_are_kept_from_step_to_step():
    a, b, c = Req(0, 3), Req(1, 1), Req(2, 2)
    batch = PersistentBatch()
    assert decode(batch, [a, b, c]) == ([0, 1, 2], [0, 1, 2], [3, 1, 2], [0, 1, 2])
    assert decode(batch, [c, a, b]) == ([0, 1, 2], [0, 1, 2], [3, 1, 2], [0, 1, 2])  # whatever the batch's order


def condensed(cls):
    """a, b, c, d in rows 0..3; b leaves: d moves into row 1; then e comes: row 3."""
    a, b, c, d, e = Req(0, 4), Req(1, 2), Req(2, 1), Req(3, 3), Req(4, 2)
    batch = cls()
    decode(batch, [a, b, c, d])
    leave(b)
    after = decode(batch, [a, c, d])
    return after, decode(batch, [a, c, d, e])


def test_a_leaver_s_hole_takes_the_last_row_and_newcomers_append():
    after, grown = condensed(PersistentBatch)
    assert after == ([0, 3, 2], [0, 1, 2], [4, 3, 1], [0, 3, 2])
    assert grown == ([0, 3, 2, 4], [0, 1, 2, 3], [4, 3, 1, 2], [0, 3, 2, 4])


def test_the_check_fails_on_a_condense_that_forgets_the_index():
    after, _ = condensed(IndexStaysWithRow)
    assert after[2] == [4, 2, 1]  # row 1 still indexes b's slot: d would run on b's state
    assert after != condensed(PersistentBatch)[0]


def test_several_leavers_condense_lowest_hole_first():
    reqs = [Req(i, i + 1) for i in range(5)]
    batch = PersistentBatch()
    decode(batch, reqs)
    leave(reqs[0]), leave(reqs[2]), leave(reqs[4])
    assert decode(batch, [reqs[1], reqs[3]]) == ([3, 1], [0, 1], [4, 2], [3, 1])
    assert batch.condensed == 1  # row 4 was a leaver itself: only row 3 moved


def test_pad_rows_fill_up_to_the_captured_size_on_the_pad_slot():
    reqs = [Req(i, i + 1) for i in range(4)]
    batch = PersistentBatch(sizes=(1, 2, 4))
    assert decode(batch, reqs[:3])[2:] == ([1, 2, 3, PAD_SLOT], [0, 1, 2, NOBODY])
    decode(batch, reqs)
    leave(reqs[3])
    assert decode(batch, reqs[:3])[2:] == ([1, 2, 3, PAD_SLOT], [0, 1, 2, NOBODY])
    broken = PadsKeepTail(sizes=(1, 2, 4))
    decode(broken, reqs[:3]), leave(reqs[3]), reqs.__setitem__(3, Req(3, 4))
    decode(broken, reqs)
    leave(reqs[3])
    assert decode(broken, reqs[:3])[2] == [1, 2, 3, 4]  # the stale tail: row 3 still names slot 4


def test_a_request_with_its_token_in_flight_keeps_its_row_as_a_pad_row():
    a, b, c = Req(0, 1), Req(1, 2), Req(2, 3)
    batch = PersistentBatch()
    decode(batch, [a, b, c])
    assert decode(batch, [a, c]) == ([0, 2], [0, 2], [1, PAD_SLOT, 3], [0, NOBODY, 2])  # b: last token in flight
    leave(b)  # processed and finished: now its row closes up
    assert decode(batch, [a, c]) == ([0, 2], [0, 1], [1, 3], [0, 2])


def test_a_kept_row_back_in_the_batch_indexes_its_slot_again():
    a, b = Req(0, 1), Req(1, 2)
    batch = PersistentBatch()
    decode(batch, [a, b])
    decode(batch, [a])
    assert decode(batch, [a, b])[2] == [1, 2]


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_the_kernel_reads_the_index_the_launch_check_judged(overlap, padded, monkeypatch):
    """Requests of different budgets leave mid-batch: the rows condense, and every decode step's
    kernel indexes exactly the slots the launch check was handed, request rows on their slots."""
    sched = make_scheduler(slots=4, max_running=4, overlap=overlap, pad_to_captured=padded)
    judged, read = [], []
    launch, kernel = sched.pool.launch, sched.model.decode

    def spy_launch(done=None, **rows):
        judged.append(np.array(rows["slots"]))
        return launch(done, **rows)

    def spy_kernel(last, slots, conv, ssm):
        read.append((slots.cpu().numpy().copy(), len(judged)))
        return kernel(last, slots, conv, ssm)

    monkeypatch.setattr(sched.pool, "launch", spy_launch)
    monkeypatch.setattr(sched.model, "decode", spy_kernel)
    rids = [sched.submit([1 + i, 2, 3], 3 + i) for i in range(4)]  # row 0 leaves first
    results = sched.run(200)
    assert all(results[r].reason == "length" and len(results[r].output) == 3 + i for i, r in enumerate(rids))
    assert read and all(np.array_equal(slots, judged[n - 1]) for slots, n in read)
    assert sched.forward.batch.condensed
    if padded:
        assert all(len(slots) in (1, 2, 4) for slots, _ in read)


@pytest.mark.parametrize("overlap", [False, True])
def test_tokens_do_not_depend_on_the_rows(overlap):
    """The same workload with padding on and off, under condensing: bit-identical outputs."""
    runs = []
    for padded in (False, True):
        sched = make_scheduler(slots=4, max_running=4, overlap=overlap, pad_to_captured=padded)
        rids = [sched.submit([5 + i, 1 + i], 2 + 3 * (i % 3)) for i in range(7)]
        results = sched.run(300)
        runs.append([results[r].output for r in rids])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("broken", [IndexStaysWithRow, PadsKeepTail])
def test_a_broken_persistent_batch_is_refused_at_launch(broken):
    """The same workload over a batch whose condense forgets the index, or whose pad rows keep a
    stale tail (under overlap: the row of a token in flight): the launch check refuses a step."""
    from slotwarden.model.errors import IllegalStep

    sched = make_scheduler(slots=4, max_running=4, overlap=broken is PadsKeepTail, pad_to_captured=True)
    sched.forward.batch = broken(sched.forward.batch.sizes)
    for i in range(4):
        sched.submit([1 + i, 2, 3], 3 + i)
    with pytest.raises(IllegalStep):
        sched.run(200)


SEEN: dict = {}


class _Watched:
    """A scheduler that counts the rows' shapes its launches show (for the machine below)."""

    def _launch(self, batch):
        out = super()._launch(batch)
        step, rows = self.forward.planned, self.forward.batch
        if step.kind == "decode":
            SEEN["padded"] = SEEN.get("padded", 0) + (len(step.slots) > len(rows.entries))
            SEEN["in flight"] = SEEN.get("in flight", 0) + bool(rows.dark)
        SEEN["condensed"] = SEEN.get("condensed", 0) + rows.condensed
        return out


def test_the_scheduler_machine_reaches_padding_condensing_and_rows_in_flight():
    """The Hypothesis scheduler machine draws padded batches (even budgets), condensed rows
    (requests finishing, aborted or retracted mid-batch) and rows kept for a token in flight."""
    from slotwarden.runtime.scheduler.scheduler import Scheduler
    from slotwarden.verification.machines import machine_for
    from slotwarden.verification.machines.campaign import Budget, run_machine

    SEEN.clear()
    result = run_machine("rows", machine_for(type("Watched", (_Watched, Scheduler), {})), Budget(200, 25), seed=0)
    assert result.passed, result.error
    assert SEEN["padded"] and SEEN["condensed"] and SEEN["in flight"], SEEN
