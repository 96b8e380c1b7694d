"""The ledger's lane (`runtime/ledger/ledger_lane.py`, `_ledger_lane.c`): the usual alloc, apply
and fence in one C call each. A ledger on its lane and one on its Python get the same calls
(random workloads over a shuffled free ring: scattered ids, wraps, refusals, fences of steps
not yet finished); after every call they agree on the outcome and on every column, counter, the
free list, the recorder and the fence lists. The lane runs none of the ledger's Python for the
usual call, steps aside for a class whose methods changed, and a write interrupted inside it
leaves the ledger refusing."""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import pytest

from slotwarden.model.errors import LifecycleError
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.ledger import ledger as ledger_module
from slotwarden.runtime.ledger import ledger_lane
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.ledger.recorder import FlightRecorder
from slotwarden.runtime.ledger.state import WriteInterrupted
from ledger_paths import state

pytestmark = pytest.mark.skipif(
    ledger_lane.LedgerLane is None or SlotLedger(1).mover is None, reason="the ledger's lane is not built here"
)
CAP = 256
LEDGER = os.path.dirname(ledger_module.__file__) + os.sep


def _shuffled(ledger: SlotLedger, seed: int) -> SlotLedger:
    """Every slot taken and given back in a seeded order (allocs then hand out scattered ids)."""
    a = Actor.request(99)
    ids = ledger.alloc(CAP, a)
    ledger.apply(Event.ROLLBACK, np.random.default_rng(seed).permutation(ids), a)
    return ledger


def _program(seed: int, rounds: int = 60) -> list:
    """Requests interleaved: each takes slots, then admits and finishes, retracts or aborts them,
    or rolls them back (now and then naming them shuffled, twice, with a slot not theirs, or as
    a run of slots); steps launched and fenced between, finished or not."""
    rnd = random.Random(seed)
    scripts = []
    for r in range(rounds):
        ends = rnd.choice(((Event.ROLLBACK,), (Event.ADMIT, Event.FINISH), (Event.ADMIT, Event.RETRACT),
                           (Event.ADMIT, Event.ABORT), (Event.ADMIT, Event.FINISH)))  # fmt: skip
        script = [("alloc", rnd.randrange(1, 12), r)]
        for event in ends:
            how = rnd.choice(("batch",) * 12 + ("shuffled", "shuffled", "twice", "foreign", "run"))
            script.append(("apply", event, r, how, rnd.random()))
        scripts.append(script)
    ops = []
    while scripts:
        script = rnd.choice(scripts)
        ops.append(script.pop(0))
        if not script:
            scripts.remove(script)
        if rnd.random() < 0.25:
            ops.append(rnd.choice((("launch", rnd.random() < 0.6), ("fence",), ("finish steps",))))
    return ops


def _call(ledger: SlotLedger, op, finished: list, batches: dict):
    try:
        if op[0] == "alloc":
            got = ledger.alloc(op[1], Actor.request(op[2]))
            if got is not None:
                batches[op[2]] = got.copy()
        elif op[0] == "apply":
            _, event, r, how, u = op
            ids = batches.get(r, np.zeros(0, dtype=np.int64)).copy()
            if how == "shuffled":
                ids = ids[np.random.default_rng(int(u * 1000)).permutation(ids.size)]
            elif how == "twice" and ids.size:
                ids = np.append(ids, ids[0])
            elif how == "foreign":
                ids = np.append(ids, 1 + int(u * CAP))
            elif how == "run":
                ids = np.arange(1 + int(u * CAP / 2), 1 + int(u * CAP / 2) + 5, dtype=np.int64)
            got = ledger.apply(event, ids, Actor.request(r))
        elif op[0] == "launch":
            box = [op[1]]
            finished.append(box)
            got = ledger.launch(lambda: box[0])
        elif op[0] == "finish steps":
            for box in finished:
                box[0] = True
            got = None
        else:
            got = ledger.fence()
    except LifecycleError as err:
        return ("raised", type(err).__name__, str(err))
    return ("ok", None if got is None else np.asarray(got).tolist())


def _fence_lists(ledger: SlotLedger) -> dict:
    return {step: sorted(int(s) for ids in chunks for s in ids) for step, chunks in sorted(ledger._waiting.items())}


def first_difference(program, seed: int, lane=None) -> str | None:
    """Where a ledger on its lane and one on its Python first disagree (None: never). `lane(ledger)`
    binds the lane under test (default: the ledger's own)."""
    on_lane, python = _shuffled(SlotLedger(CAP), seed), _shuffled(SlotLedger(CAP), seed)
    ledger_lane.unbind(python)
    if lane is not None:
        lane(on_lane)
    boxes: dict = {id(on_lane): ([], {}), id(python): ([], {})}
    for i, op in enumerate(program):
        got = [_call(g, op, *boxes[id(g)]) for g in (on_lane, python)]
        if got[0] != got[1]:
            return f"op {i} {op}: lane {got[0]}, python {got[1]}"
        if state(on_lane) != state(python) or _fence_lists(on_lane) != _fence_lists(python):
            return f"op {i} {op}: the ledgers differ after it"
    return None


