"""check-trace's launch line: a launched step's write set, written by the pool and the guard
and judged offline against the slots as the trace left them."""

from __future__ import annotations

import io

import pytest
import torch

from slotwarden.cli.trace import check as check_trace
from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.trace import LaunchLine, TraceFormatError, TraceLine, TraceWriter, parse

CFG = PoolConfig(num_slots=4, layers=1, conv_dims=(4,), conv_kernel=2, heads=1, head_dim=2, state_size=2)
R1, R2 = Actor.request(1), Actor.request(2)


def lines(buf: io.StringIO) -> list:
    return [(n, parse(t, n)) for n, t in enumerate(buf.getvalue().splitlines(), 1)][1:]


def test_a_launch_line_round_trips_and_a_pad_actor_is_null():
    line = LaunchLine(3, (2, 0), (7, NOBODY), (2, 0))
    text = line.to_json()
    assert '"actors": [7, null]' in text and "sources" not in text and parse(text, 1) == line
    other = LaunchLine(3, (2,), (7,), (4,))
    assert parse(other.to_json(), 1) == other


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"step": 1, "event": "launch", "rows": [1]}', "lacks actors"),
        ('{"step": 1, "event": "launch", "rows": [1, 2], "actors": [1]}', "one per row"),
        ('{"step": 1, "event": "launch", "rows": [1.5], "actors": [1]}', "rows must be a list of integers"),
        ('{"step": 1, "event": "launch", "rows": [null], "actors": [1]}', "rows must be"),
        ('{"step": -1, "event": "launch", "rows": [1], "actors": [1]}', "step must be an integer >= 0"),
    ],
)
def test_a_malformed_launch_line_is_refused_naming_what_is_wrong(text, why):
    with pytest.raises(TraceFormatError, match=why):
        parse(text, 4)


def test_a_pools_launches_are_written_and_replay_clean():
    buf = io.StringIO()
    pool = StatePool(CFG, trace=TraceWriter(buf, CFG.num_slots))
    a, b = pool.alloc(1, R1), pool.alloc(1, R2)
    pool.admit(a, R1)
    pool.admit(b, R2)
    pool.launch(slots=[int(a), int(b), 0], actors=[1, 2, NOBODY])
    got = lines(buf)
    assert [type(x) for _, x in got].count(LaunchLine) == 1
    report = check_trace.check(got, capacity=4)
    assert not report.findings and report.events["launch"] == 1, check_trace.render(report, "pool")


def steps(*launch: LaunchLine) -> list:
    """Request 1 holds slot 1 and request 2 slot 2, both running; then the launch lines."""
    out = []
    for r, slot in ((R1, 1), (R2, 2)):
        out += [TraceLine(0, Event.ALLOC, (slot,), r), TraceLine(0, Event.ADMIT, (slot,), r)]
    return list(enumerate(out + list(launch), 1))


@pytest.mark.parametrize(
    "line, why",
    [
        (LaunchLine(1, (1, 2), (1, 2), (1, 2)), None),
        (LaunchLine(1, (1, 2, 0, 0), (1, 2, NOBODY, NOBODY), (1, 2, 0, 0)), None),
        (LaunchLine(1, (2,), (1,), (2,)), "request 2"),  # writes another's slot
        (LaunchLine(1, (1, 1), (1, 1), (1, 1)), "row 0 writes it too"),
        (LaunchLine(1, (1, 2), (1, NOBODY), (1, 2)), "row 1"),  # a pad row on a real slot
        (LaunchLine(1, (1, -1), (1, NOBODY), (1, -1)), "row 1"),  # -1 as a pad index
        (LaunchLine(1, (3,), (1,), (3,)), "row 0"),  # a free slot
        (LaunchLine(1, (1,), (1,), (2,)), "row 0"),  # reads another's slot
        (LaunchLine(1, (5,), (1,), (5,)), "row 0"),  # past the pool
    ],
    ids=["ok", "padded", "foreign", "twice", "pad-off-pad", "minus-one", "free", "foreign-read", "past"],
)
def test_each_bad_row_of_a_launch_is_a_finding(line, why):
    report = check_trace.check(steps(line), capacity=4)
    if why is None:
        assert not report.findings, check_trace.render(report, "t")
        return
    assert report.findings[0].lineno == 5 and why in report.findings[0].error
    assert "launch" in check_trace.render(report, "t")


