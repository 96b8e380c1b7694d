"""A ledger used alone (as the drop-in allocator uses it) whose call is interrupted by an exception
at any line of its own code (a KeyboardInterrupt raised by a `sys.settrace` tracer at each line
event of runtime/ledger/'s frames, one run per line) is afterwards either consistent (its audit
passes, the batch is wholly applied or wholly not, and it goes on) or refuses every later call
with `WriteInterrupted` naming the write. Every call of a few small workloads is swept, on the
Python over the compiled move and on the numpy path, a slot at a time and in batches (the
ledger's lane runs none of these lines: tests/runtime/ledger/test_ledger_lane.py)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.ledger import ledger as ledger_module
from slotwarden.runtime.ledger import ledger_lane
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.ledger.state import WriteInterrupted

LEDGER = os.path.dirname(ledger_module.__file__) + os.sep
R1, R2, S5 = Actor.request(1), Actor.request(2), Actor.session(5)


def _running(n):
    def setup(ledger):
        ids = ledger.alloc(n, R1)
        ledger.apply(Event.ADMIT, ids, R1)
        ledger.launch()  # a step in flight: what is released now waits for its fence

    return setup


def _released(n):
    def setup(ledger):
        _running(n)(ledger)
        ledger.apply(Event.FINISH, ledger.held_by(R1), R1)

    return setup


def _taken(ledger):
    ledger.alloc(5, R1)
    ledger.launch()


def _parked(ledger):
    _running(1)(ledger)
    ledger.apply(Event.PARK, [1], R1, 5)


def _nothing(ledger):
    pass


SCENARIOS = {  # (setup, the call swept)
    "alloc 1 (inline)": (_nothing, lambda g: g.alloc(1, R1)),
    "alloc 2 (per slot)": (_nothing, lambda g: g.alloc(2, R1)),
    "alloc 5 (batch)": (_nothing, lambda g: g.alloc(5, R1)),
    "alloc_each 3": (_nothing, lambda g: g.alloc_each([1, 2, 3])),
    "finish 1": (_running(1), lambda g: g.apply(Event.FINISH, [1], R1)),
    "finish 5": (_running(5), lambda g: g.apply(Event.FINISH, np.arange(1, 6), R1)),
    "rollback 5": (_taken, lambda g: g.apply(Event.ROLLBACK, [5, 4, 3, 2, 1], R1)),
    "abort each 4": (_running(4), lambda g: g.apply_each(Event.ABORT, [1, 2, 3, 4], [1, 1, 1, 1])),
    "fence 1": (_released(1), lambda g: g.fence()),
    "fence 5": (_released(5), lambda g: g.fence()),
    "lend 1": (_parked, lambda g: g.apply(Event.LEND, [1], S5, 2)),
}
LANES = ("compiled", "numpy")


def _ledger(lane: str, setup) -> SlotLedger:
    ledger = SlotLedger(8)
    ledger.check_thread()  # bound to this thread before the call swept
    ledger_lane.unbind(ledger)  # the Python's lines (the lane's C has none to strike)
    if lane == "numpy":
        ledger.mover = None
    setup(ledger)
    return ledger


def _state(ledger: SlotLedger) -> tuple:
    """What a batch write changes: the columns, the free list, the counters (but `completed`,
    which a fence stores after its write), the recorder, and the slots each fence list names
    that still wait for a fence."""
    snap = ledger.snapshot()
    head, count, launched, _ = snap.pop("counters")
    waits = ledger._waits_mask[ledger.cols.state]
    listed = {
        step: sorted(int(s) for ids in chunks for s in ids if waits[int(s)]) for step, chunks in ledger._waiting.items()
    }
    listed = {step: ids for step, ids in listed.items() if ids}
    entries = [(e.event, e.actor, e.ids.tolist(), e.after.tolist()) for e in ledger.recorder.entries]
    return {k: t.tolist() for k, t in snap.items()}, ledger.free_list().tolist(), launched, entries, listed


class Interrupter:
    """A tracer raising KeyboardInterrupt at the `at`-th line event of the ledger's frames
    (None: counts them)."""

    def __init__(self, at: int | None = None):
        self.at, self.seen = at, 0

    def __call__(self, frame, event, arg):
        return self.local if frame.f_code.co_filename.startswith(LEDGER) else None

    def local(self, frame, event, arg):
        if event == "line":
            self.seen += 1
            if self.seen == self.at:
                self.where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
                raise KeyboardInterrupt(f"line event {self.at}")
        return self.local


def _traced(call, ledger, tracer) -> BaseException | None:
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        call(ledger)
    except KeyboardInterrupt as exc:
        return exc
    finally:
        sys.settrace(previous)
    return None


def _refuses_everything(ledger: SlotLedger) -> str:
    """'' if every call raises WriteInterrupted naming the write, else the first that did not."""
    calls = {
        "audit": lambda: ledger.audit(),
        "alloc": lambda: ledger.alloc(1, R2),
        "alloc_each": lambda: ledger.alloc_each([7, 8]),
        "apply": lambda: ledger.apply(Event.ADMIT, [8], R2),
        "apply_each": lambda: ledger.apply_each(Event.ABORT, [8], [2]),
        "launch": lambda: ledger.launch(),
        "fence": lambda: ledger.fence(),
        "record": lambda: ledger.record(1),
        "free_list": lambda: ledger.free_list(),
        "state_of": lambda: ledger.state_of([1]),
        "held_by": lambda: ledger.held_by(R1),
        "snapshot": lambda: ledger.snapshot(),
        "checked_ids": lambda: ledger.checked_ids([1], "zero", R1),
        "lock_holders": lambda: ledger.lock_holders(1),
        "adopt": lambda: ledger.adopt(),
    }
    for name, call in calls.items():
        try:
            call()
        except WriteInterrupted as exc:
            if "batch write of this ledger was interrupted" not in str(exc):
                return f"{name}: {exc}"
            continue
        return f"{name} answered"
    ledger.check_owner()  # the thread alone (what a scheduler's collect asks) still answers
    return ""


def sweep(lane: str, name: str, neutral: bool = False) -> tuple[list, int, int]:
    """Every line event of the scenario's call: the failures, and how many runs ended
    consistent and how many refusing. `neutral`: the write's mark is the owner itself (no mark:
    the ledger as it was before it had one)."""
    setup, call = SCENARIOS[name]
    before = _state(_ledger(lane, setup))
    done = _ledger(lane, setup)
    call(done)
    after = _state(done)
    counter = Interrupter()
    _traced(call, _ledger(lane, setup), counter)
    failures, consistent, refusing = [], 0, 0
    for at in range(1, counter.seen + 1):
        ledger = _ledger(lane, setup)
        if neutral:
            ledger._marks = (ledger._thread,) * len(Event)
        tracer = Interrupter(at)
        if _traced(call, ledger, tracer) is None:
            failures.append(f"line event {at}: not interrupted")
            continue
        try:
            audit = ledger.audit()
        except WriteInterrupted:
            why = _refuses_everything(ledger)
            refusing += 1
            if why:
                failures.append(f"line event {at}: refuses, but {why}")
            continue
        state = _state(ledger)
        if not audit.clean or state not in (before, after):
            parts = [k for k, (x, y, z) in enumerate(zip(state, before, after)) if x != y and x != z]
            failures.append(f"line event {at} ({tracer.where}): audit {audit.problems}, parts {parts} neither")
            continue
        ledger.launch()
        ledger.fence()  # and it goes on
        if not ledger.audit().clean:
            failures.append(f"line event {at}: the audit fails after the next fence")
            continue
        consistent += 1
    return failures, consistent, refusing


@pytest.mark.parametrize("lane", LANES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_an_interrupt_at_any_line_leaves_the_ledger_consistent_or_refusing(lane, name):
    failures, consistent, refusing = sweep(lane, name)
    assert not failures, "\n".join(failures)
    assert consistent and refusing  # the sweep struck before, inside and after the write


@pytest.mark.parametrize("lane", LANES)
def test_without_the_mark_the_sweep_finds_half_written_ledgers(lane):
    """The ledger as it was (its writes unmarked): an interrupt between the columns and the free
    ring, fence lists or recorder leaves it half-written, its audit failing or its records
    neither before nor after, and it answers on."""
    found = {
        name: sweep(lane, name, neutral=True)[0]
        for name in ("alloc 1 (inline)", "alloc 5 (batch)", "finish 5", "fence 1")
    }
    assert all(found.values()), found
