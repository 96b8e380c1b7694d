"""Refusals in words: the typed errors name what a person needs to find the bug.

- An illegal move names the event, the actor, the slot, its state, its owner and a borrower
  (the seed bug's free through the drop-in allocator, a finish by the wrong request on the
  ledger), an illegal copy its slot, state, owner and actor, a bad id the pad slot, a slot
  outside the pool or one named twice, each for what it is; an illegal step its row, slot,
  holder and actor.
- Every error survives pickling (verify's workers send them between processes) with its type
  and its text; `repr` of a bad input is its type and text.
- `shown` bounds any value: a long list or array says how long it was, a value whose `repr`
  raises is named by its type, a junk actor by its fields.
"""

from __future__ import annotations

import pickle

import numpy as np

from slotwarden.model.errors import BadActor, BadInput, BadSlotId, IllegalCopy, IllegalMove, IllegalStep, shown
from slotwarden.model.vocabulary import Actor, Event, Slot, State
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guarded_allocator import GuardedAllocator
from slotwarden.runtime.launch import check_step
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.scheduler.build import build
from slotwarden.kernels.layer import TinyMambaConfig

R1, R2 = Actor.request(1), Actor.request(2)


def problems() -> list[str]:
    out: list[str] = []
    errors = [
        _raised(_seed_bug),
        _raised(lambda: _running().apply(Event.FINISH, [1], R2)),
        _raised(_foreign_copy),
        _raised(lambda: _running().apply(Event.ADMIT, [1, 0], R1)),
        _raised(lambda: _running().apply(Event.ADMIT, [5], R1)),
        _raised(lambda: _running().apply(Event.ADMIT, [2, 2], R1)),
        _raised(lambda: _running().apply(Event.ADMIT, "junk", R2)),
        _raised(lambda: _running().apply(99, [1], R2)),
        _raised(lambda: _running().apply(Event.ADMIT, [1], Actor(7, 1))),
        _raised(lambda: check_step(_running(), [1], [2])),
    ]
    wanted = [
        (
            IllegalMove,
            ("illegal free by request 2 on slot 1", "state LENT", "owner 5", "lent to request 2", "session 5"),
        ),
        (IllegalMove, ("illegal finish by request 2 on slot 1", "state RUNNING", "owner 1", "only its owner")),
        (IllegalCopy, ("illegal copy by request 2 with slot 1", "state RUNNING", "owner 1")),
        (BadSlotId, ("bad slot id 0 for admit by request 1", "slot 0 is the pad slot")),
        (BadSlotId, ("bad slot id 5 for admit by request 1", "not a slot of a pool of 4")),
        (BadSlotId, ("bad slot id 2 for admit by request 1", "named twice in one batch")),
        (BadSlotId, ("bad slot ids 'junk' (str) for admit by request 2",)),
        (BadInput, ("bad event 99 by request 2", "not an event")),
        (BadActor, ("bad actor", "unknown actor kind 7")),
        (IllegalStep, ("illegal step: row 0 (request 2) on slot 1", "held by request 1, state RUNNING", "no claim")),
    ]
    for err, (kind, words) in zip(errors, wanted):
        text = str(err)
        if not isinstance(err, kind) or any(w not in text for w in words):
            out.append(f"{type(err).__name__}: {text[:160]!r}; want a {kind.__name__} saying {words}")
            continue
        back = pickle.loads(pickle.dumps(err))
        if type(back) is not type(err) or str(back) != text:
            out.append(f"{type(err).__name__} after pickling: {type(back).__name__} {str(back)[:100]!r}")
        if isinstance(err, BadInput) and repr(err) != f"{type(err).__name__}({text!r})":
            out.append(f"repr of {type(err).__name__}: {repr(err)[:100]}")
    return out + _made() + _shown()


def _made() -> list[str]:
    """Errors made by hand as a caller would: a symbolic reason that cannot be rendered, a
    refusal of a whole batch without its value."""
    out = []
    slot = Slot(State.RUNNING, 1, -1, 0, 0)
    lazy = IllegalMove(lambda: "why", slot=slot, event=Event.FINISH, actor=R2, slot_id=3)
    broken = IllegalMove(lambda: 1 / 0, slot=slot, event=Event.FINISH, actor=R2)
    if (
        str(lazy) != "illegal finish by request 2 on slot 3 (state RUNNING, owner 1): why"
        or str(broken) != "illegal move"
    ):
        out.append(f"hand-made illegal moves read {str(lazy)!r} and {str(broken)!r}")
    step = IllegalStep(lambda: 1 / 0, row=0, slot_id=1, slot=slot, holder=R2, actor=None)
    if str(step) != "illegal step":
        out.append(f"a hand-made illegal step whose reason raises reads {str(step)!r}")
    whole = BadSlotId("empty", slot_id=None, event="free", actor=None)
    if str(whole) != "bad batch of slot ids for free: empty":
        out.append(f"a refusal of a batch without its value reads {str(whole)!r}")
    return out


def _shown() -> list[str]:
    class Unprintable:
        def __repr__(self):
            raise RuntimeError("no repr")

    class Unmeasured:
        def __repr__(self):
            return "u" * 300

        @property
        def size(self):
            raise RuntimeError("no size")

    cases = {
        "a long value whose size raises": (Unmeasured(), "uuu..."),
        "a long list": (list(range(1000)), "(1000 items)"),
        "a long array": (np.arange(5000), "(5000 elements)"),
        "a value whose repr raises": (Unprintable(), "<Unprintable instance"),
        "a value reprlib cannot render": (type("str", (str,), {"__getitem__": _raise})("x"), "<str>"),
        "a junk actor": (Actor("kind?", 3), "'kind?'"),
        "a long string": ("x" * 500, "(500 characters)"),
    }
    return [
        f"shown({what}) = {shown(value)[:80]!r}, without {words!r}"
        for what, (value, words) in cases.items()
        if words not in shown(value) or len(shown(value)) > 260
    ]


def _raise(*_):
    raise RuntimeError("unreadable")


def _raised(thunk):
    try:
        thunk()
    except Exception as e:  # noqa: BLE001 (the error is what is judged)
        return e
    return None


def _running() -> SlotLedger:
    ledger = SlotLedger(4)
    ledger.alloc(2, R1)
    ledger.apply(Event.ADMIT, [1], R1)
    return ledger


def _seed_bug():
    allocator = GuardedAllocator(FreeList(4))
    with allocator.acting(R1):
        slot = allocator.alloc(1)
        allocator.admit(slot)
        allocator.park(slot, 5)
    with allocator.acting(Actor.session(5)):
        allocator.lend(slot, 2)
    with allocator.acting(R2):
        allocator.free(slot)


def _foreign_copy():
    pool = build(TinyMambaConfig(layers=1), slots=4).pool
    pool.alloc(1, R1)
    pool.admit([1], R1)
    pool.alloc(1, R2)
    pool.copy([2], [1], R2)  # request 2 writes its state into request 1's slot
