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
"""

from __future__ import annotations

from .declaration import Lifecycle
from .errors import LifecycleError
from .lifecycle import LIFECYCLE
from .properties import (  # noqa: F401  the contracts in the docstrings call them
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
from .pool import Pool, apply
from .step import step
from .vocabulary import FREE_SLOT, MAX_READERS, NOBODY, Actor, ActorKind, Event, Slot, State  # noqa: F401  (contracts)

SUBJECT: list[Lifecycle] = [LIFECYCLE]
"""The lifecycle under proof (a one-element list so tests can swap it)."""


def _step(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """`step`, where an illegal move leaves the slot as it was (as the runtime guarantees)."""
    try:
        return step(slot, event, actor, target, epoch, SUBJECT[0])
    except LifecycleError:
        return slot


def prove_session_kept(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 1, one move: only the owning session's close takes a slot out of its session.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: session_kept(slot, event, actor, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_freed_once(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 2, one move: a slot that is not held is never given back again.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: freed_once(slot, event, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_fence_respected(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 4, one move: a released slot is free only after the fence of its step.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: fence_respected(slot, actor, __return__)
    """
    return _step(slot, event, actor, target, epoch)


def prove_exclusive(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 5, one move: exclusive ownership is inductive; no holder keeps a handle.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0 and actor.id >= 0
    post: exclusive(__return__, SUBJECT[0])
    post: __return__.owner in (NOBODY, slot.owner, actor.id, target)
    """
    return _step(slot, event, actor, target, epoch)


def prove_release_waits(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 4, one move: a slot released while step `epoch` is in flight waits for it.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: release_waits(slot, __return__, epoch, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_handles_follow(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 5, one move: whoever a move takes the slot from keeps no handle on it.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: handles_follow(slot, event, actor, target, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_authority(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 8, one move: only the owner, or the borrower, moves a held slot; only the owning
    session lends it, to a request.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: authority(slot, event, actor, target, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_borrow_safe(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 9, one move: a lent slot stays in its session until its borrower gives it back.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: borrow_safe(slot, actor, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_parks_what_ran(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 10, one move: a session takes over only a slot of the running batch.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: parks_what_ran(slot, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_cache_read_only(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 11, one move: a request never writes a cached slot, it only locks or unlocks it.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: cache_read_only(slot, actor, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_evict_unlocked(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 12, one move: a cached slot leaves its node only unlocked, released to the fence.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: evict_unlocked(slot, __return__, epoch, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_lock_counted(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 13, one move: the lock count moves by one, by a lock or an unlock, never below 0.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: lock_counted(slot, event, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_reads_published(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 14, one move: only published state is locked; publication waits for the fence.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: reads_published(slot, actor, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


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
    state: State, fence: int, other_free: bool, event: Event, actor: Actor, target: int, epoch: int
) -> Pool:
    """Property 3, one step of a conserved pool of two slots: any event by any actor on slot
    1, in any state, keeps the pool conserved, whether slot 2 is on the free list (FREE) or
    waiting for a fence (RELEASED). The step goes through the declared rules
    (`slotwarden.model.pool.apply`), so a rule that leaves an owner on a slot it frees or
    releases, or none on a slot it hands over, breaks it. A batch of several slots is a step
    of each, then one rebuild of the free list, which reads only which slots are FREE; the
    declaration-mutant stage checks every batch of two slots exhaustively.

    pre: fence >= 0 and epoch >= 0 and actor.id >= 0
    post: conserved(__return__.slots, __return__.free, SUBJECT[0])
    """
    slots = (record(state, fence, SUBJECT[0]), FREE_SLOT if other_free else Slot(State.RELEASED))
    free = tuple(i + 1 for i, s in enumerate(slots) if s.state is State.FREE)
    return pool_step(Pool(slots, free), event, (1,), actor, target, epoch, SUBJECT[0])


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
which properties each establishes)."""
