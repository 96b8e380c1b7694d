"""The drop-in allocator's calls give the same answers on every lane of the ledger under it.

One script of engine calls (allocs under `acting`, the usual frees of a rollback and of a
finished turn, a free while a step is in flight and its later fence, a free of a batch mixed
in state, the seed bug's free of a lent slot, a borrower's free of its running turn, int32
and empty frees, unattributed calls both refused and trusted, `alloc(0)`, `clear()` with
slots held and with none) runs on a `GuardedAllocator` with its C lane, on one with the
guard's Python methods over the compiled move, and on one without the compiled move (the
numpy and per-slot paths). After every call all give the same outcome (the same error, first
line), the same ledger records and the same engine free list, and each free moves its slots
as the declaration's free rule says (`model/free.py`): a refused free changes nothing.
"""

from __future__ import annotations

import torch

from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guarded_allocator import GuardedAllocator
from slotwarden.runtime.ledger.codes import SMALL

R1, R2, S5 = Actor.request(1), Actor.request(2), Actor.session(5)
IDS = torch.int64


def _script(a: GuardedAllocator, log: list) -> None:
    def call(what, actor, thunk):
        try:
            if actor is None:
                result = thunk()
            else:
                with a.acting(actor):
                    result = thunk()
            got = "ok" if not isinstance(result, torch.Tensor) else f"ok {result.tolist()}"
        except Exception as e:  # noqa: BLE001 (the outcome, error included, is compared)
            got = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        log.append((what, got, _records(a), sorted(a.allocator.free_slots.tolist())))

    held = {}
    call("alloc 2", R1, lambda: held.setdefault("two", a.alloc(2)))
    call("admit both", R1, lambda: a.admit(held["two"]))
    call("free one running (finish)", R1, lambda: a.free(held["two"][:1]))
    call("alloc one to roll back", R1, lambda: held.setdefault("r", a.alloc(1)))
    call("roll it back by its free", R1, lambda: a.free(held["r"]))
    call("alloc 1 more", R1, lambda: held.setdefault("one", a.alloc(1)))
    call("free a mixed batch (taken and running)", R1, lambda: a.free(torch.cat([held["one"], held["two"][1:]])))
    call("alloc 2 for a session", R1, lambda: held.setdefault("s", a.alloc(2)))
    call("admit them", R1, lambda: a.admit(held["s"]))
    call("park them", R1, lambda: a.park(held["s"], 5))
    call("lend one", S5, lambda: a.lend(held["s"][:1], 2))
    call("the seed bug: the borrower frees it", R2, lambda: a.free(held["s"][:1]))
    call("a stranger frees the parked one", R2, lambda: a.free(held["s"][1:]))
    finished = []
    call("launch a step", None, lambda: a.launch(done=lambda: bool(finished)))
    call("the borrower's turn runs", R2, lambda: a.admit(held["s"][:1]))
    call("the session frees the parked one mid-step", S5, lambda: a.free(held["s"][1:]))
    call("the borrower frees its running turn", R2, lambda: a.free(held["s"][:1]))
    call("the borrower's turn finishes", R2, lambda: a.fire(Event.FINISH, held["s"][:1]))
    call("an empty free", R1, lambda: a.free(torch.zeros(0, dtype=IDS)))
    call("an unattributed free, refused", None, lambda: a.free(held["s"][:1]))
    call("an unattributed alloc, refused", None, lambda: a.alloc(1))
    call("alloc(0)", None, lambda: a.alloc(0))
    call("an int32 free by the session", S5, lambda: a.free(held["s"][:1].to(torch.int32)))
    call("clear with slots held", None, a.clear)
    call("the step finishes", None, lambda: finished.append(True))
    call("fence every finished step", None, lambda: a.fence())
    call("clear with none held", None, a.clear)
    trusted = GuardedAllocator(FreeList(4), unattributed="trust")
    call("a trusted unattributed alloc", None, lambda: held.setdefault("t", trusted.alloc(1)))
    call("a trusted unattributed free", None, lambda: trusted.free(held["t"]))
    call("an acting block entered twice", None, lambda: _twice(a))


def _twice(a: GuardedAllocator):
    block = a.acting(R1)
    with block:
        with block:
            pass


class PythonLane(GuardedAllocator):
    LANE = False  # the guard's Python methods, not bound to the C lane


def _records(a: GuardedAllocator) -> list:
    return [tuple(a.ledger.record(s)) for s in range(1, a.ledger.capacity + 1)]


LANES = ("C", "compiled", "numpy")  # the C lane (runtime/ledger/lane.py), its Python form, no compiled move


def allocator(lane: str, size: int = 4) -> GuardedAllocator:
    """A `GuardedAllocator` over a `FreeList(size)` on `lane`, one of `LANES`."""
    a = (GuardedAllocator if lane == "C" else PythonLane)(FreeList(size))
    if lane == "numpy":
        a.ledger.mover, a.ledger.small = None, SMALL  # as built without the compiled move
    return a


def problems() -> list[str]:
    logs = {}
    for lane in LANES:
        a = allocator(lane)
        logs[lane] = []
        _script(a, logs[lane])
    out = []
    for lane in ("C", "compiled"):
        for (what, got, rec, free), (_, got2, rec2, free2) in zip(logs[lane], logs["numpy"]):
            if (got, rec, free) != (got2, rec2, free2):
                out.append(f"{what}: {lane} lane {got}, {free}; numpy lane {got2}, {free2}")
                break
    want = {  # the outcome the declaration's free rule and the contract give each call
        "free one running (finish)": "ok",
        "roll it back by its free": "ok",
        "the seed bug: the borrower frees it": "IllegalFree",
        "a stranger frees the parked one": "IllegalFree",
        "an unattributed free, refused": "Unattributed",
        "an unattributed alloc, refused": "Unattributed",
        "the borrower frees its running turn": "IllegalFree",
        "an int32 free by the session": "ok",
        "clear with slots held": "HeldSlots",
        "clear with none held": "ok",
        "a trusted unattributed free": "ok",
        "an acting block entered twice": "RuntimeError",
    }
    log = logs["compiled"]
    for i, (what, got, rec, free) in enumerate(log):
        if what in want and not got.startswith(want[what]):
            out.append(f"{what}: {got}, want {want[what]}")
        if not got.startswith("ok") and i and (rec, free) != log[i - 1][2:]:
            out.append(f"{what}: refused ({got[:60]}) but the ledger or the engine's free list changed")
    fenced = next(entry for entry in log if entry[0] == "fence every finished step")
    if fenced[3] != [1, 2, 3, 4] or any(r[0] != 0 for r in fenced[2]):
        out.append(f"after the last fence the engine's free list is {fenced[3]}, the ledger {fenced[2]}")
    return out
