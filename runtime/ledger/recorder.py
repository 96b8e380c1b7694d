"""The flight recorder: the last batches of lifecycle events, to explain any error or leak."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, State


class Entry(NamedTuple):
    seq: int
    event: Event
    actor: Actor
    target: int
    epoch: int
    ids: np.ndarray
    before: np.ndarray | int  # one state (an int) when every slot of the batch was in it, else one per slot
    after: np.ndarray  # one state per slot (kept as one, when every slot moved to it)


@dataclass(frozen=True)
class Actors:
    """The actors of a batch whose slots each have their own (`SlotLedger.apply_each`): one
    kind, one id per slot. `actors[p]` is the actor of the batch's p-th slot."""

    kind: ActorKind
    ids: tuple

    def __getitem__(self, p: int) -> Actor:
        return Actor(self.kind, self.ids[p])

    def __str__(self) -> str:
        return f"{len(self.ids)} {self.kind.name.lower()}s"


class Moment(NamedTuple):
    """One event in one slot's history."""

    seq: int
    event: Event
    actor: Actor
    target: int
    before: State
    after: State

    def __str__(self) -> str:
        to = f" -> {self.target}" if self.target != NOBODY else ""
        return f"#{self.seq} {self.event.name.lower()} by {self.actor}{to}: {self.before.name} -> {self.after.name}"


class FlightRecorder:
    """Keeps the last `depth` batches in a bounded ring (one entry a batch, whatever its size:
    O(1) per batch). Recording is lazy: a batch is kept as handed in (numpy arrays, or lists
    of ints from the ledger's per-slot path; `before` and `after` one int when the whole batch
    shared it; the ids of a vectorised batch as the bytes of an int64 array) and turned into
    arrays only when read back, in one form whatever path kept them (`Entry`), read-only."""

    def __init__(self, depth: int = 512):
        self.depth = depth
        self._ring: deque = deque(maxlen=depth)
        self.seq = 0

    def record(self, event: Event, actor: Actor, target: int, epoch: int, ids, before, after) -> None:
        """Keep one batch. `ids`, `before` and `after` must not change afterwards (the ledger
        hands in its own copies, or lists it built for the call)."""
        self.seq += 1
        self._ring.append((self.seq, event, actor, target, epoch, ids, before, after))

    @property
    def entries(self) -> list[Entry]:
        """The kept batches, oldest first, with their ids and states as arrays."""
        return [_entry(raw) for raw in self._ring]

    def history(self, slot: int, limit: int = 8) -> list[Moment]:
        """The last `limit` events that moved `slot`, oldest first."""
        found = []
        for raw in reversed(self._ring):
            e = _entry(raw)
            for p in np.flatnonzero(e.ids == slot):
                before = e.before if np.ndim(e.before) == 0 else e.before[p]  # a scalar: every slot was in it
                actor = e.actor[int(p)] if type(e.actor) is Actors else e.actor
                found.append(Moment(e.seq, e.event, actor, e.target, State(int(before)), State(int(e.after[p]))))
            if len(found) >= limit:
                break
        return found[:limit][::-1]

    def explain(self, slots, limit: int = 8) -> str:
        """Each slot's recent history as text, for an error message."""
        lines = []
        for s in slots:
            moments = self.history(int(s), limit)
            lines.append(
                f"  slot {int(s)}: " + ("; ".join(map(str, moments)) or "no event recorded (older than the recorder)")
            )
        return "\n".join(lines)


def _entry(raw: tuple) -> Entry:
    """A kept batch read back: ids and `after` as read-only arrays, `before` as one int when
    every slot was in one state (however the path kept it), else a read-only array."""
    seq, event, actor, target, epoch, ids, before, after = raw
    ids = _read_only(ids_of(ids))
    if np.ndim(before) == 0:
        before = int(before)
    else:
        states = np.asarray(before, dtype=np.uint8)
        before = int(states[0]) if states.size and (states == states[0]).all() else _read_only(states)
    after = np.full(ids.shape, after, dtype=np.uint8) if np.ndim(after) == 0 else np.asarray(after, dtype=np.uint8)
    return Entry(seq, event, actor, target, epoch, ids, before, _read_only(after))


def _read_only(array: np.ndarray) -> np.ndarray:
    """A view of `array` that cannot be written through (a reader cannot rewrite a record)."""
    view = array.view()
    view.flags.writeable = False
    return view


def ids_of(ids) -> np.ndarray:
    """A recorded batch's ids as an int64 array (they are kept as handed in: a list, an array,
    or the bytes of an int64 array)."""
    return np.frombuffer(ids, dtype=np.int64) if type(ids) is bytes else np.asarray(ids, dtype=np.int64)
