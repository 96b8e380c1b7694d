"""`GuardedAllocator`: a drop-in for SGLang's `MambaSlotAllocator` that enforces the lifecycle.

It has the allocator's own API (`alloc(need_size)`, `free(free_index)`, `available_size()`,
`clear()`; every other attribute is the wrapped allocator's). An engine swaps it in with one
assignment and says who acts with `with allocator.acting(Actor.request(rid)):` (or `ACTING`).

`free` means "back to the free list": which lifecycle event that is follows from the slot's state
and the acting actor's relation to it, as the declaration says (`model/free.py`). A borrower has
no such move, so freeing a session's lent slot raises at the call, as do double frees, the pad
slot and the `-1` sentinel, the engine's free list untouched; a free is all or nothing. Released
slots reach the engine's free list at the fence of the step that may still use them (at once for
an engine that never calls `launch`). Calls outside any `acting` context are refused
(`unattributed="refuse"`) or trusted (`"trust"`: an alloc is owned by `ANONYMOUS`, a free acts
as each slot's owner, so state errors still raise but nobody's identity is checked).
"""

from __future__ import annotations

import struct
from contextvars import ContextVar

import numpy as np
import torch

from slotwarden.model.errors import BadInput, LifecycleError, SlotwardenError
from slotwarden.model.free import free_rule
from slotwarden.model.table import NO_KIND
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Relation, State

from slotwarden.runtime import inputs
from slotwarden.runtime.guard import _CPU, _INT64, LedgerGuard, host_raw
from slotwarden.runtime.ledger.lane import lane
from slotwarden.runtime.guard_tables import _BORROWER, _ILLEGAL, _NONE, _OWNER, _free_table, _one_move
from slotwarden.runtime.ledger.codes import SMALL

ACTING: ContextVar[Actor | None] = ContextVar("slotwarden_acting", default=None)
"""Who makes the allocator calls of the current context (None: nobody said)."""

UNATTRIBUTED = ("refuse", "trust")

ANONYMOUS = -2
"""The request id that owns what an unattributed alloc takes under `unattributed="trust"`."""

_FREE = int(State.FREE)
_FREE_BYTE = bytes((_FREE,))
_EVENTS = tuple(Event)  # by number
_REQUEST = ActorKind.REQUEST
_first_id = struct.Struct("=q").unpack_from  # the first of the native int64 ids in a bytes copy


class acting:
    """Attribute every allocator call in the block to `actor`: `with acting(actor):` (the
    block's value is the actor). A class rather than a generator: it is on every round trip."""

    __slots__ = ("actor", "_token")

    def __init__(self, actor: Actor):
        self.actor, self._token = actor, None

    def __enter__(self) -> Actor:
        if self._token is not None:
            raise RuntimeError("this acting block is entered already: make one per `with`")
        self._token = ACTING.set(self.actor)
        return self.actor

    def __exit__(self, *exc) -> None:
        token, self._token = self._token, None
        ACTING.reset(token)


class Unattributed(LifecycleError):
    """An allocator call made outside any `acting` context, with `unattributed="refuse"`."""

    def __init__(self, call: str):
        self.call = call
        super().__init__(
            f"{call} with no acting actor: wrap the engine's call in `with allocator.acting(Actor.request(rid)):` "
            "or build the allocator with unattributed='trust'"
        )


class HeldSlots(LifecycleError):
    """`clear()` while some slot is still held or waits for a fence: naming the first one."""


