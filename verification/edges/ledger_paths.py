"""The ledger's side paths, each where a move's outcome is decided off the main lane:
- the compiled move is in use wherever its extension is built (and not left out on purpose);
- `alloc(n)` hands out n distinct slots on every n, on the ledger's lane and on its Python (whose
  one-slot inline path takes n = 1 only);
- a ledger without a free list (a guard's) keeps none when a batch frees slots;
- bad ids are refused as bad ids first, before an alloc by id or a fence too early;
- the lock record refuses an unlock by a request holding no lock on a slot others lock, and
  a batch of unlocks a slot at a time takes one lock each;
- a refused batch counts its other refused slots in words; a slot's history is its own;
- `PoolConfig` refuses an empty or non-tuple `conv_dims`;
- the model's named triggers, without `target`/`epoch`, move as `fire` and `step` do.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np

from slotwarden.model.errors import BadSlotId, FenceError, IllegalMove
from slotwarden.model.machine import SlotMachine
from slotwarden.model.step import step
from slotwarden.model.vocabulary import FREE_SLOT, Actor, Event, State
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.ledger import compiled, ledger_lane
from slotwarden.runtime.ledger.ledger import SlotLedger

R1, R2, R3 = Actor.request(1), Actor.request(2), Actor.request(3)


def problems() -> list[str]:
    return (
        _compiled_in_use()
        + _allocs()
        + _no_free_list()
        + _bad_ids_first()
        + _lock_record()
        + _unlocks()
        + _words()
        + _configs()
        + _triggers()
    )


def _compiled_in_use() -> list[str]:
    built = importlib.util.find_spec("slotwarden.runtime.ledger._move") is not None
    wanted = built and os.environ.get("SLOTWARDEN_NUMPY_ONLY") != "1"
    used = SlotLedger(4).mover is not None
    if compiled.AVAILABLE is not wanted or used is not wanted:
        return [f"the compiled move: built {built}, AVAILABLE {compiled.AVAILABLE}, a ledger's mover {used}"]
    return []


def _allocs() -> list[str]:
    out = []
    for on_lane in (True, False):
        ledger = SlotLedger(8)
        if not on_lane:
            ledger_lane.unbind(ledger)
        for n in (1, 2, 3):
            before = ledger.available()
            ids = ledger.alloc(n, R1)
            if ids is None or len(set(ids.tolist())) != n or ledger.available() != before - n:
                got = None if ids is None else ids.tolist()
                out.append(f"alloc({n}) gave {got}, {ledger.available()} left of {before} (lane: {on_lane})")
    return out


def _no_free_list() -> list[str]:
    ledger = SlotLedger(4, free_list=False)
    ledger.apply(Event.ALLOC, [1, 2, 3], R1)
    ledger.apply(Event.ROLLBACK, [1, 2], R1)  # TAKEN -> FREE, a slot at a time
    if ledger.available() != 0 or ledger.free_list().size:
        return [f"a ledger with no free list holds {ledger.free_list().tolist()} after freeing slots 1, 2"]
    return []


def _bad_ids_first() -> list[str]:
    out = []
    for what, free_list, actor in (("an alloc by id", True, R1), ("a fence too early", False, Actor.fence(5))):
        ledger = SlotLedger(64, free_list=free_list)
        ids = np.arange(1, ledger.small + 3, dtype=np.int64)  # past the per-slot path: the compiled lane's
        ids[-1] = 99
        try:
            ledger.apply(Event.ALLOC if free_list else Event.FENCE, ids, actor)
            out.append(f"{what} naming slot 99 of 64 is accepted")
        except BadSlotId as e:
            if e.slot_id != 99:
                out.append(f"{what} naming slot 99 of 64 is refused, but not as a bad id: {e}")
        except FenceError as e:
            out.append(f"{what} naming slot 99 of 64 is refused as a fence, not as a bad id: {e}")
    return out


def _lock_record() -> list[str]:
    ledger = SlotLedger(4)
    ids = ledger.alloc(1, R1)
    ledger.apply(Event.ADMIT, ids, R1)
    ledger.apply(Event.INSERT, ids, R1, 9)
    ledger.fence()
    _lock(ledger, Event.LOCK, ids, R2)
    try:
        _lock(ledger, Event.UNLOCK, ids, R3)
    except IllegalMove as e:
        if "holds no lock" not in e.reason:
            return [f"an unlock by a request holding no lock is refused as {e.reason!r}"]
    else:
        return ["an unlock by request 3, holding no lock on a slot request 2 locks, is accepted"]
    if ledger.record(1).readers != 1 or ledger.lock_holders(1) != {2}:
        return [f"a refused unlock changed the slot: {ledger.record(1)}, held by {set(ledger.lock_holders(1))}"]
    return []


def _unlocks() -> list[str]:
    ledger = SlotLedger(4)
    for r, node in ((1, 9), (2, 10)):
        ids = ledger.alloc(1, Actor.request(r))
        ledger.apply(Event.ADMIT, ids, Actor.request(r))
        ledger.apply(Event.INSERT, ids, Actor.request(r), node)
    ledger.fence()
    _lock(ledger, Event.LOCK, [1, 2], [3, 4], each=True)
    _lock(ledger, Event.LOCK, [1], [5], each=True)
    _lock(ledger, Event.UNLOCK, [1, 2], [3, 4], each=True)  # a slot at a time, two keys
    counts = [ledger.record(s).readers for s in (1, 2)]
    if counts != [1, 0] or ledger.lock_problems():
        return [f"locks 2 and 1, one each given back: counts {counts}, {ledger.lock_problems()}"]
    return []


def _lock(ledger: SlotLedger, event: Event, ids, request, each: bool = False) -> None:
    batch = ledger.lock_batch(event, ids, request, each)
    ledger.check_locks(batch.ids, batch.actors, batch.event)
    ledger.fire_locks(batch, ledger.apply, ledger.apply_each)


def _words() -> list[str]:
    out = []
    for ids, more in (([1], ""), ([1, 2, 3], "(and 2 more slots in this batch)")):
        try:
            SlotLedger(4).apply(Event.FINISH, ids, R1)
            out.append(f"a finish of the free slots {ids} is accepted")
        except IllegalMove as e:
            if ("more slots in this batch" in e.reason) is not bool(more) or more not in e.reason:
                out.append(f"a finish of the free slots {ids} says {e.reason.splitlines()[0]!r}")
    ledger = SlotLedger(4)
    ledger.alloc(1, R1)
    ledger.apply(Event.ADMIT, ledger.alloc(1, R2), R2)
    moves = [(m.event, m.before, m.after) for m in ledger.recorder.history(2)]
    if moves != [(Event.ALLOC, State.FREE, State.TAKEN), (Event.ADMIT, State.TAKEN, State.RUNNING)]:
        out.append(f"slot 2's history is {moves}: an alloc and an admit")
    return out


def _configs() -> list[str]:
    out = []
    for dims in ((), [256]):
        try:
            PoolConfig(num_slots=2, layers=1, conv_dims=dims)
            out.append(f"PoolConfig(conv_dims={dims!r}) is accepted")
        except ValueError as e:
            if "conv_dims" not in str(e):
                out.append(f"PoolConfig(conv_dims={dims!r}) is refused without naming the field: {e}")
    return out


def _triggers() -> list[str]:
    running = step(step(FREE_SLOT, Event.ALLOC, R1), Event.ADMIT, R1)
    machine = SlotMachine(slot=running)
    machine.finish(actor=R1)
    fired, stepped = SlotMachine(slot=running).fire(Event.FINISH, R1), step(running, Event.FINISH, R1)
    if not machine.record == fired == stepped:
        return [f"finish by its trigger gives {machine.record}, fire {fired}, step {stepped}"]
    return []
