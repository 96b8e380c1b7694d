"""The one move a one-move proof judges: the lifecycle under proof (`SUBJECT`, a one-element
list so that a test or the CrossHair runner can point every proof at another declaration), the
record built from plain ints (`record_of`), the move itself (`move`: an illegal one leaves the
slot as it was, as the runtime guarantees) and each proof's claim on it (`MOVE_CLAIMS`, `holds`).
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.declaration import Lifecycle
from slotwarden.model.errors import LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.properties import (
    authority,
    borrow_safe,
    cache_read_only,
    commit_fenced,
    evict_unlocked,
    exclusive,
    fence_respected,
    freed_once,
    handles_follow,
    lock_counted,
    parks_what_ran,
    publishes_committed,
    reads_published,
    release_waits,
    session_kept,
)
from slotwarden.model.step import step
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Slot, State

SUBJECT: list[Lifecycle] = [LIFECYCLE]
"""The lifecycle under proof (a one-element list so tests can swap it)."""


def _step(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """`step`, where an illegal move leaves the slot as it was (as the runtime guarantees)."""
    try:
        return step(slot, event, actor, target, epoch, SUBJECT[0])
    except LifecycleError:
        return slot


class Move(NamedTuple):
    """One move of a one-move proof: the record before, the event, who fires it, its target,
    the step in flight, and the record after."""

    before: Slot
    event: Event
    actor: Actor
    target: int
    epoch: int
    after: Slot


def record_of(state: State, owner: int, borrower: int, fence: int, readers: int, lifecycle: Lifecycle) -> Slot:
    """The record in `state` built from these ints: each field the state holds (`StateSpec`)
    taken from its int, owner, borrower and fence through `abs`; each field it does not hold
    left empty (NOBODY, 0).

    `exclusive` allows only the empty value in a field the state does not hold and any value
    >= 0 in an owner, borrower or fence it holds, and `abs` maps the ints onto exactly those:
    so the records built from every int are exactly the records `exclusive` allows, bar a lock
    count out of 0..MAX_READERS, which the precondition rejects. (Taking the record as a `Slot`
    argument ranges over the same records, and costs CrossHair one path per ill-formed field
    value that the precondition then rejects, times every state, event and actor kind.)"""
    spec = lifecycle.spec(state)
    return Slot(
        state,
        abs(owner) if spec.owner is not None else NOBODY,
        abs(borrower) if spec.lent else NOBODY,
        abs(fence) if spec.fenced else 0,
        readers if spec.shared else 0,
    )


def move(
    state: State,
    owner: int,
    borrower: int,
    fence: int,
    readers: int,
    event: Event,
    kind: ActorKind,
    actor: int,
    target: int,
    epoch: int,
) -> Move:
    """The move of a one-move proof: `Actor(kind, actor)` fires `event` with `target` on the
    record `record_of(...)` while step `abs(epoch)` (any step >= 0) is in flight."""
    before = record_of(state, owner, borrower, fence, readers, SUBJECT[0])
    who = Actor(kind, actor)
    return Move(before, event, who, target, abs(epoch), _step(before, event, who, target, abs(epoch)))


MOVE_CLAIMS = {
    "session_kept": lambda m, lc: session_kept(m.before, m.event, m.actor, m.after, lc),
    "freed_once": lambda m, lc: freed_once(m.before, m.event, m.after, lc),
    "fence_respected": lambda m, lc: fence_respected(m.before, m.actor, m.after),
    "release_waits": lambda m, lc: release_waits(m.before, m.after, m.epoch, lc),
    "exclusive": lambda m, lc: (
        m.actor.id < 0  # an actor id is never negative
        or (exclusive(m.after, lc) and m.after.owner in (NOBODY, m.before.owner, m.actor.id, m.target))
    ),
    "handles_follow": lambda m, lc: handles_follow(m.before, m.event, m.actor, m.target, m.after, lc),
    "authority": lambda m, lc: authority(m.before, m.event, m.actor, m.target, m.after, lc),
    "borrow_safe": lambda m, lc: borrow_safe(m.before, m.actor, m.after, lc),
    "parks_what_ran": lambda m, lc: parks_what_ran(m.before, m.after, lc),
    "cache_read_only": lambda m, lc: cache_read_only(m.before, m.actor, m.after, lc),
    "evict_unlocked": lambda m, lc: evict_unlocked(m.before, m.after, m.epoch, lc),
    "lock_counted": lambda m, lc: lock_counted(m.before, m.event, m.after, lc),
    "reads_published": lambda m, lc: reads_published(m.before, m.actor, m.after, lc),
    "publishes_committed": lambda m, lc: publishes_committed(m.before, m.after),
    "commit_fenced": lambda m, lc: commit_fenced(m.before, m.event, m.actor, m.after),
}
"""The postcondition of each one-move proof, on its `Move` and the lifecycle under proof."""


def holds(proof: str, m: Move) -> bool:
    """Whether move `m` keeps the claim of the one-move proof `proof` (its postcondition)."""
    return MOVE_CLAIMS[proof](m, SUBJECT[0])