class GuardedAllocator:
    """Wraps `allocator` (SGLang's `MambaSlotAllocator` shape; slots 1..capacity, 0 the pad slot)
    with the ledger; `capacity`: what it has free now; `trace` writes a trace (docs/traces.md);
    `fills`: keep each slot's fill for the step check's first-read rule (`LedgerGuard`)."""

    acting = staticmethod(acting)
    LANE = True
    """Whether the usual calls take the compiled lane (`ledger.lane`; the tests turn it off)."""

    def __init__(self, allocator, capacity=None, *, unattributed: str = "refuse", trace=None, fills: bool = False):
        if not (isinstance(unattributed, str) and unattributed in UNATTRIBUTED):
            raise BadInput(f"unattributed must be one of {UNATTRIBUTED}", argument="unattributed", value=unattributed)
        if capacity is None:
            capacity = int(allocator.available_size())
        self.unattributed = unattributed
        self.guard = LedgerGuard(allocator, capacity, trace=trace, fills=fills)
        self.ledger = self.guard.ledger
        self._free_event, self._free_dest = _free_table(self.ledger.lifecycle)
        # the same tables as lists, for the per-slot path of small frees
        self._free_lists = self._free_event.tolist()
        self._owner_kinds, self._lent = self.ledger.owner_kinds.tolist(), self.ledger.lent.tolist()
        self._event = {int(e): e for e in Event}
        self._one_move = _one_move(self.ledger, self._free_event)
        if self.ledger.mover is not None:  # the compiled move costs less than the per-slot path, even for one slot
            self.ledger.small = 0
        # the usual alloc and free in one C call each (`ledger.lane`), bound over the methods below
        # (which it hands every other call); a subclass that overrides one keeps its own
        cls = type(self)
        self._lane = lane(self, cls, ACTING) if self.LANE else None
        if self._lane is not None and cls.alloc is GuardedAllocator.alloc:
            self.alloc = self._lane.alloc
        if self._lane is not None and cls.free is GuardedAllocator.free and cls._free_one_move is _FREE_ONE_MOVE:
            self.free = self._lane.free

    @property
    def allocator(self):
        return self.guard.allocator

    def __getattr__(self, name):  # the rest of the engine allocator's API, unchanged
        if name in ("guard", "ledger"):
            raise AttributeError(name)
        return getattr(self.guard.allocator, name)

    # -- SGLang's API ------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """`need_size` slots for the acting request, or None when fewer are free."""
        actor = ACTING.get()
        if actor is not None and type(need_size) is int and need_size > 0:  # the usual call
            return self.guard.alloc(need_size, actor)  # which checks the actor
        if inputs.is_int(need_size) and need_size == 0:
            return self.allocator.alloc(0)  # nothing moves
        actor = self._actor("alloc") or Actor.request(ANONYMOUS)
        return self.guard.alloc(need_size, actor)

    def free(self, free_index: torch.Tensor) -> None:
        """Give `free_index` back: each slot makes the move the declaration gives a free by the
        acting actor from its state (all slots, or none and the error).

        The engine's `free` runs inside the ledger's write (its `before_write` hook), once the
        move is checked and before the ledger records it: slots that become FREE at once go to
        the engine with the move, released ones with the fence that follows it. If the engine's
        `free` raises, the ledger keeps the slots where they were for that call (a rollback:
        still held; a finish: RELEASED, handed to the engine again at the next fence), so no slot
        is FREE in the ledger while missing from the engine's free list. A free of the slots of
        several owners (trusted) is one multi-actor ledger call (`apply_each`), and one of
        several events calls the engine once, in its first ledger call, before any is written."""
        actor = ACTING.get()
        if actor is not None and type(free_index) is torch.Tensor and self._free_one_move(free_index, actor):
            return
        if isinstance(free_index, torch.Tensor) and free_index.numel() == 0:
            return
        actor = self._actor("free")
        ids = self.ledger.checked_ids(free_index, "free", actor or Actor.request(ANONYMOUS))
        groups = self._moves(ids, actor)  # all checked: only the engine can raise below
        # one ledger call per event (one for the usual free, whatever its owners: one actor per
        # slot); the engine's free once, in the first call's hook, with every slot the free
        # makes FREE (the later calls are checked already: they cannot refuse)
        hook = self._give_freed
        if len(groups) > 1:
            freed = ids[self._move_vectors(ids, actor)[2]]
            hook = lambda batch: self.guard._give_back(freed)  # noqa: E731
        for event, by, group in groups:
            if isinstance(by, Actor):
                self.ledger.apply(event, group, by, before_write=hook)
            else:
                self.ledger.apply_each(event, group, by, before_write=hook)
            hook = None
        # releases whose step has finished (all of them, with no step launched): this call's
        # slots first, in its order, as the engine's own free would list them
        self.ledger.fence(before_write=lambda batch: self.guard._give_back(_first(ids, _freed(batch))))

    def _free_one_move(self, free_index: torch.Tensor, actor) -> bool:
        """The usual free (the acting actor's slots, all making the same move: a request's
        rollback or finish) in one checked ledger call, the engine handed `free_index` itself.
        False, with nothing changed, for anything else (another dtype or device, a bad or
        mixed batch, a refused move): `free`'s general path then does it or says why.

        The move is the free table's for the first slot. A batch of more is that one move for
        every slot if they are all in the first one's state and that state's every key the
        ledger accepts for the move is one the free table maps to it (`_one_move`). Host ids
        take the raw lane: their copy (`host_raw`) checked and written by one kernel call
        (`SlotLedger.apply_raw`), the engine's `free` in between, no numpy call. The rest (CUDA
        ids, no compiled move, a batch the kernel declines) take the array lane
        (`_free_arrays`), which also says why a declined batch is not one move."""
        shape = free_index.shape
        if free_index.dtype is not _INT64 or len(shape) != 1:
            return False
        ledger, n = self.ledger, shape[0]
        mover = ledger.mover
        if mover is None or not free_index.is_cpu or self.guard.device is not _CPU or not 0 < n <= ledger.capacity:
            return self._free_arrays(free_index, actor)
        raw = host_raw(free_index, n, mover)
        if raw is None:
            return self._free_arrays(free_index, actor)
        first = _first_id(raw)[0]
        if not 1 <= first <= ledger.capacity:
            return False
        actor = ledger.checked_actor(actor, "free")
        # the free table's event for the first slot, read from the ledger's memoryviews
        views = ledger.views
        state, kind = views.state[first], actor[0]
        events = self._free_lists[kind]
        if state >= len(events):
            return False
        if kind is _REQUEST and self._lent[state] and views.borrower[first] == actor[1]:
            move = events[state][_BORROWER]
        else:
            move = events[state][
                _OWNER if self._owner_kinds[state] == kind and views.owner[first] == actor[1] else _NONE
            ]
        if move == _ILLEGAL or (n > 1 and not self._one_move[kind][move][state]):
            return False
        quiet = not ledger.awaits_fence() and ledger.launched == ledger.completed  # no fence could free others
        # the engine's `free` between the kernel's check and its write (a `SlotwardenError` out of
        # it is the engine's own, from a nested guard: the raw move itself refuses by its code)
        got = ledger.apply_raw(_EVENTS[move], raw, actor, self.guard.allocator.free, free_index)
        if got < 0:
            return self._free_arrays(free_index, actor)
        if not (got & 0xFF == _FREE and quiet):  # released slots whose step has finished go to the engine now
            ledger.fence(before_write=lambda batch: self._give_due(batch, first, raw, free_index, quiet))
        return True

    def _fence_after_free(self, first: int, raw: bytes, free_index: torch.Tensor, quiet: bool) -> None:
        """The compiled lane's free, written: released slots whose step has finished go to the
        engine now (`_free_one_move`'s fence)."""
        self.ledger.fence(before_write=lambda batch: self._give_due(batch, first, raw, free_index, quiet))

    def _free_arrays(self, free_index: torch.Tensor, actor) -> bool:
        """`_free_one_move` through the ledger's arrays: every slot in the first one's state is
        checked in the ledger's `before_write`, before anything is written. A device sync for
        CUDA ids (`.item()`, `host_ids`): the ledger reads them on the host."""
        ledger = self.ledger
        n = free_index.numel()
        if free_index.dtype is not torch.int64 or free_index.dim() != 1 or free_index.device != self.guard.device:
            return False
        if n == 1:
            first, ids = free_index.item(), None
        elif 1 < n <= ledger.capacity and (ids := inputs.host_ids(free_index)) is not None:
            first = ids.item(0)
        else:
            return False
        if not 1 <= first <= ledger.capacity:
            return False
        actor = inputs.actor(actor, "free")
        views = ledger.views
        state, kind = views.state[first], actor.kind
        events = self._free_lists[kind]  # the free table for this kind, read for the first slot
        if state >= len(events):
            return False
        owns = self._owner_kinds[state] == kind and views.owner[first] == actor.id
        lent = kind is ActorKind.REQUEST and self._lent[state] and views.borrower[first] == actor.id
        move = events[state][_BORROWER if lent else _OWNER if owns else _NONE]
        if move == _ILLEGAL or (n > 1 and not self._one_move[kind][move][state]):
            return False
        quiet = not ledger.awaits_fence() and ledger.launched == ledger.completed  # no fence could free others
        asked, freed = False, False
        same = bytes((state,)) * n if n > 1 else None

        def hand_over(batch) -> None:  # every check passed, nothing written yet
            nonlocal asked, freed
            if same is not None and not self._one_state(batch.before, same):  # not one state: the general path
                raise _NotOneMove
            if batch.after.item(0) == _FREE:
                asked = freed = True
                self.guard.allocator.free(free_index)

        event = self._event[move]
        try:
            if ids is None:
                ledger.apply_one(event, first, actor, before_write=hand_over)
            else:
                ledger.apply(event, ids, actor, before_write=hand_over)
        except SlotwardenError:  # a refusal, or `_NotOneMove`
            if asked:  # the engine's own error (`SlotwardenError` from a nested guard): it moved nothing
                raise
            return False
        if not (freed and quiet):  # released slots whose step has finished go to the engine now
            ledger.fence(before_write=lambda batch: self._give_due(batch, first, ids, free_index, quiet))
        return True

    @staticmethod
    def _one_state(before: np.ndarray, same: bytes) -> bool:
        """Whether the states of a batch (`before`, one byte a slot) are all the first one's."""
        return before.tobytes() == same

    def _give_due(self, batch, first: int, ids, free_index: torch.Tensor, alone: bool) -> None:
        """A fence's freed slots to the engine, this free's (`ids`: an array, the bytes of one,
        or None for the one slot `first`) first (`alone`: nothing else was waiting, so all of
        them are this free's: the caller's tensor itself)."""
        due = _freed(batch)
        if alone and due.size == free_index.numel():
            self.allocator.free(free_index)
        elif due.size:
            self.guard._give_back(_first(_as_ids(first, ids), due))

    def _give_freed(self, batch) -> None:
        freed = batch.ids[batch.after == _FREE] if _FREE in batch.after else None
        if freed is not None and freed.size:
            self.guard._give_back(freed)

    def available_size(self) -> int:
        return self.allocator.available_size()

    def clear(self) -> None:
        """The engine's `clear()`, legal only when no slot is held or waits for a fence."""
        self.guard.fence()  # releases whose step has finished go back first
        held = np.flatnonzero(self.ledger.cols.state[1:] != _FREE) + 1
        if held.size:
            rec = self.ledger.record(int(held[0]))
            owner = "nobody" if rec.owner == NOBODY else str(rec.owner)
            raise HeldSlots(
                f"clear with {held.size} slots not FREE: slot {int(held[0])} is {rec.state.name} (owner {owner})\n"
                + self.ledger.recorder.explain(held[:1])
            )
        self.allocator.clear()

    # -- the lifecycle's other moves, for engines with sessions ------------------------------
    # These always need an acting actor (whatever `unattributed` says): they name who moves.
    def fire(self, event: Event, ids, target: int = NOBODY) -> None:
        """The acting actor fires `event` on `ids` (e.g. the rollback, finish or abort of a
        turn that borrows its session's slot, which returns the slot to the session)."""
        event = inputs.event(event, ACTING.get())  # before its name is read
        self.guard.fire(event, ids, self._required(event.name.lower()), target)
        self.guard.fence()

    def admit(self, ids) -> None:
        """The acting request's candidate slots join the running batch (a later free is then a
        finish, released at the step's fence, rather than a rollback)."""
        self.guard.fire(Event.ADMIT, ids, self._required("admit"))

    def park(self, ids, session: int) -> None:
        """The acting request hands its running slots to `session` (end of a session's turn)."""
        self.guard.fire(Event.PARK, ids, self._required("park"), session)

    def lend(self, ids, request: int) -> None:
        """The acting session lends its parked slots to its next turn, `request`."""
        self.guard.fire(Event.LEND, ids, self._required("lend"), request)

    def close(self) -> torch.Tensor:
        """The acting session ends: every slot it owns is released (raises if one is lent)."""
        session = self._required("close")
        ids = self.ledger.held_by(session)
        if ids.size:
            self.guard.fire(Event.CLOSE, ids, session)
        self.guard.fence()
        return torch.from_numpy(ids)

    def check_step(self, slot_indices, actors, pad: int = 0, sources=None) -> None:
        """`LedgerGuard.check_step` on this ledger; `actors` per row (a step's rows are many requests')."""
        self.guard.check_step(slot_indices, actors, pad, sources)

    def zeroed(self, ids) -> None:
        self.guard.zeroed(ids)  # `LedgerGuard.zeroed`: the engine zeroed `ids`

    def copied(self, dst, src=None) -> None:
        self.guard.copied(dst, src)  # `LedgerGuard.copied`: the engine copied `src` into `dst`

    def launch(self, done=None) -> int:
        """A step goes to the device (see `SlotLedger.launch`); releases wait for its fence."""
        return self.guard.launch(done)

    def fence(self, step: int | None = None) -> torch.Tensor:
        return self.guard.fence(step)

    def audit(self, live_requests=None, live_sessions=None):
        return self.guard.audit(live_requests, live_sessions)

    # -- internals ---------------------------------------------------------------------------
    def _actor(self, call: str) -> Actor | None:
        """The acting actor (checked: `BadActor` for one that is not), or None when trusted."""
        actor = ACTING.get()
        if actor is None:
            if self.unattributed == "refuse":
                raise Unattributed(call)
            return None
        return inputs.actor(actor, call)

    def _required(self, call: str) -> Actor:
        actor = ACTING.get()
        if actor is None:
            raise Unattributed(call)
        return inputs.actor(actor, call)

    def _moves(self, ids: np.ndarray, actor: Actor | None) -> list:
        """The moves of a free: (event, by, ids) groups, one per event (one for the usual
        batch), `by` the acting actor, the one owner, or (trusted, several owners) their ids,
        one per slot. Raises the model's `IllegalFree` for the first slot that has no legal
        free."""
        if actor is not None and ids.size <= SMALL:
            events = self._move_slots(ids.tolist(), actor)
            if events is not None and events.count(events[0]) == len(events):
                return [(self._event[events[0]], actor, ids)]
        events, who, _ = self._move_vectors(ids, actor)
        if actor is not None and (events[1:] == events[0]).all():
            return [(Event(int(events[0])), actor, ids)]
        groups = []
        for event in np.unique(events).tolist():  # an event's actor kind is the declaration's: one per event
            pick = events == event
            by, kind = actor, self.ledger.lifecycle.event(Event(event)).actor
            if actor is None:
                mine = who[pick]
                by = Actor(kind, int(mine[0])) if (mine == mine[0]).all() else mine
            groups.append((Event(event), by, ids[pick]))
        return groups

    def _move_slots(self, ids: list, actor: Actor) -> list | None:
        """Per slot, the event of its free by `actor`, a slot at a time (the free table read as
        lists); None if a slot has none (the vectorised path then says why)."""
        views = self.ledger.views
        state, owner, borrower = views.state, views.owner, views.borrower
        kind, who = int(actor.kind), actor.id
        table, owner_kind, lent = self._free_lists[kind], self._owner_kinds, self._lent
        borrows = actor.kind is ActorKind.REQUEST
        events = []
        for s in ids:
            st = state[s]
            if st >= len(table):  # not a declared state: the vectorised path reports it
                return None
            rel = _OWNER if owner_kind[st] == kind and owner[s] == who else _NONE
            if borrows and lent[st] and borrower[s] == who:
                rel = _BORROWER
            event = table[st][rel]
            if event == _ILLEGAL:
                return None
            events.append(event)
        return events

    def _move_vectors(self, ids: np.ndarray, actor: Actor | None):
        """Per slot, the event of its free, who fires it (the acting actor's id, or each slot's
        owner when trusted) and whether it ends FREE: (events, ids, freed). Raises the model's
        `IllegalFree` for the first slot that has no legal free."""
        c = self.ledger.cols
        state = c.state[ids]
        owner_kind = self.ledger.owner_kinds[state]
        if actor is None:  # trusted: each slot's owner frees it
            has_owner = owner_kind != NO_KIND
            kinds = np.where(has_owner, owner_kind, int(ActorKind.REQUEST)).astype(np.int64)
            who = np.where(has_owner, c.owner[ids], ANONYMOUS)
            relation = np.where(has_owner, int(Relation.OWNER), int(Relation.NONE))
        else:
            kinds, who = int(actor.kind), actor.id
            relation = np.where((owner_kind == kinds) & (c.owner[ids] == who), int(Relation.OWNER), int(Relation.NONE))
            if actor.kind is ActorKind.REQUEST:
                relation = np.where(
                    self.ledger.lent[state] & (c.borrower[ids] == who), int(Relation.BORROWER), relation
                )
        events = self._free_event[kinds, state, relation]
        freed = self._free_dest[kinds, state, relation] == _FREE
        bad = events == _ILLEGAL
        if bad.any():
            p = int(np.argmax(bad))
            slot = int(ids[p])
            by = actor or Actor(ActorKind(int(kinds[p])), int(who[p]))
            free_rule(self.ledger.record(slot), by, self.ledger.lifecycle, slot)
            raise AssertionError("the free table and the model disagree")  # free_rule raised above
        return events, who, freed


