"""The ledger's fast paths give the results of its general ones, on every lane they serve:
- a batch named by a view of the ledger's own owner column moves the slots it named then (the
  ledger reads a copy), on the compiled lane and the numpy path;
- an early fence of a long batch names its first 8 slots in its words;
- an alloc from a free list holding a slot that is not FREE (a corrupt ledger) is refused,
  naming that slot, with nothing changed, on every lane;
- an alloc interrupted as the free ring advances (on the ledger's lane, one C call: as its batch
  is recorded) leaves the ledger refusing every later call (`WriteInterrupted`), on every lane;
- with the per-slot path off and runs taken from one slot, allocs of 1 and 3 hand out slots;
- a mixed batch's look-up keeps the lock count's bound (a LOCK of a slot locked 255 times is
  refused) and a step's fence per slot (a FENCE of slots whose fences differ is refused at
  the slot waiting for a later step);
- the numpy kernel over columns without a shared state/event word writes both, as a ledger does.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

import numpy as np

from slotwarden.model.errors import FenceError, IllegalMove
from slotwarden.model.vocabulary import NOBODY, Actor, Event, Slot, State
from slotwarden.runtime.ledger import ledger_lane, ring, transition
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.ledger.state import WriteInterrupted

R1 = Actor.request(1)
LANES = ("lane", "compiled", "numpy", "per-slot")
"""The ledger's lane (`ledger_lane`, where built), its Python over the compiled move, the numpy path,
and the numpy path with batches of up to 4 a slot at a time."""
RING = os.path.abspath(ring.__file__)


class Planted(NamedTuple):
    """A slot planted before a batch: its id and record."""

    slot: int
    record: Slot


def problems() -> list[str]:
    return (
        _view_ids()
        + _early_fence_words()
        + _corrupt_free_list()
        + _interrupted_allocs()
        + _runs_from_one()
        + _full_lock()
        + _mixed_fences()
        + _columns_without_code()
    )


def lane_ledger(lane: str, capacity: int = 8, free_list: bool = True) -> SlotLedger:
    """A `SlotLedger` of `capacity` slots on `lane`, one of `LANES`."""
    ledger = SlotLedger(capacity, free_list=free_list)
    if lane == "lane":
        return ledger
    ledger_lane.unbind(ledger)
    if lane != "compiled":
        ledger.mover = None  # as built without the compiled move
    if lane == "per-slot":
        ledger.small = 4
    return ledger


def _records(ledger: SlotLedger) -> list[tuple]:
    return [tuple(ledger.record(s)) for s in range(1, ledger.capacity + 1)]


def _view_ids() -> list[str]:
    out = []
    for lane in ("compiled", "numpy"):
        ledger = lane_ledger(lane)
        for r in (1, 2, 3, 4):  # slot r owned by request r
            ledger.apply(Event.ADMIT, ledger.alloc(1, Actor.request(r)), Actor.request(r))
        ledger.launch(lambda: False)  # step 1 in flight: the slots finished now wait for its fence
        view = ledger.cols.owner[1:5]  # [1, 2, 3, 4], and cleared by the very move that reads it
        try:
            ledger.apply_each(Event.FINISH, view, [1, 2, 3, 4])
        except Exception as e:  # noqa: BLE001 (the outcome is judged)
            out.append(f"{lane}: a finish of slots 1..4 named by a view of the owner column raised {e!r}")
            continue
        want = [(State.RELEASED, NOBODY, NOBODY, 1, 0)] * 4 + [(State.FREE, NOBODY, NOBODY, 0, 0)] * 4
        last = ledger.recorder.entries[-1].ids.tolist()
        if _records(ledger) != want or last != [1, 2, 3, 4]:
            out.append(
                f"{lane}: a finish of slots 1..4 named by a view of the owner column left {_records(ledger)}, "
                f"recorded for {last}"
            )
    return out


def _early_fence_words() -> list[str]:
    ledger = SlotLedger(16, free_list=False)
    ids = np.arange(1, 11, dtype=np.int64)
    ledger.apply(Event.ALLOC, ids, R1)
    ledger.apply(Event.ADMIT, ids, R1)
    ledger.apply(Event.FINISH, ids, R1)
    try:
        ledger.apply(Event.FENCE, ids, Actor.fence(5))
    except FenceError as e:
        if "on slots [1, 2, 3, 4, 5, 6, 7, 8], but" not in str(e):
            return [f"an early fence of slots 1..10 names other slots than the first 8: {e}"]
        return []
    return ["an early fence of slots 1..10 (step 5, none launched) is accepted"]


def _corrupt_free_list() -> list[str]:
    out = []
    for lane in LANES:
        for n in (2, 4):
            ledger = lane_ledger(lane)
            ledger.cols.state[2], ledger.cols.owner[2] = int(State.RUNNING), 2  # held, yet on the free list
            before, free = _records(ledger), ledger.free_list().tolist()
            try:
                got = ledger.alloc(n, R1)
                out.append(f"{lane}: alloc({n}) from a free list holding the running slot 2 gave {got.tolist()}")
            except IllegalMove as e:
                if e.slot_id != 2 or _records(ledger) != before or ledger.free_list().tolist() != free:
                    out.append(
                        f"{lane}: alloc({n}) onto the held slot 2 was refused as slot {e.slot_id}, or changed it"
                    )
    return out


def _interrupted_allocs() -> list[str]:
    out = []
    for lane in LANES:
        for n in (2, 3):  # per-slot lane: 2 and 3 a slot at a time; else 3 as a batch
            ledger = lane_ledger(lane)
            ledger.check_thread()  # bound to this thread before the interrupted call
            if ledger_lane.is_bound(ledger):  # one C call: struck as it records
                if not _interrupt_at_record(ledger, lambda: ledger.alloc(n, R1)):
                    out.append(f"{lane}: alloc({n}) never recorded its batch")
                    continue
            elif not _interrupt_at_advance(lambda: ledger.alloc(n, R1)):
                out.append(f"{lane}: alloc({n}) never advanced the free ring")
                continue
            try:
                ledger.available()
                out.append(f"{lane}: after alloc({n}) was interrupted as the free ring advanced, the ledger answers")
            except WriteInterrupted:
                pass
    return out


def _interrupt_at_advance(call) -> bool:
    """`call()` with a KeyboardInterrupt raised at the first line of the free ring's advance:
    whether it was raised."""

    def local(frame, event, arg):
        if event == "line":
            raise KeyboardInterrupt("injected as the free ring advances")
        return local

    def tracer(frame, event, arg):
        code = frame.f_code
        return local if code.co_name == "_advance" and os.path.abspath(code.co_filename) == RING else None

    previous = sys.gettrace()  # coverage.py's tracer, where there is one: put back after
    sys.settrace(tracer)
    try:
        call()
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(previous)
    return False


class _Interrupting:
    """A trace's recorder whose `record` raises, as an interrupt would during the write."""

    def record(self, *args):
        raise KeyboardInterrupt("injected as the batch is recorded")