def test_a_copy_source_must_be_locked_by_the_reader():
    """Request 3 reads cached slot 1 (published by request 1) into its own slot 2: only with a lock on it."""
    r3 = Actor.request(3)
    base = [TraceLine(0, Event.ALLOC, (1,), R1), TraceLine(0, Event.ADMIT, (1,), R1)]
    base += [TraceLine(1, Event.INSERT, (1,), R1, 9), TraceLine(1, Event.ALLOC, (2,), r3)]
    base += [TraceLine(1, Event.ADMIT, (2,), r3), TraceLine(2, Event.FENCE, (1,), Actor.fence(1))]
    launch = LaunchLine(2, (2,), (3,), (1,))
    unlocked = check_trace.check(list(enumerate(base + [launch], 1)), capacity=4)
    locked = check_trace.check(list(enumerate(base + [TraceLine(1, Event.LOCK, (1,), r3), launch], 1)), capacity=4)
    assert unlocked.findings[0].lineno == 7 and "row 0" in unlocked.findings[0].error
    assert not locked.findings, check_trace.render(locked, "locked")
    unlock = TraceLine(2, Event.UNLOCK, (1,), r3)
    again = check_trace.check(list(enumerate(base + [TraceLine(1, Event.LOCK, (1,), r3), unlock, launch], 1)), 4)
    assert again.findings[0].lineno == 9


class _Engine:
    def __init__(self, n: int):
        self.free_slots = list(range(1, n + 1))

    def alloc(self, n):
        out, self.free_slots = self.free_slots[:n], self.free_slots[n:]
        return torch.tensor(out, dtype=torch.int64)

    def free(self, ids):
        self.free_slots += ids.tolist()

    def available_size(self):
        return len(self.free_slots)


def test_the_guard_writes_the_write_set_it_accepted_and_not_one_it_refused():
    buf = io.StringIO()
    guard = LedgerGuard(_Engine(4), 4, trace=TraceWriter(buf, 4))
    a = guard.alloc(1, R1)
    guard.fire(Event.ADMIT, a, R1)
    guard.check_step(torch.tensor([int(a), 0]), [1, NOBODY])
    with pytest.raises(Exception):
        guard.check_step([int(a)], [2])
    got = lines(buf)
    launches = [x for _, x in got if type(x) is LaunchLine]
    assert launches == [LaunchLine(1, (int(a), 0), (1, NOBODY), (int(a), 0))]
    assert not check_trace.check(got, capacity=4).findings


def test_a_scheduler_workloads_launches_replay_clean_and_a_stale_row_does_not(monkeypatch):
    """Every step of a real workload (sessions, retractions, padding) is written and judged
    clean; the same trace with one row moved to a slot its request no longer holds is not."""
    from slotwarden.bench.workload import WorkloadSpec
    from slotwarden.cli import demo
    from slotwarden.runtime.trace import attach

    buf, make = io.StringIO(), demo.build_scheduler

    def traced(*args, **kw):
        sched = make(*args, **kw)
        attach(sched.pool.ledger, TraceWriter(buf, sched.pool.capacity))
        return sched

    monkeypatch.setattr(demo, "build_scheduler", traced)
    demo.simulate(WorkloadSpec(sessions=3, requests=8, seed=1), slots=4, device="cpu", overlap=True, progress=False)
    got = lines(buf)
    report = check_trace.check(got, capacity=4)
    assert report.events["launch"] > 10 and not report.findings, check_trace.render(report, "workload")
    k = next(i for i, (_, x) in enumerate(got) if type(x) is LaunchLine and NOBODY not in x.actors)
    n, line = got[k]
    wrong = 1 + line.slots[0] % 4  # another slot than the row's own
    broken = line._replace(slots=(wrong,) + line.slots[1:], sources=(wrong,) + line.sources[1:])
    report = check_trace.check(got[:k] + [(n, broken)] + got[k + 1 :], capacity=4)
    assert report.findings and report.findings[0].lineno == n


def test_the_docs_launch_example_parses():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "traces.md").read_text()
    example = doc.split("**`launch`**", 1)[1].split("```json\n", 1)[1].split("```", 1)[0].strip()
    assert parse(example, 1) == LaunchLine(4, (1, 3, 0), (7, 8, NOBODY), (1, 2, 0))
