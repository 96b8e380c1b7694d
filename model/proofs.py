"""Contracts that state the safety properties over the model, for CrossHair to confirm.

Each `prove_*` function is a contracted wrapper (PEP 316 docstring contracts) around `step`,
a step over a pool, or the shutdown of a slot; CrossHair explores every path through it and
must report "confirmed over all paths". The lifecycle a proof runs against is a module global
so a test can point the same proofs at a deliberately wrong declaration and watch them fail.

Why one move is enough: every move property's only precondition is `exclusive` (a well-formed
record, any owner, borrower and fence), and `prove_exclusive` shows that `exclusive` is
inductive. So each move property holds on every move of every run from a free slot; a proof
over runs of several moves would establish nothing more (and explores fewer records: only
those a short run reaches). `prove_conserved` is inductive the same way over a pool step, and
`prove_quiescent` starts from a record in any state, cached ones with locks held included.
The lock count is part of the record: `exclusive` bounds it, so the one-move proofs range over
every count a cached record can hold.

The one-move proofs take the record as its fields (`record_of`) and the actor as its kind and
id, not as `Slot` and `Actor` arguments: the same records and actors, at a fraction of
CrossHair's cost per path. Each states its claim in `MOVE_CLAIMS`; `prove_every_move` is their
conjunction, confirmed in one exploration.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.declaration import Lifecycle
from slotwarden.model.errors import LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.properties import (  # noqa: F401  the contracts in the docstrings call them
    authority,
    borrow_safe,
    cache_read_only,
    evict_unlocked,
    lock_counted,
    reads_published,
    conserved,
    exclusive,
    fence_respected,
    freed_once,
    handles_follow,
    parks_what_ran,
    quiescent,
    release_waits,
    session_kept,
)
from slotwarden.model.pool import Pool, apply
from slotwarden.model.step import step
from slotwarden.model.vocabulary import FREE_SLOT, MAX_READERS, NOBODY, Actor, ActorKind, Event, Slot, State  # noqa: F401  (contracts)

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
}
"""The postcondition of each one-move proof, on its `Move` and the lifecycle under proof."""


def holds(proof: str, m: Move) -> bool:
    """Whether move `m` keeps the claim of the one-move proof `proof` (its postcondition)."""
    return MOVE_CLAIMS[proof](m, SUBJECT[0])


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
    thirteen one-move proofs cost thirteen explorations of the same paths; this is one. verify
    runs it, and each one-move proof alone only when it fails, to name which properties break.

    pre: exclusive(record_of(state, owner, borrower, fence, readers, SUBJECT[0]), SUBJECT[0])
    post: all(holds(name, __return__) for name in MOVE_CLAIMS)
    """
    return move(state, owner, borrower, fence, readers, event, kind, actor, target, epoch)


BATCHES = ((1,), (2,), (1, 2), (2, 1))
"""Every batch of slot ids of a pool of two, in every order."""


def pool_step(
    pool: Pool, event: Event, ids: tuple, actor: Actor, target: int, epoch: int, lifecycle: Lifecycle
) -> Pool:
    """`slotwarden.model.pool.apply`, where a refused batch leaves the pool as it was."""
    try:
        return apply(pool, event, ids, actor, target, epoch, lifecycle)
    except LifecycleError:
        return pool


def record(state: State, fence: int, lifecycle: Lifecycle) -> Slot:
    """A well-formed record in `state`, owned by 7 and lent to 8 where the state has those."""
    spec = lifecycle.spec(state)
    return Slot(state, 7 if spec.owner is not None else NOBODY, 8 if spec.lent else NOBODY, fence if spec.fenced else 0)


