"""The ledger's lane for a `GuardedAllocator`: the guard's usual `alloc(n)` and `free(ids)` in one
C call each (`runtime/ledger/_lane.c`), bound as the allocator's own `alloc` and `free`.

The lane is the C form of the guard's Python for the usual call (an acting actor that may make
the move, a 1-D int64 CPU tensor, a free whose slots all make one move): the same check and
write (the ledger's compiled move), the engine's `free` between them, the same record. The event
of a free is read from the guard's own free table (`_free_event`, shared memory) and the tables
below, all compiled from the model; an alloc marks its slots STALE in the guard's fills where it
keeps them. Every other call goes to the guard's Python, which does it or raises. None where the
compiled move is not built (the guard then keeps to its Python).
"""

from __future__ import annotations

import numpy as np
import torch

from slotwarden.model.vocabulary import Actor, ActorKind, Event, Relation, State
from slotwarden.model.write_set import Fill

from slotwarden.runtime.ledger.compiled import Mover
from slotwarden.runtime.ledger.recorder import FlightRecorder

try:
    from slotwarden.runtime.ledger._move import Lane
except ImportError:  # built without a C compiler, or an older build
    Lane = None

_NO_KIND = 255


def lane(guarded, cls, acting):
    """A `Lane` for `guarded` (a `GuardedAllocator`), whose Python `alloc` and `free` are
    `cls`'s (what the lane hands every other call) and whose acting actor is the context
    variable `acting`; None without the compiled move."""
    ledger = guarded.ledger
    if Lane is None or Mover is None or ledger.mover is None or ledger.has_free_list:
        return None
    one_move = np.array(guarded._one_move, dtype=np.uint8)  # [kind, event, state]
    owner_kind = np.array([k if k < len(ActorKind) else _NO_KIND for k in ledger.owner_kinds], dtype=np.uint8)
    waits = np.array([s in ledger._waits for s in range(len(State))], dtype=np.uint8)
    per_state = np.ascontiguousarray(np.stack((owner_kind, ledger.lent.astype(np.uint8), waits)))
    kinds, targets = zip(*(ledger._actor_ok[e] for e in Event))
    per_event = np.array([[int(k) for k in kinds], [int(t) for t in targets]], dtype=np.uint8)
    types = (
        torch.Tensor,
        torch.int64,
        guarded.guard.device,  # the guard's own CPU device object (where a new guard's ids live)
        Actor,
        tuple(ActorKind),
        tuple(Event),
        FlightRecorder.record,
    )
    codes = (
        int(Event.ALLOC),
        int(Event.FENCE),
        int(State.FREE),
        int(Relation.NONE),
        int(Relation.OWNER),
        int(Relation.BORROWER),
        int(ActorKind.REQUEST),
    )
    return Lane(
        guarded,
        guarded.guard,
        ledger,
        ledger.mover,
        acting,
        types,
        (cls.alloc, cls.free),
        guarded._free_event,
        one_move,
        per_state,
        per_event,
        codes,
        None if guarded.guard.fills is None else (guarded.guard.fills, int(Fill.STALE)),
    )
