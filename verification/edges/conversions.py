"""The ledger's conversions at their edges, through its public calls: each case below is a call
on a fresh ledger (4 slots, a free list) that either succeeds with the moves it names or raises
the typed error it names, whose text holds the words given (the argument, the bad value, why),
with the ledger's columns and counters unchanged. The values are the ones a caller can hand
over by mistake: ints beyond int64 (above and below), numpy and torch integer types, bools,
ragged lists, masked arrays, meta tensors, ranges longer than `sys.maxsize`, NOBODY (-1); and
the ledger's own arguments, allocs with no free list or past it, a call from another thread.
"""

from __future__ import annotations

import threading
from typing import Callable, NamedTuple

import numpy as np
import torch

from slotwarden.model.errors import BadActor, BadInput, BadSlotId, IllegalMove, WrongThread
from slotwarden.model.vocabulary import Actor, ActorKind, Event, State
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.ledger.ledger import SlotLedger

R1 = Actor.request(1)
BIG = 2**64


class Case(NamedTuple):
    what: str
    call: Callable  # (ledger) -> anything; the ledger holds slots 1, 2 ALLOCATED by request 1
    error: type | None  # None: it must succeed
    words: str = ""  # in the error's text
    states: tuple = ()  # on success: the states of slots 1..4 afterwards


def _admit(ids, actor=R1):
    return lambda led: led.apply(Event.ADMIT, ids, actor)


