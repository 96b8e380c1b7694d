"""A pure pool of slots: the reference the torch pool is checked against, slot by slot.

`Pool.slots[i]` is the record of slot id `i + 1`; slot 0 is the pad slot, outside the machine.
Every operation takes a batch and is all-or-nothing: it returns a new pool or raises before
building one. Freed slots join the tail of the free list in the order the batch names them (a
fence names them in id order); alloc takes the head.

A cached slot's lock count is anonymous, as in the runtime ledger. A pool made with
`new_pool(n, locks=True)` also keeps who holds each lock (`locks`: one (request id, slot id)
pair per lock, at most one per request and slot): an unlock is accepted only from a request
that holds a lock on that slot, and `locks_match` holds of every pool `apply` returns.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from slotwarden.model.declaration import Lifecycle
from slotwarden.model.errors import BadSlotId, IllegalMove, shown
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.step import step
from slotwarden.model.vocabulary import FREE_SLOT, NOBODY, Actor, Event, State


class Pool(NamedTuple):
    slots: tuple  # tuple[Slot, ...]; slots[i] is slot id i + 1
    free: tuple  # tuple[int, ...]; the free list, head first
    locks: tuple | None = None  # sorted ((request id, slot id), ...): who holds which lock; None: not kept


def new_pool(capacity: int, locks: bool = False) -> Pool:
    """`locks=True` keeps the lock record (who holds each lock); without it the pool counts
    locks only, as the runtime ledger does."""
    return Pool((FREE_SLOT,) * capacity, tuple(range(1, capacity + 1)), () if locks else None)


def check_ids(ids: Sequence[int], capacity: int, event: Event, actor: Actor) -> None:
    """Raise `BadSlotId` unless every id is a real slot (1..capacity) named once."""
    seen = set()
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int):
            raise BadSlotId(f"not an integer: {shown(i)}", slot_id=i, event=event, actor=actor)
        if i == 0:
            raise BadSlotId("slot 0 is the pad slot, never allocated or freed", slot_id=i, event=event, actor=actor)
        if not 1 <= i <= capacity:
            raise BadSlotId(f"not a slot of a pool of {capacity}", slot_id=i, event=event, actor=actor)
        if i in seen:
            raise BadSlotId("named twice in one batch", slot_id=i, event=event, actor=actor)
        seen.add(i)


def apply(
    pool: Pool,
    event: Event,
    ids: Sequence[int],
    actor: Actor,
    target: int = NOBODY,
    epoch: int = 0,
    lifecycle: Lifecycle = LIFECYCLE,
) -> Pool:
    """Fire `event` by `actor` on every slot in `ids`; all of them move, or none does."""
    if not ids:
        raise BadSlotId("an empty batch", slot_id=NOBODY, event=event, actor=actor)
    check_ids(ids, len(pool.slots), event, actor)
    slots = list(pool.slots)
    for i in ids:
        slots[i - 1] = step(slots[i - 1], event, actor, target, epoch, lifecycle, slot_id=i)
    slots = tuple(slots)
    return Pool(slots, settle(pool.free, slots, ids), relock(pool, event, ids, actor))


def relock(pool: Pool, event: Event, ids: Sequence[int], actor: Actor) -> tuple:
    """The lock record after `actor` fired `event` on `ids` (each move already legal by the
    table): a lock adds the (request, slot) pair and is refused (`IllegalMove`) for a slot the
    request already holds a lock on; an unlock takes the pair away and is refused for a slot
    the request holds no lock on, whatever the count says (SGLang #27147: a dec that releases
    a lock someone else took)."""
    if pool.locks is None or event not in (Event.LOCK, Event.UNLOCK):
        return pool.locks
    locks = pool.locks  # compared, never hashed: CrossHair keeps the actor id symbolic
    for i in ids:
        if ((actor.id, i) in locks) is (event is Event.LOCK):
            rec = pool.slots[i - 1]
            why = "already holds a lock" if event is Event.LOCK else "holds no lock"
            raise IllegalMove(
                lambda: f"{actor} {why} on slot {i} ({rec.readers} held in all)",
                slot=rec,
                event=event,
                actor=actor,
                slot_id=i,
            )
    if event is Event.LOCK:
        return tuple(sorted(locks + tuple((actor.id, i) for i in ids)))
    return tuple(p for p in locks if p[0] != actor.id or p[1] not in ids)


def lock_holders(pool: Pool) -> dict:
    """Request id -> the slot ids it holds a lock on: what `locks_match` compares the lock
    counts against."""
    out: dict = {}
    for rid, i in pool.locks or ():
        out.setdefault(rid, []).append(i)
    return out


def alloc(pool: Pool, n: int, actor: Actor, lifecycle: Lifecycle = LIFECYCLE) -> tuple[Pool, tuple] | None:
    """Take the `n` slots at the head of the free list for `actor`; None if fewer are free."""
    if n < 1:
        raise BadSlotId(f"cannot allocate {n} slots", slot_id=NOBODY, event=Event.ALLOC, actor=actor)
    if n > len(pool.free):
        return None
    ids = pool.free[:n]
    return apply(pool, Event.ALLOC, ids, actor, lifecycle=lifecycle), ids


def fence(pool: Pool, completed: int, lifecycle: Lifecycle = LIFECYCLE) -> Pool:
    """The device finished step `completed`: every released slot waiting for it (or an
    earlier step) becomes free, and every cached slot whose write it was is published.
    Slots waiting for a later step stay as they are."""
    due = [i + 1 for i, s in enumerate(pool.slots) if lifecycle.spec(s.state).fenced and s.fence <= completed]
    if not due:
        return pool
    return apply(pool, Event.FENCE, due, Actor.fence(completed), lifecycle=lifecycle)


def settle(free: tuple, slots: tuple, moved: Sequence[int]) -> tuple:
    """The free list after the slots `moved` moved: slots still free keep their order, slots
    taken leave it, newly freed ones are appended in the order they were named."""
    kept = tuple(i for i in free if slots[i - 1].state is State.FREE)
    added = tuple(i for i in moved if slots[i - 1].state is State.FREE and i not in free)
    return kept + added


__all__ = [
    "Pool",
    "new_pool",
    "apply",
    "alloc",
    "fence",
    "check_ids",
    "settle",
    "relock",
    "lock_holders",
    "IllegalMove",
    "BadSlotId",
]
