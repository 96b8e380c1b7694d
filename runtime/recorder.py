"""The flight recorder: the last batches of lifecycle events, to explain any error or leak."""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from slotwarden.model.vocabulary import NOBODY, Actor, Event, State


class Entry(NamedTuple):
    seq: int
    event: Event
    actor: Actor
    target: int
    epoch: int
    ids: np.ndarray
    before: np.ndarray
    after: np.ndarray


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
    """Keeps the last `depth` batches (one entry a batch, whatever its size: O(1) per batch).
    A slot's history is read back by scanning them, newest first."""

    def __init__(self, depth: int = 512):
        self.entries: deque = deque(maxlen=depth)
        self.seq = 0

    def record(self, event: Event, actor: Actor, target: int, epoch: int, ids, before, after) -> None:
        self.seq += 1
        self.entries.append(Entry(self.seq, event, actor, target, epoch, ids, before, after))

    def history(self, slot: int, limit: int = 8) -> list[Moment]:
        """The last `limit` events that moved `slot`, oldest first."""
        found = []
        for e in reversed(self.entries):
            for p in np.flatnonzero(e.ids == slot):
                before = e.before if np.ndim(e.before) == 0 else e.before[p]  # a scalar: every slot was in it
                found.append(Moment(e.seq, e.event, e.actor, e.target, State(int(before)), State(int(e.after[p]))))
            if len(found) >= limit:
                break
        return found[:limit][::-1]

    def explain(self, slots, limit: int = 8) -> str:
        """Each slot's recent history as text, for an error message."""
        lines = []
        for s in slots:
            moments = self.history(int(s), limit)
            lines.append(f"  slot {int(s)}: " + ("; ".join(map(str, moments)) or "no event recorded (older than the recorder)"))
        return "\n".join(lines)
