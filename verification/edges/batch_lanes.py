"""The ledger's batch lanes agree: one script of many-slot batches on twin ledgers of 8 slots,
one over the compiled move and three without it (the numpy path as built, every batch on it
with the per-slot path off, and with runs taken from two slots on).

The script: allocs for one request and for each of several, admits of a run and per actor,
finishes of runs and of scattered ids while two steps are in flight (their releases filed
under two fences), a batch naming a slot twice, a reversed (negatively strided) array, a
fence of each step in turn, rollbacks of a run. After every call each twin gives the same
outcome (the same error, first line), the same record for every slot and the same free list, in order.
"""

from __future__ import annotations

import numpy as np

from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.ledger.ledger import SlotLedger

R1, R2, R3 = Actor.request(1), Actor.request(2), Actor.request(3)


def _script(led: SlotLedger, log: list) -> None:
    done = {1: False, 2: False}

    def call(what, thunk):
        try:
            got = thunk()
            got = (
                "ok" if got is None or isinstance(got, (int, np.integer)) else f"ok {sorted(np.asarray(got).tolist())}"
            )
        except Exception as e:  # noqa: BLE001 (the outcome, error included, is compared)
            got = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        records = [tuple(led.record(s)) for s in range(1, led.capacity + 1)]
        log.append((what, got, records, led.free_list().tolist()))

    call("alloc 4 for request 1", lambda: led.alloc(4, R1))
    call("alloc one each for 2, 2, 3, 3", lambda: led.alloc_each([2, 2, 3, 3]))
    call("admit the run 1..4", lambda: led.apply(Event.ADMIT, np.arange(1, 5), R1))
    call("admit 5..8 per actor", lambda: led.apply_each(Event.ADMIT, [5, 6, 7, 8], [2, 2, 3, 3]))
    call("launch step 1", lambda: led.launch(lambda: done[1]))
    call("finish the run 1..2", lambda: led.apply(Event.FINISH, np.arange(1, 3), R1))
    call("launch step 2", lambda: led.launch(lambda: done[2]))
    call("finish 3, 4 reversed", lambda: led.apply(Event.FINISH, np.array([4, 3])[::-1], R1))
    call("finish 5 and 7 per actor", lambda: led.apply_each(Event.FINISH, np.array([5, 7]), np.array([2, 3])))
    call("finish 6 twice", lambda: led.apply(Event.FINISH, [6, 8, 6], R2))
    call("finish 6 by request 2", lambda: led.apply(Event.FINISH, [6], R2))
    call("finish 8 by request 2", lambda: led.apply(Event.FINISH, np.array([8]), R2))
    call("fence step 2 early", lambda: led.fence(2))
    done[1] = True
    call("fence step 1", lambda: led.fence(1))
    done[2] = True
    call("fence every finished step", lambda: led.fence())
    taken = []
    call("alloc 3 for request 3", lambda: taken.append(led.alloc(3, R3)) or taken[0])
    call("roll back the run request 3 took", lambda: led.apply(Event.ROLLBACK, taken[0], R3))
    call("finish 8 by request 3", lambda: led.apply(Event.FINISH, [8], R3))
    call("fence the rest", lambda: led.fence())


def _lanes() -> dict:
    lanes = {}
    for name, small, run_min in (
        ("compiled", None, None),
        ("numpy", None, None),
        ("numpy, batched", 0, None),
        ("numpy, runs from 2", 0, 2),
    ):
        led = SlotLedger(8)
        if name != "compiled":
            led.mover = None  # as built without the compiled move
        if small is not None:
            led.small = small
        if run_min is not None:
            led.run_min = run_min
        lanes[name] = led
    return lanes


def problems() -> list[str]:
    logs = {}
    for name, led in _lanes().items():
        logs[name] = []
        _script(led, logs[name])
    ref = logs.pop("compiled")
    out = []
    for name, log in logs.items():
        for (what, got, rec, free), (_, got2, rec2, free2) in zip(ref, log):
            if (got, rec, free) != (got2, rec2, free2):
                out.append(f"{what}: compiled {got} free {free}; {name} {got2} free {free2}")
                break
    wrong = {w: g for w, g, *_ in ref if (w in REFUSED) != (not g.startswith("ok"))}
    if wrong:
        out.append(f"outcomes other than the declaration's: {wrong}")
    if sorted(ref[-1][3]) != list(range(1, 9)):
        out.append(f"after every slot came back the free list is {ref[-1][3]}")
    return out


REFUSED = {"finish 6 twice", "finish 8 by request 2", "fence step 2 early"}