def _interrupt_at_record(ledger: SlotLedger, call) -> bool:
    """`call()` with a KeyboardInterrupt raised as the ledger records its batch: whether it was."""
    ledger.recorder = _Interrupting()
    try:
        call()
    except KeyboardInterrupt:
        return True
    return False


def _runs_from_one() -> list[str]:
    ledger = lane_ledger("numpy")
    ledger.small, ledger.run_min = 0, 1
    try:
        got = [ledger.alloc(1, R1).tolist(), ledger.alloc(3, R1).tolist()]
    except Exception as e:  # noqa: BLE001 (the outcome is judged)
        return [f"with no per-slot path and runs from one slot, an alloc raised {e!r}"]
    if got != [[1], [2, 3, 4]] or ledger.available() != 4:
        return [f"with no per-slot path and runs from one slot, allocs of 1 and 3 gave {got}"]
    return []


def _refused_at(lane: str, event: Event, actor: Actor, planted: tuple, slot: int, launched: int = 0) -> str:
    """'' if `event` by `actor` of the planted slots, on `lane`, is refused at `slot` with nothing
    changed; else what happened."""
    ledger = lane_ledger(lane)
    for _ in range(launched):
        ledger.launch()
    for p in planted:
        ledger.plant(p.slot, p.record)
    before = _records(ledger)
    ids = [p.slot for p in planted]
    try:
        ledger.apply(event, ids, actor)
    except IllegalMove as e:
        if e.slot_id == slot and _records(ledger) == before:
            return ""
        return f"{lane}: {event.name} of slots {ids} refused at slot {e.slot_id}, not {slot} (or changed them)"
    except Exception as e:  # noqa: BLE001 (the outcome is judged)
        return f"{lane}: {event.name} of slots {ids} by {actor} raised {type(e).__name__}: {e}"
    return f"{lane}: {event.name} of slots {ids} by {actor} is accepted, leaving {_records(ledger)[: len(ids)]}"


FULL_LOCK = (
    Planted(5, Slot(State.CACHED, 9, NOBODY, 0, 3)),
    Planted(6, Slot(State.CACHED, 9, NOBODY, 0, 255)),
    Planted(7, Slot(State.CACHED, 9, NOBODY, 0, 0)),
)
MIXED_FENCES = (  # step 3 launched and finished; a FENCE by step 2
    Planted(1, Slot(State.RELEASED, NOBODY, NOBODY, 2, 0)),
    Planted(2, Slot(State.RELEASED, NOBODY, NOBODY, 2, 0)),
    Planted(3, Slot(State.RELEASED, NOBODY, NOBODY, 3, 0)),
)


def _full_lock() -> list[str]:
    found = [_refused_at(lane, Event.LOCK, Actor.request(300), FULL_LOCK, 6) for lane in LANES]
    return [f"a lock of a slot locked 255 times: {p}" for p in found if p]


def _mixed_fences() -> list[str]:
    found = [_refused_at(lane, Event.FENCE, Actor.fence(2), MIXED_FENCES, 3, launched=3) for lane in LANES]
    return [f"a fence by step 2 of slots waiting for steps 2, 2, 3: {p}" for p in found if p]


def _columns_without_code() -> list[str]:
    ledger = SlotLedger(4, free_list=False)
    n = ledger.capacity + 1
    cols = transition.Columns(
        np.zeros(n, np.uint8),
        np.full(n, NOBODY, np.int64),
        np.full(n, NOBODY, np.int64),
        np.zeros(n, np.int32),
        np.zeros(n, np.uint8),
        np.zeros(n, np.uint8),
    )
    ids = np.array([1, 2, 3], dtype=np.int64)
    try:
        for event in (Event.ALLOC, Event.ADMIT):
            table = ledger.tables[event]
            transition.write(cols, table, transition.look_up(cols, table, ids, 1), event, 1, NOBODY, 0)
            ledger.apply(event, ids, R1)
    except Exception as e:  # noqa: BLE001 (the outcome is judged)
        return [f"the numpy kernel over columns without a state/event word raised {e!r}"]
    mine = [(int(cols.state[s]), int(cols.last_event[s]), int(cols.owner[s])) for s in range(1, n)]
    theirs = [
        (int(ledger.cols.state[s]), int(ledger.cols.last_event[s]), int(ledger.cols.owner[s])) for s in range(1, n)
    ]
    if mine != theirs:
        return [f"the numpy kernel over columns without a state/event word wrote {mine}, a ledger {theirs}"]
    return []