@pytest.mark.parametrize("seed", range(12))
def test_the_lane_and_the_python_agree_on_every_call(seed):
    assert first_difference(_program(seed), seed) is None


def _blind_to_fences(ledger: SlotLedger) -> None:
    """A broken lane: built blind to the states that wait for a fence (releases never filed)."""
    waits = ledger._waits
    ledger._waits = frozenset()
    try:
        ledger._lane = ledger_lane.bind(ledger, ledger_module._ORIGINALS, ledger_module._already_done)
    finally:
        ledger._waits = waits


def test_a_lane_blind_to_fences_is_caught():
    """The comparison can fail: a lane that files no release disagrees at the next fence."""
    found = [first_difference(_program(seed), seed, _blind_to_fences) for seed in range(4)]
    assert any(found), found


def test_the_lane_is_bound_over_the_usual_calls():
    ledger = SlotLedger(8)
    assert ledger_lane.is_bound(ledger)
    assert all(type(getattr(ledger, name)).__name__ == "builtin_function_or_method" for name in ledger_lane.BOUND)
    ledger_lane.unbind(ledger)
    assert not ledger_lane.is_bound(ledger) and ledger.alloc.__func__ is SlotLedger.alloc


def _python_frames(call) -> list:
    """The ledger's Python functions entered during `call()`."""
    entered = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(LEDGER):
            entered.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def test_the_usual_calls_run_none_of_the_ledgers_python():
    ledger, r = SlotLedger(64), Actor.request(1)
    ledger.check_thread()
    ids = ledger.alloc(5, r)
    calls = {
        "alloc": lambda: ledger.alloc(7, r),
        "admit": lambda: ledger.apply(Event.ADMIT, ids, r),
        "finish": lambda: ledger.apply(Event.FINISH, ids, r),
        "fence": lambda: ledger.fence(),
    }
    ledger.launch()
    for name, call in calls.items():
        assert _python_frames(call) == [], name
    assert ledger.available() == 64 - 7 and ledger.audit().clean
    ledger_lane.unbind(ledger)  # the Python path, for contrast
    assert "_move" in _python_frames(lambda: ledger.alloc(3, r))


def test_a_class_whose_methods_change_keeps_to_its_python(monkeypatch):
    ledger, r = SlotLedger(16), Actor.request(1)
    seen = []
    original = SlotLedger._settle

    def counting(self, *args, **kwargs):
        seen.append(args[0].tolist())
        return original(self, *args, **kwargs)

    ids = ledger.alloc(4, r)
    monkeypatch.setattr(SlotLedger, "_settle", counting)  # after the lane was bound
    ledger.apply(Event.ROLLBACK, ids, r)
    assert seen == [ids.tolist()]
    monkeypatch.undo()  # the class is SlotLedger's own again: the lane takes the calls again
    ids = ledger.alloc(4, r)
    seen.clear()
    ledger.apply(Event.ROLLBACK, ids, r)
    assert seen == [] and ledger.available() == 16


class _RaisingRecorder:
    """A trace's recorder whose `record` raises (an interrupt as the lane records its write)."""

    def record(self, *args):
        raise KeyboardInterrupt("as the batch is recorded")


@pytest.mark.parametrize("call", ["alloc", "apply", "fence"])
def test_a_write_interrupted_inside_the_lane_leaves_the_ledger_refusing(call):
    ledger, r = SlotLedger(16), Actor.request(1)
    ids = ledger.alloc(4, r)
    ledger.apply(Event.ADMIT, ids, r)
    ledger.apply(Event.FINISH, ids, r)
    ledger.launch()
    ledger.recorder = _RaisingRecorder()
    run = {"alloc": lambda: ledger.alloc(5, r), "fence": lambda: ledger.fence()}
    if call == "apply":  # a batch it may move: taken afresh, the recorder swapped in after
        ledger.recorder = FlightRecorder()
        ids = ledger.alloc(4, Actor.request(2))
        ledger.recorder = _RaisingRecorder()
        run["apply"] = lambda: ledger.apply(Event.ADMIT, ids, Actor.request(2))
    with pytest.raises(KeyboardInterrupt):
        run[call]()
    with pytest.raises(WriteInterrupted):
        ledger.audit()


