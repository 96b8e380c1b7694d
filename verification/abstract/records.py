"""The records of the abstract scheduler's actions: what a slot went through (`Move`), which
action (`Action`), and what it led to (`Outcome`)."""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.errors import LifecycleError
from slotwarden.model.vocabulary import Actor, Event, Slot
from slotwarden.verification.abstract.world import World


class Move(NamedTuple):
    """What one slot went through during an action: the checker judges every move."""

    slot_id: int
    before: Slot
    event: Event
    actor: Actor
    after: Slot


class Action(NamedTuple):
    """An action of the abstract scheduler: `kind` on request/session `id` (None: the scheduler
    or the cache), about slot `slot` (a match's or an eviction's cached slot)."""

    kind: str
    id: int | None = None
    slot: int | None = None

    def __str__(self) -> str:
        on = "" if self.slot is None else f"slot {self.slot}"
        if self.id is None:
            return self.kind if not on else f"{self.kind}({on})"
        who = "s" if self.kind == "close" else "r"
        return f"{self.kind}({who}{self.id}{', ' + on if on else ''})"


class Outcome(NamedTuple):
    """One enabled action and what it led to: the next world, or the error the model raised."""

    action: Action
    world: World | None
    moves: tuple  # tuple[Move, ...], in the order they happened
    error: LifecycleError | None = None
