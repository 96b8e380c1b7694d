"""The ledger's own lane: `SlotLedger`'s usual `alloc(n, actor)`, `apply(event, ids, actor)` and
`fence()` in one C call each (`runtime/ledger/_ledger_lane.c`), bound over the ledger's methods.

The C form of the ledger's Python on its compiled move, for the usual call of any size (see the
C file): the same check and write, then the free ring, the releases filed under their fence's
step and the flight record, the write's mark held throughout. Every other call (a target, a
`before_write` hook, ids of another type, a refused or mixed move, a fence of anything but one
filed batch all due) goes to the class's Python method, which does it or raises. The lane asks
`usual` again whenever the ledger's class changes: a class whose methods are no longer
SlotLedger's own (a subclass that overrides one, a method patched on the class) keeps to its
Python; a method patched on one ledger object is not seen (patch the class). A fence that the
lane hands to the Python asks the steps' `done` queries again. None where the compiled move is
not built, or the ledger keeps no free list; `unbind` takes a ledger back to its Python (a copy
of a ledger is unbound).
"""

from __future__ import annotations

import numpy as np

from slotwarden.model.vocabulary import Actor, ActorKind, Event, State

from slotwarden.runtime.ledger.compiled import Mover
from slotwarden.runtime.ledger.recorder import FlightRecorder

# the lane is a type of the compiled move's extension (`_move`), built beside it
try:
    from slotwarden.runtime.ledger._move import LedgerLane
except ImportError:  # built without a C compiler, or an older build
    LedgerLane = None

BOUND = ("alloc", "apply", "fence")
"""The methods the lane is bound over."""
STANDS_IN_FOR = BOUND + (
    "_alloc_batch", "_apply", "_move", "_settle", "_push", "_note_released", "_advance", "_peek", "_due",
    "_fence_released", "_finished", "check_thread", "_bind_or_refuse", "_detached", "_refused_here",
    "_shares_memory",
)  # fmt: skip
"""What the lane does in place of the ledger's Python: a class that changes any of these keeps it."""


def usual(ledger, originals: dict) -> bool:
    """Whether `ledger`'s class still has `originals` (name -> SlotLedger's own function) for
    every method the lane stands in for."""
    cls = type(ledger)
    return all(getattr(cls, name, None) is function for name, function in originals.items())


def bind(ledger, originals: dict, already_done):
    """Bind a `LedgerLane` over `ledger`'s `alloc`, `apply` and `fence` (instance attributes)
    and return it; None (nothing bound) without the compiled move or a free list of its own.
    `already_done`: what `launch` files for a step with no `done` query (finished at once)."""
    if LedgerLane is None or Mover is None or ledger.mover is None or not ledger.has_free_list:
        return None
    per_event = np.zeros((2, len(Event)), dtype=np.uint8)
    for e in Event:
        kind, needs_target = ledger._actor_ok[e]
        per_event[:, e] = int(kind), needs_target
    waits = np.array([s in ledger._waits for s in range(len(State))], dtype=np.uint8)
    from slotwarden.runtime.ledger.batch import _NONE  # the empty ids a fence with nothing due returns

    types = (
        np.ndarray, np.empty, np.dtype(np.int64), Actor, tuple(ActorKind), tuple(Event), FlightRecorder.record, _NONE,
        already_done,
    )  # fmt: skip
    codes = (int(Event.ALLOC), int(Event.FENCE), int(State.FREE), int(State.RELEASED), int(ActorKind.SCHEDULER))
    lane = LedgerLane(
        ledger, ledger.mover, lambda led: usual(led, originals), types, ledger._ring, per_event, waits, codes
    )
    for name in BOUND:
        setattr(ledger, name, getattr(lane, name))
    return lane


def is_bound(ledger) -> bool:
    """Whether `ledger`'s usual calls take its lane."""
    return ledger._lane is not None and all(name in vars(ledger) for name in BOUND)


def unbind(ledger) -> None:
    """Take `ledger` back to its Python methods (the tests compare the two)."""
    for name in BOUND:
        ledger.__dict__.pop(name, None)
    ledger._lane = None