A, F = State.TAKEN, State.FREE
CASES = (
    # ids (`inputs.ids`)
    Case("ids below int64", _admit([1, -(2**64)]), BadSlotId, "slot ids must be integers, not object"),
    Case("ids above int64", _admit([1, BIG]), BadSlotId, "slot ids must be integers, not object"),
    Case("a uint64 id above int64", _admit(np.array([1, 2**63], dtype=np.uint64)), BadSlotId, f"slot id {2**63}"),
    Case("uint8 ids", _admit(np.array([1, 2], dtype=np.uint8)), None, states=(State.RUNNING,) * 2 + (F, F)),
    Case("a tuple with a bool", _admit((1, True)), BadSlotId, "not bool"),
    Case("a ragged list", _admit([1, [2, 3]]), BadSlotId, "not a batch of slot ids"),
    Case("a masked array", _admit(np.ma.masked_array([1, 2], mask=[0, 1])), BadSlotId, "a masked array"),
    Case("meta ids", _admit(torch.zeros(2, dtype=torch.int64, device="meta")), BadSlotId, "meta device"),
    Case("a 2-D tensor", _admit(torch.tensor([[1, 2]])), BadSlotId, "1-D, not of shape (1, 2)"),
    Case("float ids", _admit(np.array([1.0, 2.0])), BadSlotId, "must be integers, not float64"),
    Case("a range past sys.maxsize", _admit(range(1, 2**70)), BadSlotId, f"a batch of {2**70 - 1} ids"),
    Case("the pad slot", _admit([0]), BadSlotId, "slot 0 is the pad slot"),
    Case("int32 ids", _admit(torch.tensor([2, 1], dtype=torch.int32)), None, states=(State.RUNNING,) * 2 + (F, F)),
    # actors (`inputs.actor`)
    Case(
        "a kind given as its number",
        _admit([1], Actor(int(ActorKind.REQUEST), 1)),
        None,
        states=(State.RUNNING, A, F, F),
    ),
    Case("an unknown kind", _admit([1], Actor(9, 1)), BadActor, "unknown actor kind 9"),
    Case("an id that is a str", _admit([1], Actor(ActorKind.REQUEST, "1")), BadActor, "an actor id is an int, not str"),
    Case("NOBODY as an actor", _admit([1], Actor(ActorKind.REQUEST, -1)), BadActor, "-1 is NOBODY"),
    Case("an actor id above int64", _admit([1], Actor(ActorKind.REQUEST, 2**63)), BadActor, "an actor id is an int64"),
    Case("a numpy actor id", _admit([1], Actor(ActorKind.REQUEST, np.int64(1))), None, states=(State.RUNNING, A, F, F)),
    Case("not an Actor", _admit([1], ("request", 1)), BadActor, "not an Actor"),
    # a batch of actors (`inputs.actor_ids`)
    Case("an actor id per slot", lambda led: led.alloc_each([5, 6]), None, states=(A, A, A, A)),
    Case("actor ids of another length", lambda led: led.apply_each(Event.ADMIT, [1, 2], [1]), BadActor, "not 1"),
    Case(
        "meta actor ids",
        lambda led: led.apply_each(Event.ADMIT, [1], torch.zeros(1, device="meta", dtype=torch.int64)),
        BadActor,
        "meta device",
    ),
    Case(
        "tensor actor ids",
        lambda led: led.apply_each(Event.ADMIT, [1, 2], torch.tensor([1, 1])),
        None,
        states=(State.RUNNING,) * 2 + (F, F),
    ),
    Case(
        "bool actor ids", lambda led: led.apply_each(Event.ADMIT, [1], [True]), BadActor, "one int64 actor id for each"
    ),
    Case("ragged actor ids", lambda led: led.apply_each(Event.ADMIT, [1, 2], [1, [1]]), BadActor, "one int64 actor id"),
    Case(
        "uint64 actor ids above int64",
        lambda led: led.apply_each(Event.ADMIT, [1], np.array([2**63], dtype=np.uint64)),
        BadActor,
        "an actor id is an int64",
    ),
    Case(
        "NOBODY among actor ids",
        lambda led: led.apply_each(Event.ADMIT, [1, 2], np.array([1, -1])),
        BadActor,
        "NOBODY (-1)",
    ),
    # targets, counts, steps, capacities, live ids
    Case(
        "a numpy target",
        lambda led: (led.apply(Event.ADMIT, [1], R1), led.apply(Event.PARK, [1], R1, np.int64(3))),
        None,
        states=(State.PARKED, A, F, F),
    ),
    Case("a target above int64", lambda led: led.apply(Event.PARK, [1], R1, 2**63), BadInput, "a target is an id"),
    Case("a numpy count", lambda led: led.alloc(np.int32(2), Actor.request(2)), None, states=(A, A, A, A)),
    Case("a count of 0", lambda led: led.alloc(0, Actor.request(2)), BadInput, "bad count 0 for alloc"),
    Case("a numpy step", lambda led: led.fence(np.int64(0)), None, states=(A, A, F, F)),
    Case("a step below 0", lambda led: led.fence(-1), BadInput, "a step is an int >= 0"),
    Case("a capacity of 0", lambda led: SlotLedger(0), BadInput, "a capacity of at least 1 slot"),
    # the ledger's own arguments, its allocs by count and per request, its thread
    Case("a check mode", lambda led: SlotLedger(4, check="loose"), BadInput, "check must be one of ('strict', 'off')"),
    Case("a free_list flag", lambda led: SlotLedger(4, free_list="yes"), BadInput, "free_list is True or False"),
    Case("a recorder depth", lambda led: SlotLedger(4, recorder_depth=-1), BadInput, "recorder_depth is an int >= 0"),
    Case("a lifecycle", lambda led: SlotLedger(4, lifecycle=5), BadInput, "bad lifecycle 5: a Lifecycle declaration"),
    Case(
        "alloc with no free list",
        lambda led: SlotLedger(4, free_list=False).alloc(1, R1),
        BadSlotId,
        "keeps no free list",
    ),
    Case(
        "alloc_each, no free list",
        lambda led: SlotLedger(4, free_list=False).alloc_each([1] * 9),
        BadSlotId,
        "no free list",
    ),
    Case("alloc_each of more than the pool", lambda led: led.alloc_each([5] * 9), None, states=(A, A, F, F)),
    Case("alloc_each of more than is free", lambda led: led.alloc_each([5, 6, 7]), None, states=(A, A, F, F)),
    Case("alloc_each of nobody", lambda led: led.alloc_each([]), BadActor, "at least one request to allocate for"),
    Case("alloc_each of a range", lambda led: led.alloc_each(range(20)), BadActor, "bad actor_ids range(0, 20)"),
    Case("alloc_each of an int", lambda led: led.alloc_each(5), BadActor, "bad actor_ids 5 for alloc"),
    Case(
        "apply_each of an alloc",
        lambda led: led.apply_each(Event.ALLOC, [3], [1]),
        BadInput,
        "names no target and no step",
    ),
    Case(
        "apply_each of a park",
        lambda led: led.apply_each(Event.PARK, [1], [1]),
        BadInput,
        "names no target and no step",
    ),
    Case(
        "an alloc by a session", lambda led: led.alloc(1, Actor.session(1)), IllegalMove, "only a request may fire it"
    ),
    Case("a batch alloc by a session", lambda led: led.alloc(2, Actor.session(1)), IllegalMove, "only a request"),
    Case(
        "a call from another thread",
        lambda led: _elsewhere(lambda: led.apply(Event.ADMIT, [1], R1)),
        WrongThread,
        "single-threaded",
    ),
    Case("live ids not a collection", lambda led: led.audit(live_requests=5), BadInput, "a collection of ids"),
    Case("ragged live ids", lambda led: led.audit(live_requests=[1, [2]]), BadInput, "bad live_requests"),
)