def prove_conserved(
    state: State, fence: int, other_free: bool, event: Event, kind: ActorKind, actor: int, target: int, epoch: int
) -> Pool:
    """Property 3, one step of a conserved pool of two slots: any event by any actor on slot
    1, in any state, keeps the pool conserved, whether slot 2 is on the free list (FREE) or
    waiting for a fence (RELEASED). The step goes through the declared rules
    (`slotwarden.model.pool.apply`), so a rule that leaves an owner on a slot it frees or
    releases, or none on a slot it hands over, breaks it. A batch of several slots is a step
    of each, then one rebuild of the free list, which reads only which slots are FREE; the
    declaration-mutant stage checks every batch of two slots exhaustively. The fence, the
    actor's id and the step in flight are any ints >= 0, each taken through `abs` (as in
    `record_of`), so no path fails the precondition.

    post: conserved(__return__.slots, __return__.free, SUBJECT[0])
    """
    slots = (record(state, abs(fence), SUBJECT[0]), FREE_SLOT if other_free else Slot(State.RELEASED))
    free = tuple(i + 1 for i, s in enumerate(slots) if s.state is State.FREE)
    return pool_step(Pool(slots, free), event, (1,), Actor(kind, abs(actor)), target, abs(epoch), SUBJECT[0])


def shut_down(slot: Slot, completed: int, lifecycle: Lifecycle) -> Slot:
    """Everyone lets go of `slot`: the request it is lent to aborts, the request that owns it
    aborts, the session that owns it closes, each request reading it unlocks it, the cache
    evicts it (each only if there is one, in that order), and
    the scheduler fences step `completed`, which every release so far waits for. An illegal
    move leaves the slot as it was."""

    def fire(s: Slot, event: Event, actor: Actor) -> Slot:
        try:
            return step(s, event, actor, NOBODY, completed, lifecycle)
        except LifecycleError:
            return s

    if lifecycle.spec(slot.state).lent:
        slot = fire(slot, Event.ABORT, Actor.request(slot.borrower))
    if lifecycle.spec(slot.state).owner is ActorKind.REQUEST:
        slot = fire(slot, Event.ABORT, Actor.request(slot.owner))
    if lifecycle.spec(slot.state).owner is ActorKind.SESSION:
        slot = fire(slot, Event.CLOSE, Actor.session(slot.owner))
    while lifecycle.spec(slot.state).shared and slot.readers > 0:  # each reader lets go of its lock
        unlocked = fire(slot, Event.UNLOCK, Actor.request(0))
        if unlocked == slot:
            break
        slot = unlocked
    if lifecycle.spec(slot.state).owner is ActorKind.CACHE:
        slot = fire(slot, Event.EVICT, Actor.cache(slot.owner))
    if lifecycle.spec(slot.state).fenced:
        slot = fire(slot, Event.FENCE, Actor.fence(completed))
    return slot


def prove_quiescent(state: State, owner: int, borrower: int, fence: int, readers: int, completed: int) -> Slot:
    """Property 6: from a well-formed record in any state (a cached one with any number of
    locks held), once every request has aborted (letting go of its locks), every session has
    closed, the cache has evicted its nodes and the fence of the newest step has come, the
    slot is FREE. The lock counts explored are 0, 1, 2 (the unlock by a READER, to none) and
    the bound (the unlock by FULL, then by READERs): every count between them moves by the
    same rule, and exploring them all unrolls the unlock loop once per count.

    pre: exclusive(Slot(state, owner, borrower, fence, readers), SUBJECT[0])
    pre: readers <= 2 or readers == MAX_READERS
    pre: 0 <= fence <= completed
    post: quiescent((__return__,))
    """
    return shut_down(Slot(state, owner, borrower, fence, readers), completed, SUBJECT[0])


PROOFS = {
    "session_kept": prove_session_kept,
    "freed_once": prove_freed_once,
    "conserved": prove_conserved,
    "fence_respected": prove_fence_respected,
    "release_waits": prove_release_waits,
    "exclusive": prove_exclusive,
    "handles_follow": prove_handles_follow,
    "quiescent": prove_quiescent,
    "authority": prove_authority,
    "borrow_safe": prove_borrow_safe,
    "parks_what_ran": prove_parks_what_ran,
    "cache_read_only": prove_cache_read_only,
    "evict_unlocked": prove_evict_unlocked,
    "lock_counted": prove_lock_counted,
    "reads_published": prove_reads_published,
}
"""Every contracted function in model/, keyed by the proof's name (`registry.proved_by` says
which properties each establishes), but `prove_every_move`, which is the one-move proofs at once."""

MOVE_PROOFS = tuple(MOVE_CLAIMS)
"""The one-move proofs: those `prove_every_move` confirms in one exploration."""
