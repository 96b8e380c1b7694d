"""Junk arguments to every public call of `GuardedAllocator` and `LedgerGuard` (and to the
acting actor) raise the library's typed errors (`SlotwardenError`), never an AttributeError or
an IndexError from inside, and change nothing: not the ledger, not the engine's free list."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from slotwarden.model.errors import BadActor, BadInput, SlotwardenError
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.guarded_allocator import ACTING, GuardedAllocator, acting
from slotwarden.trace_examples import FreeList

R1, S5 = Actor.request(1), Actor.session(5)
JUNK = (
    None, "x", 1.5, float("nan"), -1, 0, 2**70, True, [], [None], ["a"], object(), b"1", {"a": 1},
    torch.tensor([1.0]), torch.tensor([[1]]), torch.tensor(True), np.array(["a"]), Event.FINISH, R1, "bob",
    Actor(9, 1), Actor(0, -1), Actor(0, "x"), Actor(0, 2**70),
)  # fmt: skip


def allocator() -> GuardedAllocator:
    g = GuardedAllocator(FreeList(8, "cpu"))
    with acting(R1):
        g.alloc(2)  # slots 1 and 2 TAKEN by request 1
    return g


def acted(who, call):
    """`call(g)` on a fresh allocator, with `who` acting."""

    def run(g):
        token = ACTING.set(who)
        try:
            return call(g)
        finally:
            ACTING.reset(token)

    return run


CALLS = {
    "alloc(n)": lambda j: acted(R1, lambda g: g.alloc(j)),
    "free(ids)": lambda j: acted(R1, lambda g: g.free(j)),
    "fire(event)": lambda j: acted(R1, lambda g: g.fire(j, [1])),
    "fire(ids)": lambda j: acted(R1, lambda g: g.fire(Event.ADMIT, j)),
    "fire(target)": lambda j: acted(R1, lambda g: g.fire(Event.PARK, [1], j)),
    "admit(ids)": lambda j: acted(R1, lambda g: g.admit(j)),
    "park(session)": lambda j: acted(R1, lambda g: g.park([1], j)),
    "lend(request)": lambda j: acted(S5, lambda g: g.lend([1], j)),
    "launch(done)": lambda j: lambda g: g.launch(j),
    "fence(step)": lambda j: lambda g: g.fence(j),
    "audit(requests)": lambda j: lambda g: g.audit(j),
    "audit(sessions)": lambda j: lambda g: g.audit(None, j),
    "acting: alloc": lambda j: acted(j, lambda g: g.alloc(1)),
    "acting: free": lambda j: acted(j, lambda g: g.free(torch.tensor([1]))),
    "acting: fire": lambda j: acted(j, lambda g: g.fire(Event.ADMIT, [1])),
    "acting: close": lambda j: acted(j, lambda g: g.close()),
    "guard alloc(n)": lambda j: lambda g: g.guard.alloc(j, R1),
    "guard alloc(owner)": lambda j: lambda g: g.guard.alloc(1, j),
    "guard fire(event)": lambda j: lambda g: g.guard.fire(j, [1], R1),
    "guard fire(ids)": lambda j: lambda g: g.guard.fire(Event.ROLLBACK, j, R1),
    "guard fire(actor)": lambda j: lambda g: g.guard.fire(Event.ROLLBACK, [1], j),
    "guard fire(target)": lambda j: lambda g: g.guard.fire(Event.PARK, [1], R1, j),
    "guard fence(step)": lambda j: lambda g: g.guard.fence(j),
}
CONSTRUCTORS = {
    "GuardedAllocator(allocator)": lambda j: GuardedAllocator(j, 8),
    "GuardedAllocator(capacity)": lambda j: GuardedAllocator(FreeList(8, "cpu"), j),
    "GuardedAllocator(unattributed)": lambda j: GuardedAllocator(FreeList(8, "cpu"), unattributed=j),
    "LedgerGuard(allocator)": lambda j: LedgerGuard(j, 8),
    "LedgerGuard(capacity)": lambda j: LedgerGuard(FreeList(8, "cpu"), j),
    "LedgerGuard(check)": lambda j: LedgerGuard(FreeList(8, "cpu"), 8, check=j),
}


def untyped(call) -> list:
    """The junk of `JUNK` on which `call` raises something that is not the library's, or
    changes the ledger or the engine's free list while refusing."""
    found = []
    for j in JUNK:
        g = allocator()
        free, ledger = g.allocator.free_slots.clone(), g.ledger.snapshot()
        try:
            call(j)(g)
        except SlotwardenError:
            now = g.ledger.snapshot()
            same = all((v == now[k]) if k == "counters" else torch.equal(v, now[k]) for k, v in ledger.items())
            if not (same and torch.equal(g.allocator.free_slots, free)):
                found.append((j, "changed something"))
        except Exception as e:  # noqa: BLE001 - what the test looks for
            found.append((j, type(e).__name__))
    return found


@pytest.mark.parametrize("name", CALLS)
def test_junk_to_a_call_raises_a_typed_error_and_changes_nothing(name):
    assert untyped(CALLS[name]) == []


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_junk_to_a_constructor_raises_a_typed_error(name):
    bad = []
    for j in JUNK:
        try:
            CONSTRUCTORS[name](j)
        except SlotwardenError:
            pass
        except Exception as e:  # noqa: BLE001 - what the test looks for
            bad.append((j, type(e).__name__))
    assert bad == []


@pytest.mark.parametrize("event", [99, "finish", None, 1.5, R1])
def test_fire_with_an_event_that_is_not_one_is_bad_input(event):
    g = allocator()
    with acting(R1), pytest.raises(BadInput, match=r"bad event .* by request 1: not an event"):
        g.fire(event, [1])


@pytest.mark.parametrize("who", ["bob", 7, Actor(0, -1), Actor(9, 1)])
def test_free_by_an_acting_actor_that_is_not_one_is_bad_actor(who):
    g = allocator()
    with acting(who):
        with pytest.raises(BadActor, match="bad actor .* for free"):
            g.free(torch.tensor([1]))
        with pytest.raises(BadActor, match="for alloc"):
            g.alloc(1)


def test_an_unknown_unattributed_setting_is_bad_input():
    with pytest.raises(BadInput, match="unattributed must be one of"):
        GuardedAllocator(FreeList(8, "cpu"), unattributed=["refuse"])
