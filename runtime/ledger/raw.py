"""The ledger's move of raw ids: `apply_raw`, one checked call of the compiled move for a batch an
engine hands in as its own index tensor (the guard's alloc and free, `LedgerGuard`).

The ids come as one int (one slot) or as the bytes of an int64 array (`Mover.read`: a copy of a
CPU tensor's data, which the ledger then checks, writes and records; a later write into the
tensor changes nothing). The kernel checks the whole batch (real slots, each named once, every
move legal by the table), calls the caller's `give` between the check and the write when the
move makes the slots FREE (the guard hands the engine its tensor there), and returns the one
state before and after. Nothing here decides what is legal: a batch the kernel refuses, or whose
slots are not in one state moving to one state, comes back as `REFUSED` with nothing written,
and the caller takes `apply`, which raises the model's typed error (or does the move). No
numpy call on the way; no device sync (host tensors only).
"""

from __future__ import annotations

from _thread import get_ident

import numpy as np

from slotwarden.model.vocabulary import NOBODY, Actor, Event

from slotwarden.runtime import inputs
from slotwarden.runtime.ledger.batch import BatchPath
from slotwarden.runtime.ledger.codes import _ALLOC, _FENCE, _FREE
from slotwarden.runtime.ledger.recorder import ids_of

REFUSED = -1
"""What `apply_raw` returns when it moved nothing (see the module's contract)."""
_NOT_ONE = 1 << 16  # the kernel's codes from here up: its slots were in, or moved to, different states


class RawMoves(BatchPath):
    """`apply_raw`, over a ledger's compiled move (`mover`)."""

    def checked_actor(self, actor, event=None) -> Actor:
        """`inputs.actor(actor, event)` (`BadActor` for one that is not), kept as the actor this
        ledger validated last: the same object again costs one comparison (it is immutable)."""
        if actor is not self._actor:
            actor = self._actor = inputs.actor(actor, event)
        return actor

    def apply_raw(self, event: Event, ids, actor: Actor, give=None, given=None) -> int:
        """`apply(event, ids, actor)` for `ids` one slot (an int) or the bytes of an int64 array
        (`Mover.read`), for the events that name no target and no step, in one kernel call:
        checked whole, then `give(given)` if the move makes the slots FREE (the guard hands its
        engine the slots there), then written. Returns the code `after | before << 8`: every
        slot was in state `before` and is now in `after`. Returns `REFUSED`, nothing written
        and `give` not called, when the kernel refuses the batch, when its slots are not all in
        one state moving to one state, or where this call does not apply (no compiled move,
        check="off", an actor of another kind, an ALLOC on a ledger that chooses its slots):
        then `apply` raises or does it. If `give` raises, nothing is written. `give` must not
        move this ledger's slots: the ledger holds its write mark over it (a call raises)."""
        if get_ident() != self._thread:
            self._bind_or_refuse()
        if actor is not self._actor:  # the actor validated last is still valid (an Actor is immutable)
            actor = self._actor = inputs.actor(actor)
        mover = self.mover
        if mover is None or type(event) is not Event:
            return REFUSED
        kind, needs_target = self._actor_ok[event]
        if actor[0] is not kind or needs_target or event is _FENCE or (event is _ALLOC and self.has_free_list):
            return REFUSED
        me, epoch = actor[1], self.launched
        owner, self._thread = self._thread, self._marks[event]  # the kernel checks, then writes: one unit
        try:
            got = mover.move(event, ids, me, NOBODY, epoch, None, None, None, True, True, give, given, _FREE)
        except BaseException:  # raised by `give`: nothing written
            self._thread = owner
            raise
        if got < 0 or got >= _NOT_ONE:  # refused, or not one state (asks for arrays): nothing written
            self._thread = owner
            return REFUSED
        after = got & 0xFF
        lst = [ids] if type(ids) is int else ids
        if after in self._waits or (after == _FREE and self.has_free_list and event is not _ALLOC):
            if type(ids) is int:
                self._settle_one(lst, after, event)
            else:
                self._settle(np.frombuffer(ids, dtype=np.int64), after, event)
        self.recorder.record(event, actor, NOBODY, epoch, lst, got >> 8, after)  # its own copy: never changed
        self._thread = owner
        return got

    def _settle_raw(self, ids, after: int, event: Event) -> None:
        """`apply_raw`'s filing of a batch moved into a state that waits for a fence, for the
        guard's compiled lane (`ids` the bytes of an int64 array, or a range)."""
        self._settle(ids_of(ids), after, event)
