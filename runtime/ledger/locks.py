"""The lock record: who holds each lock a cached slot's lock count counts.

The lock count (the `readers` column) says how many locks a published slot has; the record
(`locks`: slot -> the requests holding one) says whose they are, so that an unlock by a request
that holds no lock on the slot is refused even when others hold some, and a copy from a cached
slot only by a request holding a lock on it. A LOCK or UNLOCK batch is checked whole against
the record (`check_locks`) and then fired and recorded (`fire_locks`), all or nothing; the
ledger's own `apply` moves the counts only (the pool routes every LOCK and UNLOCK here).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from slotwarden.model.declaration import relation_of
from slotwarden.model.errors import BadSlotId, IllegalMove
from slotwarden.model.vocabulary import MAX_READERS, Actor, ActorKind, Event

from slotwarden.runtime import inputs
from slotwarden.runtime.ledger.queries import Queries


class LockBatch(NamedTuple):
    """A LOCK or UNLOCK batch, its ids checked: `actors[i]` locks or unlocks `ids[i]`. `who`:
    one request id per slot (a batch with one actor per slot), else None and `actor` the one."""

    event: Event
    ids: np.ndarray
    actors: list
    who: np.ndarray | None
    actor: Actor | None


class Locks(Queries):
    """`SlotLedger`'s lock record (a mixin over `LedgerState` and its queries)."""

    def lock_holders(self, slot: int) -> frozenset:
        """The requests holding a lock on `slot`."""
        self.check_thread()
        return frozenset(self.locks.get(inputs.slot(slot, self.capacity, "lock_holders"), ()))

    def lock_problems(self) -> list:
        """Where the lock counts and the record of lock holders disagree (text, up to 8 slots)."""
        self.check_thread()
        readers = self.cols.readers
        recorded = np.zeros(readers.shape, dtype=np.int64)
        for slot, holders in self.locks.items():
            recorded[slot] = len(holders)
        bad = np.flatnonzero(recorded != readers)
        return [
            f"slot {int(s)}: {int(readers[s])} locks counted, held by requests {sorted(self.locks.get(int(s), ()))}"
            for s in bad[:8]
        ]

    def lock_batch(self, event: Event, ids, request, each: bool) -> LockBatch:
        """`ids` locked or unlocked (`event`) by one request (`each` False: `request` an `Actor`)
        or each slot by its own (`each`: one request id per slot), validated and its ids checked
        (a LOCK names each slot once; an UNLOCK may name a slot once per request giving a lock
        back). `actors` is empty for an actor that is not a request: the event, fired, refuses
        it in the model's words. Changes nothing."""
        self.check_thread()
        event = inputs.event(event)
        if each:
            if event is Event.UNLOCK:  # a slot once per lock given back: at most the locks a pool can hold
                self._fits_locks(ids)
            arr = inputs.ids(ids, event, None, self.capacity if event is Event.LOCK else None)  # a LOCK: each once
            who = inputs.actor_ids(request, arr.size, event)
            if event is Event.LOCK or arr.size == 0:
                arr = self._ids(arr, event, None)  # a slot named twice: one lock too many
            else:  # several requests may each give back their lock on one slot
                self._ids(np.unique(arr), event, None)
            return LockBatch(event, arr, [Actor.request(r) for r in who.tolist()], who, None)
        actor = inputs.actor(request, event)
        arr = self._ids(ids, event, actor)
        actors = [actor] * arr.size if actor.kind is ActorKind.REQUEST else []
        return LockBatch(event, arr, actors, None, actor)

    def _fits_locks(self, ids) -> None:
        """Refuse, by its length and before it is converted, an UNLOCK batch naming more slots
        than there can be locks (each slot's count is at most MAX_READERS)."""
        n, limit = inputs.length(ids), self.capacity * MAX_READERS
        if n is not None and n > limit:
            raise BadSlotId(
                f"an unlock batch of {n} ids, more than the {limit} locks a pool of {self.capacity} slots can hold "
                "(refused by its length)",
                slot_id=None,
                event=Event.UNLOCK,
                actor=None,
                batch=ids,
            )

    def check_locks(self, ids: np.ndarray, actors: list, event: Event) -> None:
        """Refuse (`IllegalMove`, naming the slot and the request; nothing changes) a lock by a
        request that already holds one on the slot, or an unlock by one that holds none, or
        either named twice for one slot in the batch."""
        self.check_thread()
        want = event is Event.UNLOCK  # an unlock needs a lock of its own; a lock must not have one
        seen = set()
        for s, request in zip(ids.tolist(), actors):
            twice = (s, request.id) in seen
            seen.add((s, request.id))
            if twice or (request.id in self.locks.get(s, ())) is not want:
                if self._table_refuses(ids, actors, event):  # the table is judged first: its refusal (in fire) wins
                    return
                rec = self._record(s)
                why = "is named twice in this batch" if twice else "holds no lock" if want else "already holds a lock"
                held = sorted(self.locks.get(s, ()))
                raise IllegalMove(
                    f"{request} {why} on slot {s} ({rec.readers} locks held, by requests {held})",
                    slot=rec,
                    event=event,
                    actor=request,
                    slot_id=s,
                )

    def _table_refuses(self, ids: np.ndarray, actors: list, event: Event) -> bool:
        """Whether the declaration's table refuses `event` on a slot of the batch (read on the
        refusal path only: the model judges every move by the table before the lock record)."""
        lifecycle = self.lifecycle
        for s, actor in zip(ids.tolist(), actors):
            rec = self._record(s)
            if lifecycle.rule(rec.state, event, relation_of(lifecycle.spec(rec.state), rec, actor)) is None:
                return True
        return False

    def fire_locks(self, batch: LockBatch, fire: Callable, fire_each: Callable) -> None:
        """Fire a batch the record allows (`check_locks`) and record it: `fire(event, ids,
        actor)` for one actor, `fire_each(event, ids, actor_ids)` for one per slot (the ledger's
        `apply`/`apply_each`, or a pool's `fire`/`fire_each` routed to them). If a fire raises,
        the record is left as it was."""
        event, ids = batch.event, batch.ids
        if batch.who is None:
            fire(event, ids, batch.actor)
        else:
            _fire_rounds(event, ids, batch.who, fire_each)
        for s, a in zip(ids.tolist(), batch.actors):
            if event is Event.LOCK:
                self.locks.setdefault(s, set()).add(a.id)
            else:
                holders = self.locks[s]
                holders.discard(a.id)
                if not holders:
                    del self.locks[s]


def _fire_rounds(event: Event, ids: np.ndarray, who: np.ndarray, fire_each: Callable) -> None:
    """`fire_each` of UNLOCK over a batch that may name a slot more than once (each time by
    another request): the k-th naming of each slot goes in round k, one call a round (one round
    when no slot repeats). A later round cannot be refused while the lock record matches the
    counts (the record was checked); if one raises all the same, the rounds before it are undone
    (a LOCK each) and the error goes on."""
    if np.unique(ids).size == ids.size:
        fire_each(event, ids, who)
        return
    order = np.argsort(ids, kind="stable")
    ranked = ids[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    rank = np.empty_like(order)
    rank[order] = np.arange(ids.size) - np.repeat(starts, np.diff(np.r_[starts, ids.size]))
    done = []
    try:
        for k in range(int(rank.max()) + 1):
            pick = rank == k
            fire_each(event, ids[pick], who[pick])
            done.append(pick)
    except BaseException:
        for pick in reversed(done):
            fire_each(Event.LOCK, ids[pick], who[pick])
        raise
