"""The ledger's validation of a batch: real, distinct slot ids, the event's actor kind, and the
model's typed error for the first refused move (naming the slot, its state, owner, the event
and the actor, with the slot's recent history)."""

from __future__ import annotations

import numpy as np

from slotwarden.runtime.ledger.transition import (
    Batch,
)
from slotwarden.model.errors import BadSlotId, IllegalMove
from slotwarden.model.table import ILLEGAL
from slotwarden.model.vocabulary import Actor, Event

from slotwarden.runtime import inputs
from slotwarden.runtime.ledger.recorder import Actors
from slotwarden.runtime.ledger.codes import _ID_MAX, _ILLEGAL_BYTE, _INT64, _TOP, _UNIT
from slotwarden.runtime.ledger.state import LedgerState

_INTS = frozenset((int,))  # the element type of a list of plain ints (a bool is of another type)


class Checks(LedgerState):
    """`SlotLedger`'s checks (a mixin over `LedgerState`)."""

    def checked_ids(self, ids, event: Event | str, actor: Actor | None) -> np.ndarray:
        """`ids` as a 1-D int64 array, checked as every batch of the ledger is (strict mode):
        not empty, real slots 1..capacity, each named once. A refusal (`BadSlotId`, or
        `BadInput` for what is no batch of ids) names `event` (an `Event`, or the name of the
        caller's operation) and `actor`; nothing changes. The array may be `ids` itself."""
        self.check_thread()
        return self._ids(ids, event, actor)

    def _check_actor(self, ids, event: Event, actor: Actor, target: int) -> None:
        kind, needs_target = self._actor_ok[event]
        if actor.kind is not kind or (needs_target and target < 0):
            from slotwarden.model.step import legal_rule  # the model says why, in its words

            legal_rule(self._record(int(ids[0])), event, actor, target, self.lifecycle, slot_id=int(ids[0]))

    def _check_batch(self, batch: Batch, event: Event, actor: Actor, target: int, first: int | None = None) -> None:
        """Raise the model's `IllegalMove` for the first refused slot of `batch` (`first`, its
        position, when the caller found it: `actor` is then that slot's actor)."""
        p = _first_illegal(batch.after) if first is None else first
        if p is not None:
            slot_id = int(batch.ids[p])
            from slotwarden.model.step import refusal
            from slotwarden.model.declaration import relation_of

            rec = self._record(slot_id)
            rel = relation_of(self.lifecycle.spec(rec.state), rec, actor)
            more = _count_illegal(batch) - 1
            reason = refusal(self.lifecycle, rec, event, rel) + (
                f" (and {more} more slots in this batch)" if more else ""
            )
            history = self.recorder.explain([slot_id])
            raise IllegalMove(reason + "\n" + history, slot=rec, event=event, actor=actor, slot_id=slot_id)

    def _plain_lists(self, ids, actor_ids) -> bool:
        """Whether `ids` and `actor_ids` are equally long lists of plain Python ints (what a
        scheduler hands in) that pass every check `_ids` and `inputs.actor_ids` make: real
        slots, each named once, actor ids of int64 that are not NOBODY. Builtins over the
        lists, no numpy call. False for anything else, which the general path then checks
        (and refuses, naming what is wrong)."""
        if type(ids) is not list or type(actor_ids) is not list or self.check != "strict":
            return False
        n = len(ids)
        return (
            0 < n <= self.capacity
            and len(actor_ids) == n
            and _INTS.issuperset(map(type, ids))
            and _INTS.issuperset(map(type, actor_ids))
            and min(ids) >= 1
            and max(ids) <= self.capacity
            and len(set(ids)) == n
            and min(actor_ids) >= 0
            and max(actor_ids) <= _ID_MAX
        )

    def _ids(self, ids, event: Event, actor: Actor | Actors | None, allow_empty: bool = False) -> np.ndarray:
        """Normalise a batch of ids to a 1-D int64 numpy array (`inputs.ids`) and check it
        (strict mode): real slots 1..capacity, each named once, so at most `capacity` of them
        (a longer batch is refused by its length, before it is converted). A refusal names `actor`, or
        with `Actors` (one actor per slot) the actor of the first position naming the bad id."""
        if type(ids) is np.ndarray and ids.dtype is _INT64 and ids.ndim == 1 and ids.strides == _UNIT:
            arr = ids  # `inputs.ids`'s common case, inline: nothing to convert
            if arr.size > self.capacity:  # refused by its length, before any ufunc over it
                inputs.too_long(arr, arr.size, self.capacity, event, _one(actor))
        else:
            arr = inputs.ids(ids, event, _one(actor), self.capacity)
        if arr.size == 0:
            if allow_empty:
                return arr
            raise BadSlotId("an empty batch", slot_id=None, event=event, actor=_one(actor))
        if self.check == "off":
            return arr
        n = arr.size
        if n > self.small and n * 8 == len(self._known) and arr.tobytes() == self._known:
            # the very ids of the last batch found real and distinct (or handed out by `alloc`:
            # distinct because the free ring holds each FREE slot once): a memcmp, no scatter
            return arr
        if n <= self.small:  # a slot at a time; anything wrong: the checks below say what
            lst = arr.tolist()
            if n == 1:
                if 1 <= lst[0] <= self.capacity:
                    return arr
            elif min(lst) >= 1 and max(lst) <= self.capacity and len(set(lst)) == n:
                return arr
        elif arr.view(np.uint8)[_TOP::8].tobytes() == bytes(n):
            # No ufunc: no id is negative (the top byte of each is 0); the duplicate stamp marks
            # each id's position (an id named twice keeps only its last), the pad slot's mark
            # says whether slot 0 was named, and an id above the capacity makes the scatter
            # raise IndexError.
            seq, stamp = np.arange(n, dtype=np.int32), self._stamp
            stamp[0] = -1
            try:
                stamp[arr] = seq
            except IndexError:
                pass
            else:
                if stamp[0] == -1 and stamp[arr].tobytes() == seq.tobytes():  # a memcmp
                    self._known, self._known_run = arr.tobytes(), None
                    return arr
        out = (arr - 1).view(np.uint64) >= np.uint64(self.capacity)
        if out.any():
            bad = int(arr[np.argmax(out)])
            why = (
                "slot 0 is the pad slot, never allocated or freed"
                if bad == 0
                else f"not a slot of a pool of {self.capacity}"
            )
            raise BadSlotId(why, slot_id=bad, event=event, actor=_naming(actor, arr, bad))
        seq = np.arange(n, dtype=np.int32)
        self._stamp[arr] = seq
        dup = self._stamp[arr] != seq
        bad = int(arr[np.argmax(dup)])
        raise BadSlotId("named twice in one batch", slot_id=bad, event=event, actor=_naming(actor, arr, bad))


def _first_illegal(after) -> int | None:
    """The position of the first refused move of a batch (`after`: one code per slot, or one
    for the whole batch), or None."""
    if isinstance(after, np.ndarray):
        p = after.tobytes().find(_ILLEGAL_BYTE)  # uint8 codes: a byte search, no ufunc
        return None if p < 0 else p
    return 0 if after == ILLEGAL else None


def _count_illegal(batch: Batch) -> int:
    if isinstance(batch.after, np.ndarray):
        return batch.after.tobytes().count(_ILLEGAL_BYTE)
    return batch.ids.size if batch.after == ILLEGAL else 0


def _one(actor):
    """The actor a refusal of the batch as a whole names: `actor`, or none for a multi-actor batch."""
    return None if type(actor) is Actors else actor


def _naming(actor, arr: np.ndarray, slot_id: int):
    """The actor a refusal of `slot_id` names: `actor`, or for a multi-actor batch (`Actors`)
    the actor of the first position of `arr` that names it."""
    if type(actor) is Actors:
        return actor[int(np.flatnonzero(arr == slot_id)[0])]
    return actor