def problems() -> list[str]:
    out = []
    for case in CASES:
        ledger = SlotLedger(4)
        ledger.alloc(2, R1)
        before = ledger.snapshot()
        try:
            case.call(ledger)
        except Exception as e:  # noqa: BLE001 (which error, and its words, are what is judged)
            if case.error is None or type(e) is not case.error or case.words not in str(e):
                out.append(f"{case.what}: {type(e).__name__}: {str(e)[:150]}; want {_want(case)}")
            elif not _same(before, ledger.snapshot()):
                out.append(f"{case.what}: refused ({type(e).__name__}) but the ledger changed")
            continue
        if case.error is not None:
            out.append(f"{case.what}: accepted; want {_want(case)}")
        elif case.states and tuple(ledger.state_of([1, 2, 3, 4]).tolist()) != case.states:
            got = [State(s).name for s in ledger.state_of([1, 2, 3, 4]).tolist()]
            out.append(f"{case.what}: slots 1..4 are {got}, want {[s.name for s in case.states]}")
    return out + _guarded_ids()


def _guarded_ids() -> list[str]:
    """The guard's host copies of an engine's ids (`inputs.host_ids`): one id, many, another dtype."""
    out = []
    for ids, dtype in (([3], torch.int64), ([2, 4], torch.int64), ([1, 2], torch.int32)):
        guard = LedgerGuard(_Engine(ids, dtype), capacity=4)
        got = guard.alloc(len(ids), R1)
        held = sorted(int(s) for s in guard.ledger.held_by(R1))
        if got is None or held != sorted(ids) or guard.available() != 4 - len(ids):
            out.append(f"the guard took {held} of an engine alloc of {ids} ({dtype}); {guard.available()} left")
    return out


class _Engine(FreeList):
    """An engine allocator that hands out the given ids, in the given dtype."""

    def __init__(self, ids, dtype):
        super().__init__(4)
        self.ids, self.dtype = ids, dtype

    def alloc(self, need_size: int):
        return torch.tensor(self.ids, dtype=self.dtype)


def _elsewhere(thunk):
    """Run `thunk` in another thread; raise what it raised."""
    raised = []

    def run():
        try:
            thunk()
        except Exception as e:  # noqa: BLE001 (handed back to the caller's thread)
            raised.append(e)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if raised:
        raise raised[0]


def _want(case: Case) -> str:
    return "success" if case.error is None else f"{case.error.__name__} saying {case.words!r}"


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a
    )