def test_a_refused_call_changes_nothing_and_raises_the_models_error():
    ledger, r = SlotLedger(16), Actor.request(1)
    ids = ledger.alloc(6, r)
    before = state(ledger)
    with pytest.raises(LifecycleError) as refused:
        ledger.apply(Event.ADMIT, ids, Actor.request(2))  # not its slots
    assert state(ledger) == before and str(ids[0].item()) in str(refused.value)


def test_a_turn_of_the_ring_and_a_fence_of_scattered_slots_agree():
    """Allocs that pass the ring's end (the ring turned) and a fence of scattered released slots
    (filed as an array, sorted by the fence), on a ledger of 16 slots."""
    r1, r2 = Actor.request(1), Actor.request(2)

    def run(ledger):
        out = []
        ids = ledger.alloc(10, r1)
        out.append(ledger.apply(Event.ROLLBACK, ids[::-1].copy(), r1).tolist())
        ids = ledger.alloc(10, r2)  # from slot 11 on: past the ring's end
        out.append(ids.tolist())
        ledger.apply(Event.ADMIT, ids, r2)
        ledger.launch()
        ledger.apply(Event.FINISH, ids, r2)
        out.append(ledger.fence().tolist())
        return out, state(ledger), _fence_lists(ledger)

    python = SlotLedger(16)
    ledger_lane.unbind(python)
    got, want = run(SlotLedger(16)), run(python)
    assert got == want
    assert got[0][1] != sorted(got[0][1]) and got[0][2] == sorted(got[0][1])  # scattered, freed in id order


def _outcome(ledger, call):
    try:
        got = call(ledger)
    except Exception as err:  # noqa: BLE001 (the outcome is compared)
        return ("raised", type(err).__name__, str(err))
    return ("ok", None if got is None else np.asarray(got).tolist())


def _agree(setup, call, capacity: int = 16):
    """The outcome of `call` on a ledger on its lane and on one on its Python, after `setup`."""
    out = []
    for on_lane in (True, False):
        ledger = SlotLedger(capacity)
        if not on_lane:
            ledger_lane.unbind(ledger)
        setup(ledger)
        out.append((_outcome(ledger, call), state(ledger), _fence_lists(ledger)))
    return out


R = Actor.request(1)


def _taken(ledger):
    ledger.alloc(8, R)


def _released(ledger):
    ids = ledger.alloc(8, R)
    ledger.apply(Event.ADMIT, ids, R)
    ledger.launch()
    ledger.apply(Event.FINISH, ids, R)


def _small(value):
    def setup(ledger):
        _taken(ledger)
        ledger.small = value

    return setup


CORNERS = {  # what an adversarial review found the lane doing otherwise (each crashed or differed)
    "ids in swapped byte order": (_taken, lambda g: g.apply(Event.ROLLBACK, np.arange(1, 9).astype(">i8"), R)),
    "an empty batch, small < 0": (_small(-1), lambda g: g.apply(Event.ROLLBACK, np.zeros(0, np.int64), R)),
    "alloc(0), small < 0": (_small(-1), lambda g: g.alloc(0, R)),
    "a huge small": (_small(2**63), lambda g: g.apply(Event.ROLLBACK, np.arange(1, 9), R)),
    "a float small": (_small(2.0), lambda g: g.apply(Event.ROLLBACK, np.arange(1, 9), R)),
    "no free list of its own": (
        lambda g: (_taken(g), setattr(g, "has_free_list", False)),
        lambda g: g.apply(Event.ROLLBACK, np.arange(1, 9), R),
    ),
    "a fence of a step never launched": (
        lambda g: (_released(g), g.fence(), g._pending.__setitem__(g.launched + 1, lambda: True)),
        lambda g: g.fence(),
    ),
}


@pytest.mark.parametrize("name", CORNERS)
def test_the_lane_and_the_python_agree_at_the_corners(name):
    setup, call = CORNERS[name]
    on_lane, python = _agree(setup, call)
    assert on_lane == python


def test_an_unbound_lane_refuses_without_crashing():
    lane = ledger_lane.LedgerLane.__new__(ledger_lane.LedgerLane)
    for call in (lambda: lane.alloc(5, R), lambda: lane.apply(Event.ADMIT, np.arange(1, 4), R), lane.fence):
        with pytest.raises(RuntimeError, match="bound to no ledger"):
            call()


def test_a_copy_of_a_ledger_keeps_its_own_counters():
    import copy

    ledger = SlotLedger(16)
    twin = copy.copy(ledger)
    assert not ledger_lane.is_bound(twin) and ledger_lane.is_bound(ledger)
    twin.alloc(4, R)
    assert ledger.snapshot()["counters"][:2] == (0, 16)
