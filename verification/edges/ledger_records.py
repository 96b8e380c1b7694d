"""The ledger's records and tables, as read back through its public API:
- the audit names at most the first 8 slots holding no declared state, and a leak's last
  event is an `Event` for a declared code and the plain code otherwise (never an error);
- a batch naming a slot twice is refused naming that slot, not the batch's first;
- a LOCK batch longer than the pool is refused by its length as a lock, not as an unlock;
- `state_of` of an empty batch is an empty array;
- the flight recorder numbers its batches 1, 2, 3, ...; its default depth is the ledger's;
  the actors of a per-slot batch it keeps are frozen and hashable;
- a move keeps a stray fence or lock count on a slot whose state holds them clear, on the
  per-slot, run, compiled and numpy paths alike (a move does not repair what it did not cause);
- the compiled event tables and their write sources are read-only arrays;
- the recorder reads back every batch in one form on every path: read-only arrays, the
  states before one int when the slots shared one, else each slot's;
- the compiled move's refusals decode (`compiled.refusal`) to their position and named code.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from slotwarden.model.errors import BadSlotId
from slotwarden.model.vocabulary import NOBODY, Actor, Event, State
from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.ledger.recorder import FlightRecorder
from slotwarden.runtime.ledger.tables import compile_events, sources_of
from slotwarden.verification.edges.ledger_fast_paths import LANES, lane_ledger

R1 = Actor.request(1)


def problems() -> list[str]:
    return (
        _undeclared()
        + _last_events()
        + _duplicates()
        + _lock_lengths()
        + _empty_state_of()
        + _recorder()
        + _stray_fields()
        + _read_only()
        + _kernel_codes()
        + _one_form()
    )


def _one_form() -> list[str]:
    out = []
    for lane in LANES:
        ledger = lane_ledger(lane, 10)
        ids = ledger.alloc(6, R1)
        ledger.apply(Event.ADMIT, ids, R1)
        ledger.apply(Event.ADMIT, ledger.alloc(1, R1), R1)  # one slot
        mixed = np.concatenate((ids[5:], ledger.alloc(2, R1)))  # RUNNING, TAKEN, TAKEN
        ledger.apply(Event.ABORT, mixed, R1)
        ledger.launch()
        ledger.apply(Event.INSERT, ids[:2], R1, 7)  # cached at step 1, then evicted at step 2:
        ledger.launch()  # filed under two steps
        ledger.apply(Event.EVICT, ids[:2], Actor.cache(7))
        ledger.apply(Event.FINISH, ids[2::2], R1)  # released, not one run
        ledger.fence()
        for e in ledger.recorder.entries:
            what = f"{lane} path: the record of {e.event.name} of {e.ids.tolist()}"
            if e.ids.flags.writeable or e.after.flags.writeable:
                out.append(f"{what} can be written through its ids or states after")
            shared = np.ndim(e.before) == 0
            if e.event is Event.ABORT and (shared or e.before.tolist() != [State.RUNNING, State.TAKEN, State.TAKEN]):
                out.append(f"{what} keeps the states before as {e.before!r}, not RUNNING, TAKEN, TAKEN")
            if not shared and (e.before.flags.writeable or (e.before.size and (e.before == e.before[0]).all())):
                out.append(f"{what} keeps the states before as {e.before!r}, not one int")
    return out


KERNEL_CODES = (  # (what, ids, event, the slot made corrupt or 0, position, the code's name)
    ("a slot of no pool", (1, 9), Event.ALLOC, 0, 1, "NOT_A_SLOT"),
    ("a slot named twice", (1, 2, 2), Event.ALLOC, 0, 2, "TWICE"),
    ("a finish of FREE slots", (3, 4), Event.FINISH, 0, 0, "REFUSED"),
    ("a slot in no declared state", (5, 6), Event.ALLOC, 6, 1, "CORRUPT"),
)


def _kernel_codes() -> list[str]:
    if not compiled.AVAILABLE:  # nothing to decode ('ledger paths' says where it is built)
        return []
    out = []
    for what, ids, event, corrupt, where, name in KERNEL_CODES:
        ledger = SlotLedger(8)
        if corrupt:
            ledger.cols.state[corrupt] = len(State) + 3
        got = ledger.mover.move(event, np.array(ids, dtype=np.int64), 1, NOBODY, 0, None, None, None, True, True)
        want = (where, getattr(compiled, name))
        if got >= 0 or compiled.refusal(got) != want:
            told = compiled.refusal(got) if got < 0 else "accepted"
            out.append(f"the compiled move's code for {what} {list(ids)} decodes to {told}, not {want} ({name})")
    return out


def _undeclared() -> list[str]:
    ledger = SlotLedger(10)
    ledger.cols.state[1:] = 99
    named = [p for p in ledger.audit().problems if "hold no declared state" in p]
    if named != ["slots [1, 2, 3, 4, 5, 6, 7, 8] hold no declared state"]:
        return [f"ten slots of no declared state: the audit says {named}, not the first 8 of them"]
    return []


def _last_events() -> list[str]:
    ledger = SlotLedger(4)
    ledger.apply(Event.ADMIT, ledger.alloc(3, R1), R1)
    codes = (int(Event.FINISH), len(Event), 200)
    for s, code in enumerate(codes, start=1):
        ledger.cols.last_event[s] = code
    try:
        leaks = ledger.audit(set()).leaks
    except ValueError as e:
        return [f"an audit of leaks with last event codes {codes} raises ValueError: {e}"]
    got = [leak.last_event for leak in leaks]
    if got != [Event.FINISH, len(Event), 200] or [type(e) for e in got] != [Event, int, int]:
        return [f"leaks with last event codes {codes} give last events {got!r}"]
    return []


class Twice(NamedTuple):
    capacity: int
    ids: tuple
    slot: int  # the slot named twice


TWICE = (
    Twice(4, (1, 2, 2), 2),  # a slot at a time
    Twice(8, (1, 2, 3, 4, 3, 5), 3),  # the duplicate stamp
    Twice(8, (4, 6, 8, 6), 6),
)


def _duplicates() -> list[str]:
    out = []
    for case in TWICE:
        for ids in (list(case.ids), np.array(case.ids, dtype=np.int64)):
            try:
                SlotLedger(case.capacity).apply(Event.ALLOC, ids, R1)
                out.append(f"an alloc of {list(case.ids)} is accepted")
            except BadSlotId as e:
                if e.slot_id != case.slot or "named twice" not in str(e):
                    out.append(f"an alloc of {list(case.ids)} names slot {e.slot_id} twice, not {case.slot}: {e}")
    return out


def _lock_lengths() -> list[str]:
    ledger, n = SlotLedger(1), 256  # more than the 255 locks a pool of one slot can hold
    try:
        ledger.lock_batch(Event.LOCK, list(range(1, n + 1)), list(range(1, n + 1)), True)
    except BadSlotId as e:
        if e.event is not Event.LOCK or "unlock" in str(e):
            return [f"a lock batch of {n} ids on a pool of 1 is refused as {e.event!r}: {e}"]
        return []
    return [f"a lock batch of {n} ids on a pool of 1 is accepted"]


def _empty_state_of() -> list[str]:
    out = []
    for empty in ([], np.zeros(0, dtype=np.int64)):
        try:
            got = SlotLedger(4).state_of(empty)
            if got.size:
                out.append(f"state_of of an empty {type(empty).__name__} gives {got.tolist()}")
        except BadSlotId as e:
            out.append(f"state_of of an empty {type(empty).__name__} is refused: {e}")
    return out


def _recorder() -> list[str]:
    out = []
    ledger = SlotLedger(4)
    ledger.apply(Event.ADMIT, ledger.alloc(2, R1), R1)
    ledger.apply_each(Event.FINISH, [1, 2], [1, 1])
    seqs = [e.seq for e in ledger.recorder.entries]
    if seqs != [1, 2, 3] or ledger.recorder.seq != 3:
        out.append(f"three batches recorded as {seqs}, the recorder at {ledger.recorder.seq}")
    if FlightRecorder().depth != SlotLedger(4).recorder.depth:
        out.append(f"a flight recorder's default depth {FlightRecorder().depth} is not the ledger's")
    actors = ledger.recorder.entries[-1].actor
    try:
        hash(actors)
    except TypeError as e:
        out.append(f"the actors of a per-slot batch ({actors}) are not hashable: {e}")
    try:
        actors.ids = ()
        out.append(f"the actors of a recorded per-slot batch ({actors}) can be rewritten")
    except dataclasses.FrozenInstanceError:
        pass
    return out


class Stray(NamedTuple):
    lane: str
    check: str
    event: Event
    ids: tuple  # of slots 1..6, allocated by one request, corrupted, then moved by `event`
    running: tuple = ()  # the slots of `ids` admitted first


STRAYS = (
    Stray("per-slot", "strict", Event.ROLLBACK, (2,)),
    Stray("run", "strict", Event.ROLLBACK, (1, 2, 3)),
    Stray("compiled", "strict", Event.ROLLBACK, (1, 3, 6)),
    Stray("compiled, mixed", "strict", Event.ABORT, (1, 2, 4, 5), (2, 4)),
    Stray("numpy", "off", Event.ROLLBACK, (2, 4, 5)),
    Stray("numpy, mixed", "off", Event.ABORT, (1, 2, 4, 5), (2, 4)),
)


def _stray_fields() -> list[str]:
    """TAKEN and RUNNING hold the fence and the lock count clear; a rollback or an abort clears
    them (TAKEN -> FREE), or the lock count only (RUNNING -> RELEASED, which stamps a fence)."""
    out = []
    for case in STRAYS:
        ledger = SlotLedger(8, check=case.check)
        ledger.alloc(6, R1)
        if case.running:
            ledger.apply(Event.ADMIT, list(case.running), R1)
        ids = list(case.ids)
        ledger.cols.fence[ids], ledger.cols.readers[ids] = 7, 3
        ledger.apply(case.event, ids if len(ids) == 1 else np.array(ids, dtype=np.int64), R1)
        got = [ledger.record(s) for s in ids]
        if any(r.readers != 3 or (r.state is State.FREE and r.fence != 7) for r in got):
            kept = [(r.state.name, r.fence, r.readers) for r in got]
            out.append(f"{case.event.name.lower()} ({case.lane}) of slots with a stray fence 7, lock count 3: {kept}")
    return out


def _read_only() -> list[str]:
    out = []
    for event, table in compile_events().items():
        arrays = [a for a in table if isinstance(a, np.ndarray)] + list(sources_of(table))
        if any(a.flags.writeable for a in arrays):
            out.append(f"the compiled table of {event.name.lower()} or its sources can be written")
    return out
