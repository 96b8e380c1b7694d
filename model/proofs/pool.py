"""The proofs over a pool step and a shutdown: `prove_conserved` (one step of a conserved pool of
two slots keeps it conserved) and `prove_quiescent` (from any well-formed record, once everyone
lets go and the fence comes, the slot is FREE), with the helpers the declaration mutants reuse:
`BATCHES`, `pool_step`, `record` and `shut_down`. Contracts as in `move_proofs`.
"""

from __future__ import annotations

from slotwarden.model.declaration import Lifecycle
from slotwarden.model.errors import LifecycleError
from slotwarden.model.pool import Pool, apply
from slotwarden.model.proofs.move import SUBJECT
from slotwarden.model.properties import WINDOW, conserved, exclusive, quiescent  # noqa: F401  (contracts)
from slotwarden.model.step import step
from slotwarden.model.vocabulary import FREE_SLOT, MAX_READERS, NOBODY, Actor, ActorKind, Event, Slot, State  # noqa: F401

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
    aborts (or rolls back, a slot of its window), the session that owns it closes, each request
    reading it unlocks it, the cache evicts it (each only if there is one, in that order), and
    the scheduler fences step `completed`, which every release so far waits for. An illegal
    move leaves the slot as it was."""

    def fire(s: Slot, event: Event, actor: Actor) -> Slot:
        try:
            return step(s, event, actor, NOBODY, completed, lifecycle)
        except LifecycleError:
            return s

    if lifecycle.spec(slot.state).lent:
        slot = fire(slot, Event.ABORT, Actor.request(slot.borrower))
    if lifecycle.spec(slot.state).owner is ActorKind.REQUEST:  # a window's slot goes back by its rollback
        slot = fire(slot, Event.ROLLBACK if slot.state in WINDOW else Event.ABORT, Actor.request(slot.owner))
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
