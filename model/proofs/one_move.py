"""The one-move proofs: each a contracted function (PEP 316 docstring contracts, which CrossHair
reads from the function's own docstring and evaluates in this module's names) around one move
of `proof_move.move`, whose postcondition is its claim in `MOVE_CLAIMS`; `prove_every_move` is
their conjunction, confirmed in one exploration. The record is taken as its fields and the actor
as its kind and id (the same records and actors as `Slot` and `Actor` arguments, at a fraction
of CrossHair's cost per path).
"""

from __future__ import annotations

from slotwarden.model.proofs.move import MOVE_CLAIMS, SUBJECT, Move, holds, move, record_of  # noqa: F401  (contracts)
from slotwarden.model.properties import exclusive  # noqa: F401  the contracts in the docstrings call it
from slotwarden.model.vocabulary import ActorKind, Event, State


def prove_session_kept(
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
    """Property 1, one move: only the owning session's close takes a slot out of its session.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("session_kept", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_freed_once(
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
    """Property 2, one move: a slot that is not held is never given back again.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("freed_once", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_fence_respected(
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
    """Property 4, one move: a released slot is free only after the fence of its step.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("fence_respected", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_exclusive(
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
    """Property 5, one move: exclusive ownership is inductive; no holder keeps a handle
    (the record after names as owner only nobody, the owner before, the actor or the target;
    for an actor of id >= 0, as every actor is).

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("exclusive", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_release_waits(
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
    """Property 4, one move: a slot released while step `epoch` is in flight waits for it.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("release_waits", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_handles_follow(
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
    """Property 5, one move: whoever a move takes the slot from keeps no handle on it.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("handles_follow", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_authority(
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
    """Property 8, one move: only the owner, or the borrower, moves a held slot; only the owning
    session lends it, to a request.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("authority", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_borrow_safe(
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
    """Property 9, one move: a lent slot stays in its session until its borrower gives it back.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("borrow_safe", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_parks_what_ran(
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
    """Property 10, one move: a session takes over only a slot of the running batch.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("parks_what_ran", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_cache_read_only(
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
    """Property 11, one move: a request never writes a cached slot, it only locks or unlocks it.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("cache_read_only", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_evict_unlocked(
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
    """Property 12, one move: a cached slot leaves its node only unlocked, released to the fence.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("evict_unlocked", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_lock_counted(
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
    """Property 13, one move: the lock count moves by one, by a lock or an unlock, never below 0.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("lock_counted", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_reads_published(
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
    """Property 14, one move: only published state is locked; publication waits for the fence.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("reads_published", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_publishes_committed(
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
    """Property 16, one move: a window slot leaves its window only to go back.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("publishes_committed", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_commit_fenced(
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
    """Property 16, one move: a window slot is verified at its step's fence, committed once verified.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: holds("commit_fenced", __return__)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


def prove_every_move(
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
    """Every one-move proof above at once: the conjunction of their postconditions, over the
    same moves. CrossHair explores each postcondition of a function separately, so the
    fifteen one-move proofs cost fifteen explorations of the same paths; this is one. verify
    runs it, and each one-move proof alone only when it fails, to name which properties break.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: all(holds(name, __return__) for name in MOVE_CLAIMS)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)