_FREE_ONE_MOVE = GuardedAllocator._free_one_move


class _NotOneMove(SlotwardenError):
    """Raised by `_free_one_move` in `before_write` when a batch is not one move (caught there)."""


def _freed(batch) -> np.ndarray:
    """The ids of a fence's batch that it makes FREE (a published cached slot stays cached)."""
    after = batch.after
    return batch.ids if after.tobytes() == _FREE_BYTE * after.size else batch.ids[after == _FREE]


def _as_ids(first: int, ids) -> np.ndarray:
    """A free's ids as an int64 array of their own: `ids` (an array, the bytes of one, a range), or
    the one slot `first` (`ids` None or that slot itself)."""
    if ids is None or type(ids) is int:
        return np.array([first], dtype=np.int64)
    if type(ids) is range:  # the compiled lane's record of one run
        return np.arange(ids.start, ids.stop, dtype=np.int64)
    return np.frombuffer(ids, dtype=np.int64).copy() if type(ids) is bytes else ids


def _first(ids: np.ndarray, due: np.ndarray) -> np.ndarray:
    """`due` with the ids of `ids` first, in their order."""
    mine = np.isin(ids, due)
    if mine.all() and ids.size == due.size:
        return ids
    return np.concatenate((ids[mine], due[~np.isin(due, ids)]))
