"""The ownership ledger: per slot a state, an owner, a borrower and a fence, enforced by the
table compiled from the model.

The ledger lives on the host, in torch CPU tensors worked on through numpy views: checking a
batch never needs a device sync, whatever device holds the state (see `StatePool`). Every
operation is a batch of one lifecycle event (by one actor, or with `apply_each` one actor per
slot) and is all-or-nothing: the whole batch is checked against the table and the owner rule
(duplicates included) before anything is written, and on a violation the model's typed error
names the slot, its state, owner, the event and the actor. Every argument passes the one
validation layer (`runtime.inputs`) first.

Two paths over one storage: a batch of up to `small` slots (the common case: one request's
slot) is checked and written a slot at a time through memoryviews of the same columns, the
compiled table read as lists; a larger one by the vectorised kernel, which moves a uniform batch
(one state, one relation to its actor: the usual case) with one key and one scatter per column,
checks without numpy reductions (byte comparisons of the gathered columns, the duplicate stamp),
and refuses by a byte search of the next states. A batch the per-slot path would refuse goes
whole to the vectorised path, which raises: both paths give the same results and the same
errors. A fence reads the slots released per step, not the whole pool.

Contracts:
- all or nothing: a call that raises, a typed error for bad input or anything raised by a
  `before_write` hook (the pool's zeroing, an engine's `free`), leaves every column, the free
  list, the counters and the flight recorder as they were;
- single-threaded: the first thread that calls a ledger owns it; a call from any other thread
  raises `WrongThread` before touching anything (one integer comparison a call). `adopt()`
  hands the ledger over to the calling thread.

Memory: 31 bytes a slot (state 1, owner 8, borrower 8, fence 4, last event 1, lock count 1,
free ring 4, duplicate stamp 4; state and last event are the two bytes of one 16-bit word, so one
scatter writes both), plus the flight recorder's bounded list of recent batches.

Fast lanes (each compared with the general path by tests/test_ledger_paths.py): one slot is
allocated, and one id in a plain int64 array checked, inline; the actor accepted last is not
validated again (an `Actor` is immutable); a large batch equal to the last one found real and
distinct (or handed out by `alloc`) skips the duplicate stamp.
"""

from __future__ import annotations

import sys
import threading
from _thread import get_ident
from typing import Callable, NamedTuple

import numpy as np
import torch

from slotwarden.kernels.transition import (
    Batch,
    Columns,
    BITS,
    as_lists,
    compile_events,
    expand,
    look_up,
    look_up_slots,
    slot_views,
    write,
    write_slots,
)
from slotwarden.model.declaration import Lifecycle, Source
from slotwarden.model.errors import BadInput, BadSlotId, FenceError, IllegalMove, WrongThread
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.table import ILLEGAL, NO_KIND, compile_table
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Group, Slot, State

from . import inputs
from .recorder import Actors, FlightRecorder

CHECKS = ("strict", "off")
_ALLOC, _FENCE, _SCHEDULER = Event.ALLOC, Event.FENCE, ActorKind.SCHEDULER  # enum member look-ups cost
_FREE = int(State.FREE)
_RELEASED = int(State.RELEASED)
_FREE_BYTE, _ILLEGAL_BYTE, _RELEASED_BYTE = bytes((_FREE,)), bytes((ILLEGAL,)), bytes((_RELEASED,))
_ID_MAX = inputs.ID_MAX
_INT64, _UNIT = np.dtype(np.int64), (8,)
_ONE = np.zeros(1, dtype=np.int64)  # copied for a one-slot alloc's result (never written itself)
_TOP = 7 if sys.byteorder == "little" else 0  # the byte of an int64 that holds its sign
_SCRATCH = ("stamp",)
SMALL = 8
"""Batches of up to this many slots take the per-slot path (Python over the same columns, the
table read as lists); larger ones the vectorised numpy path. Both give the same result, and
any batch the per-slot path would refuse is handed whole to the vectorised one, which raises.
Chosen by measurement (`slotwarden bench pool`'s round trips at n = 4..32 with each path
forced): a slot at a time wins up to about 8 slots, the vectorised path from about 12."""


class Leak(NamedTuple):
    slot: int
    state: State
    owner: int
    borrower: int
    last_event: Event
    history: str


class Audit(NamedTuple):
    """The ledger's integrity: counts per group, the free list's agreement with the FREE set,
    and the leaks (held slots whose owner is gone, releases whose fence has passed)."""

    capacity: int
    counts: dict  # Group -> number of slots
    free_list_ok: bool
    problems: tuple  # text of each integrity failure
    leaks: tuple  # Leak, each attributed to its owner and the event that left it there

    @property
    def clean(self) -> bool:
        return self.free_list_ok and not self.problems and not self.leaks


class SlotLedger:
    """Ownership of slots 1..capacity (slot 0 is the pad slot, outside the lifecycle).

    `check="strict"` validates every batch (the default); `check="off"` trusts the caller and
    only applies the table (for measuring what the checks cost). With `free_list=False` the
    ledger keeps no free list of its own (`LedgerGuard` wraps an engine allocator that does)
    and `alloc` events name their ids.
    """

    def __init__(
        self,
        capacity: int,
        *,
        check: str = "strict",
        free_list: bool = True,
        recorder_depth: int = 512,
        lifecycle: Lifecycle = LIFECYCLE,
    ):
        capacity = inputs.capacity(capacity)
        if not isinstance(check, str) or check not in CHECKS:
            raise BadInput(f"check must be one of {CHECKS}", argument="check", value=check)
        if not isinstance(free_list, bool):
            raise BadInput("free_list is True or False", argument="free_list", value=free_list)
        if not inputs.is_int(recorder_depth) or recorder_depth < 0:
            raise BadInput("recorder_depth is an int >= 0", argument="recorder_depth", value=recorder_depth)
        if not isinstance(lifecycle, Lifecycle):
            raise BadInput("a Lifecycle declaration", argument="lifecycle", value=lifecycle)
        self.capacity, self.check, self.lifecycle = capacity, check, lifecycle
        n = capacity + 1
        # a slot's state and last event are the two bytes of one 16-bit word: one scatter writes both
        code = torch.zeros(n, dtype=torch.int16)
        pair = code.view(torch.uint8).view(n, 2)
        low, high = (0, 1) if sys.byteorder == "little" else (1, 0)
        self.tensors = {
            "state": pair[:, low],
            "owner": torch.full((n,), NOBODY, dtype=torch.int64),
            "borrower": torch.full((n,), NOBODY, dtype=torch.int64),
            "fence": torch.zeros(n, dtype=torch.int32),
            "last_event": pair[:, high],
            "readers": torch.zeros(n, dtype=torch.uint8),
            "ring": torch.arange(1, n, dtype=torch.int32),
            "stamp": torch.full((n,), -1, dtype=torch.int32),
        }
        v = {k: t.numpy() for k, t in self.tensors.items()}  # views: same memory
        self.cols = Columns(
            v["state"],
            v["owner"],
            v["borrower"],
            v["fence"],
            v["last_event"],
            v["readers"],
            code.numpy().view(np.uint16),
        )
        self._ring, self._stamp = v["ring"], v["stamp"]
        self._slots, self._ring_slots = slot_views(self.cols), memoryview(self._ring)  # the per-slot path's views
        self._seq = np.arange(n, dtype=np.int32)
        self.has_free_list = free_list
        self._head, self._count = 0, (capacity if free_list else 0)
        self.tables = compile_events(lifecycle)
        self._alloc = self.tables[Event.ALLOC]
        self.small = SMALL  # the switch-over batch size (the tests move it to check both paths)
        self._lists = {e: as_lists(t) for e, t in self.tables.items()}
        self._actor_ok = {e: (lifecycle.event(e).actor, lifecycle.event(e).target is not None) for e in Event}
        self._alloc_kind, self._alloc_key = self._actor_ok[Event.ALLOC][0], _FREE * BITS
        self._alloc_list = self._lists[Event.ALLOC]
        self._alloc_next = self._alloc_list.next_state[self._alloc_key]
        # the fields an ALLOC from FREE rewrites, as `write_slots` would (a lifecycle whose ALLOC moves a
        # lock count takes `write_slots` itself: then there is no inline one-slot alloc)
        writes = self._alloc_list.writes[self._alloc_key]
        self._alloc_writes = tuple((self._slots[pos], src, clear) for pos, src, clear in writes)
        self._alloc_inline = all(src <= int(Source.CLEAR) for _, src, _ in writes)
        table = compile_table(lifecycle)
        self._owner_kind = np.array(table.owner_kind, dtype=np.uint8)
        self._lent = np.array(table.lent, dtype=bool)
        self._group = np.array(table.group, dtype=np.uint8)
        # the states whose slots wait for a fence (their records name the step), as the
        # declaration says: a move into one files the slot under that step
        self._waits = frozenset(s for s in range(len(State)) if table.fenced[s])
        self._waits_mask = np.array([s in self._waits for s in range(256)], dtype=bool)  # by state code
        self.recorder = FlightRecorder(int(recorder_depth))
        self.launched = 0  # the latest step handed to the device
        self.completed = 0  # the latest step fenced
        self._pending: dict[int, Callable[[], bool]] = {}
        self._waiting: dict[int, list] = {}  # fence step -> slots released to wait for it (a fence reads only these)
        self._thread: int | None = None  # the thread using the ledger (bound at its first call)
        self._known = b""  # the bytes of the last large batch of ids known real and distinct (see `_ids`)
        self._actor: Actor | None = None  # the actor `inputs.actor` accepted last (immutable: still valid)
        self._binding = threading.Lock()  # only taken by a thread that is not the owner

    # -- threads -----------------------------------------------------------------------------
    def adopt(self) -> None:
        """The calling thread takes the ledger over (the one using it must be done with it)."""
        with self._binding:
            self._thread = threading.get_ident()

    def _here(self) -> None:
        """Refuse a call from a thread other than the ledger's (one comparison when it is)."""
        if get_ident() != self._thread:
            self._bind_or_refuse()

    def _bind_or_refuse(self) -> None:
        me = threading.get_ident()
        with self._binding:
            if self._thread is None:
                self._thread = me
                return
        raise WrongThread(
            f"this slot ledger is used by thread {self._thread}; thread {me} called it. A pool, ledger "
            "and guard are single-threaded: serialise the calls, or hand over with adopt()"
        )

    # -- queries -----------------------------------------------------------------------------
    def available(self) -> int:
        """How many slots `alloc` can hand out now."""
        self._here()
        return self._count

    def state_of(self, ids) -> np.ndarray:
        self._here()
        ids = self._ids(ids, "state_of", None, allow_empty=True)
        return self.cols.state[ids].copy()

    def record(self, slot: int) -> Slot:
        self._here()
        return self._record(inputs.slot(slot, self.capacity, "record"))

    def _record(self, slot: int) -> Slot:
        c = self.cols
        return Slot(
            State(int(c.state[slot])),
            int(c.owner[slot]),
            int(c.borrower[slot]),
            int(c.fence[slot]),
            int(c.readers[slot]),
        )

    def held_by(self, actor: Actor) -> np.ndarray:
        """The slot ids `actor` owns or borrows, in id order."""
        self._here()
        actor = inputs.actor(actor)
        c = self.cols
        owns = (c.owner == actor.id) & (self._owner_kind[c.state] == int(actor.kind))
        if actor.kind is ActorKind.REQUEST:
            owns |= (c.borrower == actor.id) & self._lent[c.state]
        owns[0] = False
        return np.flatnonzero(owns)

    def free_list(self) -> np.ndarray:
        """The free list, head first (what the next allocs will take, in order)."""
        self._here()
        pos = (self._head + np.arange(self._count)) % self.capacity
        return self._ring[pos].astype(np.int64)

    def counts(self) -> dict:
        """Slots per group, read from the state column (a corrupt state counts in no group)."""
        self._here()
        per_state = np.bincount(self.cols.state[1:], minlength=len(State))[: len(State)]
        per_group = np.bincount(self._group, weights=per_state, minlength=len(Group))
        return {g: int(per_group[g]) for g in Group}

    # -- events ------------------------------------------------------------------------------
    def alloc(self, n: int, actor: Actor, before_write: Callable[[Batch], None] | None = None) -> np.ndarray | None:
        """Take `n` slots from the head of the free list for request `actor`, all or none.
        Returns their ids, or None when fewer than `n` are free (nothing changes).
        `before_write(batch)` runs once every check has passed and before anything is written
        (the pool zeroes the slots there): if it raises, nothing changes."""
        if get_ident() != self._thread:
            self._bind_or_refuse()
        if actor is not self._actor:  # the actor validated last is still valid (an Actor is immutable)
            actor = self._actor = inputs.actor(actor, _ALLOC)
        if type(n) is not int or n < 1:
            n = inputs.count(n, actor)
        if not self.has_free_list:
            raise BadSlotId("this ledger keeps no free list: name the ids", slot_id=None, event=_ALLOC, actor=actor)
        if n > self._count:
            return None
        if n == 1 and self.small and actor[0] is self._alloc_kind and self._alloc_inline:  # one slot, inline
            s = self._ring_slots[self._head]
            if self._slots.state[s] == _FREE:  # the free list is the FREE set, or the ledger is corrupt
                ids = _ONE.copy()  # the caller's to keep (and write into): the cheapest new one-id array
                ids[0] = s
                if before_write is not None:
                    before_write(expand(Batch(ids, self._alloc_key, _FREE, self._alloc_next)))
                me, launched, lst = actor[1], self.launched, [s]
                for column, src, clear in self._alloc_writes:  # the fields ALLOC rewrites, read from its table
                    column[s] = (0, me, NOBODY, launched, clear)[src]
                self._slots.code[s] = self._alloc_next | _ALLOC << 8  # the state and the last event, one write
                self.recorder.record(_ALLOC, actor, NOBODY, launched, lst, _FREE, self._alloc_next)  # a fresh list
                h = self._head + 1
                self._head = h if h < self.capacity else 0
                self._count -= 1
                return ids
        if n <= self.small:
            ids = self._alloc_slots(n, actor, before_write)
            if ids is not None:
                return ids
        h = self._head
        ids = self._ring[h : h + n].astype(np.int64) if h + n <= self.capacity else self._peek(n)
        if self.check == "strict":
            if actor[0] is not self._alloc_kind:
                self._check_actor(ids, _ALLOC, actor, NOBODY)
            # the free list is the FREE set, or the ledger is corrupt (a byte count, no ufunc)
            if self.cols.state[ids].tobytes() != _FREE_BYTE * n:
                self._check_batch(look_up(self.cols, self._alloc, ids, actor[1]), _ALLOC, actor, NOBODY)
        batch = Batch(ids, self._alloc_key, _FREE, self._alloc_next)  # uniform: every slot FREE
        if before_write is not None:
            before_write(expand(batch))
        write(self.cols, self._alloc, batch, _ALLOC, actor[1], NOBODY, self.launched)
        # the recorder keeps its own copy (bytes): the caller gets `ids` and may write into it. The
        # same bytes are a known batch: real ids, distinct as the free ring's are (see `_ids`)
        self._known = known = ids.tobytes()
        self.recorder.record(_ALLOC, actor, NOBODY, self.launched, known, _FREE, self._alloc_next)
        self._head = (self._head + n) % self.capacity
        self._count -= n
        return ids

    def apply(
        self, event: Event, ids, actor: Actor, target: int = NOBODY, before_write: Callable[[Batch], None] | None = None
    ) -> np.ndarray:
        """Fire `event` by `actor` on every slot in `ids` (all or none); returns the ids.
        `before_write(batch)` runs after every check and before anything is written (the
        guard hands freed slots to its engine there): if it raises, nothing changes."""
        if get_ident() != self._thread:
            self._bind_or_refuse()
        if actor is not self._actor:  # the actor validated last is still valid (an Actor is immutable)
            actor = self._actor = inputs.actor(actor)
        if type(event) is not Event:
            event = inputs.event(event, actor)
        if target is not NOBODY and (type(target) is not int or not NOBODY <= target <= _ID_MAX):
            target = inputs.target(target, event, actor)
        if type(ids) is np.ndarray and ids.dtype is _INT64 and ids.ndim == 1 and ids.strides == _UNIT:
            # a plain int64 array (what `alloc` returns): one id for the per-slot path is checked
            # inline (a real slot?), a large batch equal to the last one known real and distinct
            # (see `_ids`) needs no check; anything else, `_ids` checks (and says what is wrong)
            n = ids.size
            if n == 1 and self.small:
                if not 1 <= ids.tolist()[0] <= self.capacity:
                    ids = self._ids(ids, event, actor)
            elif n <= self.small or n * 8 != len(self._known) or ids.tobytes() != self._known:
                ids = self._ids(ids, event, actor)
        else:
            ids = self._ids(ids, event, actor)
        if event is _ALLOC and self.has_free_list:
            raise BadSlotId(
                "alloc takes a count here: the pool chooses the slots", slot_id=None, event=event, actor=actor
            )
        if event is _FENCE and actor.kind is _SCHEDULER and actor.id > self.finished_steps():
            # a fence for a step still on the device would free slots it may use (overlap bug)
            raise FenceError(
                f"fence of step {actor.id} on slots {ids.tolist()[:8]}, but the device has finished only "
                f"step {self.finished_steps()} ({self.launched} launched)"
            )
        return self._apply(ids, event, actor, target, before_write)

    def apply_each(
        self, event: Event, ids, actor_ids, before_write: Callable[[Batch], None] | None = None
    ) -> np.ndarray:
        """Fire `event` on every slot of `ids`, each by its own actor: `ids[i]` is moved by the
        actor of the event's kind with id `actor_ids[i]` (every request that finished this
        step, in one call). Same contract as `apply`: checked whole first, all or none; a
        refusal names the first offending slot and its actor. For the events that name no
        target (rollback, admit, finish, retract, abort, close). Returns the ids."""
        self._here()
        event = inputs.event(event)
        spec = self.lifecycle.event(event)
        if event in (_ALLOC, _FENCE) or spec.target is not None:
            raise BadInput("apply_each fires an event that names no target and no step", argument="event", value=event)
        kind = spec.actor
        ids = self._ids(ids, event, None)
        who = inputs.actor_ids(actor_ids, ids.size, event)
        actors = Actors(kind, tuple(who.tolist()))
        if ids.size <= self.small and self._apply_slots(ids, event, actors, NOBODY, before_write):
            return ids
        table = self.tables[event]
        batch = look_up(self.cols, table, ids, who)
        if self.check == "strict":
            p = _first_illegal(batch.after)
            if p is not None:
                self._check_batch(batch, event, Actor(kind, int(who[p])), NOBODY, first=p)
        if before_write is not None:
            before_write(expand(batch))
        self._write(batch, table, event, who, NOBODY, actors)
        return ids

    def launch(self, done: Callable[[], bool] | None = None) -> int:
        """A step is handed to the device; returns its number. `done()` says, without waiting,
        whether the device has finished it (a CUDA event's `query`); None: finished at once.
        Slots released from now on wait for this step's fence."""
        self._here()
        done = inputs.done(done)
        self.launched += 1
        self._pending[self.launched] = done or _already_done
        return self.launched

    def finished_steps(self) -> int:
        """The latest step such that it and every step before it have finished (no wait)."""
        self._here()
        step = self.completed
        while step + 1 in self._pending and self._pending[step + 1]():
            step += 1
        return step

    def fence(self, step: int | None = None, before_write: Callable[[Batch], None] | None = None) -> np.ndarray:
        """The device finished `step` (default: every step it has finished): each released slot
        waiting for it or an earlier step becomes free, and each cached slot whose write it was
        is published. Returns the freed ids (not the published ones). Raises `FenceError` for a
        step not launched or not finished yet. `before_write(batch)` runs before anything is
        written, when slots are due (the guard gives the ones freed, `batch.after == FREE`, to
        its engine)."""
        self._here()
        step = inputs.step(step)
        done = self.finished_steps()
        if step is None:
            step = done
        if step > self.launched:
            raise FenceError(f"fence of step {step}, but only {self.launched} steps were launched")
        if step > done:
            raise FenceError(f"fence of step {step} before the device finished it (finished: {done})")
        due, steps = self._due(step)
        if due.size:
            self._apply(due, _FENCE, Actor.fence(step), NOBODY, before_write)
            # the freed ones (the published stay cached)
            if due.size <= self.small:
                state = self._slots.state
                for s in due.tolist():
                    if state[s] != _FREE:
                        due = due[self.cols.state[due] == _FREE]
                        break
            elif self.cols.state[due].tobytes() != _FREE_BYTE * due.size:
                due = due[self.cols.state[due] == _FREE]
        for s in steps:
            del self._waiting[s]
        for s in range(self.completed + 1, step + 1):
            self._pending.pop(s, None)
        self.completed = max(self.completed, step)
        return due

    # -- integrity ---------------------------------------------------------------------------
    def audit(self, live_requests=None, live_sessions=None, live_nodes=None) -> Audit:
        """Conservation and leaks. With live sets given, a held slot whose owner or borrower
        is not live is a leak (a cache-owned slot only when `live_nodes` is given); a slot still
        waiting for a fence that has passed (released, or cached and unpublished) is one too.

        Conservation counts each group from its own source, so that it fails when the sources
        disagree: FREE from the free list's count (the state column without one), held from
        the owner column (slots naming an owner), RELEASED from the state column. Their sum
        is the capacity only if no slot is on the free list and held, no held slot lost its
        owner (an owner of NOBODY), no owner was left on a free or released slot."""
        self._here()
        reqs = inputs.live(live_requests, "live_requests")
        sess = inputs.live(live_sessions, "live_sessions")
        nodes = inputs.live(live_nodes, "live_nodes")
        c = self.cols
        state, owner = c.state[1:], c.owner[1:]
        counts = self.counts()
        problems = []
        undeclared = np.flatnonzero(state >= len(State)) + 1
        if undeclared.size:
            problems.append(f"slots {undeclared.tolist()[:8]} hold no declared state")
        free_n = self._count if self.has_free_list else int((state == _FREE).sum())
        held_n = int((owner != NOBODY).sum())
        released_n = int((state == _RELEASED).sum())
        if free_n + held_n + released_n != self.capacity:
            problems.append(
                f"free ({free_n}, {'free list' if self.has_free_list else 'state column'}) + held ({held_n}, owner column) "
                f"+ released ({released_n}, state column) = {free_n + held_n + released_n}, not the capacity {self.capacity}"
            )
        kind = self._owner_kind[np.minimum(state, len(State) - 1)]
        astray = np.flatnonzero((kind != NO_KIND) != (owner != NOBODY)) + 1
        if astray.size:
            problems.append(f"slots {astray.tolist()[:8]} have an owner field that does not match their state")
        free_ok = True
        if self.has_free_list:
            fl = self.free_list()
            free_ids = np.flatnonzero(state == _FREE) + 1
            if len(fl) != len(np.unique(fl)):
                free_ok = False
                problems.append(f"the free list holds {len(fl) - len(np.unique(fl))} duplicate ids")
            if not np.array_equal(np.sort(fl), free_ids):
                free_ok = False
                problems.append(f"the free list ({len(fl)} ids) is not the set of FREE slots ({len(free_ids)})")
        leaking = np.zeros(self.capacity + 1, dtype=bool)
        leaking[1:] = self._waits_mask[state] & (c.fence[1:] <= self.completed)
        if reqs is not None or sess is not None:
            reqs = reqs if reqs is not None else np.zeros(0, dtype=np.int64)
            sess = sess if sess is not None else np.zeros(0, dtype=np.int64)
            kind = self._owner_kind[np.minimum(c.state, len(State) - 1)]
            owner_live = np.where(
                kind == int(ActorKind.REQUEST),
                np.isin(c.owner, reqs),
                np.where(
                    kind == int(ActorKind.CACHE),
                    np.isin(c.owner, nodes) if nodes is not None else True,
                    np.isin(c.owner, sess),
                ),
            )
            leaking |= (kind != NO_KIND) & ~owner_live
            leaking |= self._lent[np.minimum(c.state, len(State) - 1)] & ~np.isin(c.borrower, reqs)
            leaking[0] = False
        leaking[1:] &= state < len(State)
        leaks = tuple(
            Leak(
                int(s),
                State(int(c.state[s])),
                int(c.owner[s]),
                int(c.borrower[s]),
                _event_or_int(c.last_event[s]),
                self.recorder.explain([s]),
            )
            for s in np.flatnonzero(leaking)
        )
        return Audit(self.capacity, counts, free_ok, tuple(problems), leaks)

    def snapshot(self) -> dict:
        """Copies of every column and counter, to compare before and after a call. The
        duplicate stamp is scratch (every check overwrites it before reading) and holds no
        state, so it is left out: a refused call may have stamped it."""
        self._here()
        snap = {k: t.clone() for k, t in self.tensors.items() if k not in _SCRATCH}
        snap["counters"] = (self._head, self._count, self.launched, self.completed)
        return snap

    # -- internals ---------------------------------------------------------------------------
    def _due(self, step: int) -> tuple[np.ndarray, list]:
        """The slots waiting for a fence (RELEASED, or CACHING) whose fence is `step` or
        earlier, in id order (what a scan of the columns would find), read from the per-step
        lists of releases instead of a scan of the pool; and the steps of the lists used."""
        steps = [s for s in self._waiting if s <= step]
        if not steps:
            return np.zeros(0, dtype=np.int64), steps
        chunks = [c for s in steps for c in self._waiting[s]]  # lists (per-slot path) or arrays
        if sum(map(len, chunks)) <= self.small:  # a slot at a time
            state, fence = self._slots.state, self._slots.fence
            waits = self._waits
            due = sorted({int(s) for ids in chunks for s in ids if state[s] in waits and fence[s] <= step})
            return np.array(due, dtype=np.int64), steps
        if len(chunks) == 1:  # one batch's releases: distinct ids already
            cand = np.sort(np.asarray(chunks[0], dtype=np.int64))
        else:
            cand = np.unique(np.concatenate([np.asarray(ids, dtype=np.int64) for ids in chunks]))
        c = self.cols
        state, fence = c.state[cand], c.fence[cand]
        # a slot still waiting may wait for a later step than the one it was filed under (an
        # unpublished write evicted while a later step is in flight): read its fence
        if state.tobytes() == _RELEASED_BYTE * cand.size:  # all RELEASED (the usual case)
            got = fence.tobytes()
            if got == got[: fence.itemsize] * cand.size and int(fence[0]) <= step:  # one fence, passed: all due
                return cand, steps
        waiting = self._waits_mask[state]
        return cand[waiting & (fence <= step)], steps

    def _note_released(self, ids: np.ndarray) -> None:
        """File slots just moved into a state that waits for a fence (RELEASED) under the step
        their fence waits for (one array per step)."""
        fences = self.cols.fence[ids]
        codes = fences.tobytes()
        if codes == codes[: fences.itemsize] * ids.size:  # one fence for all (the usual case)
            self._waiting.setdefault(int(fences[0]), []).append(ids.copy())
            return
        for f in np.unique(fences).tolist():
            self._waiting.setdefault(f, []).append(ids[fences == f])

    def _alloc_slots(self, n: int, actor: Actor, before_write) -> np.ndarray | None:
        """`alloc` a slot at a time; None (nothing done) if a check fails: the vectorised
        path then runs the same checks and raises."""
        if actor[0] is not self._alloc_kind:
            return None
        h, ring, state = self._head, self._ring_slots, self._slots.state
        if n == 1:  # one request's slot: the common case, without the loop
            s = ring[h]
            if state[s] != _FREE:  # the free list is the FREE set, or the ledger is corrupt
                return None
            lst, after = [s], [self._alloc_next]
            ids = (
                _ONE.copy()
            )  # the caller's to keep (and write into): a copy of a one-id template is the cheapest array
            ids[0] = s
        else:
            lst = ring[h : h + n].tolist()
            if len(lst) < n:  # the ring wraps
                lst += ring[: n - len(lst)].tolist()
            for s in lst:
                if state[s] != _FREE:
                    return None
            after = [self._alloc_next] * n
            ids = np.array(lst, dtype=np.int64)
        if before_write is not None:
            before_write(expand(Batch(ids, self._alloc_key, _FREE, self._alloc_next)))
        launched = self.launched
        write_slots(
            self._slots, self._alloc_list, lst, [self._alloc_key] * n, after, _ALLOC, [actor[1]] * n, NOBODY, launched
        )
        self.recorder.record(_ALLOC, actor, NOBODY, launched, lst, _FREE, after)  # fresh lists, never changed
        h += n
        self._head = h if h < self.capacity else h - self.capacity
        self._count -= n
        return ids

    def _apply_slots(self, ids: np.ndarray, event: Event, actor: Actor | Actors, target: int, before_write) -> bool:
        """`_apply` a slot at a time, for a batch of real, distinct ids (`actor`: one for the
        batch, or `Actors`, one per slot). False (nothing done) if a move is refused: the
        vectorised path then raises the model's error for it."""
        kind, needs_target = self._actor_ok[event]
        if actor[0] is not kind or (needs_target and target < 0):
            return False
        table = self._lists[event]
        lst = ids.tolist()
        who = list(actor.ids) if type(actor) is Actors else [actor[1]] * len(lst)
        keys, before, after = look_up_slots(self._slots, table, lst, who)
        if ILLEGAL in after:
            return False
        if before_write is not None:
            before_write(Batch(ids, np.array(keys), np.array(before, dtype=np.uint8), np.array(after, dtype=np.uint8)))
        launched = self.launched
        write_slots(self._slots, table, lst, keys, after, event, who, target, launched)
        if len(lst) == 1:  # one slot: no loops
            a = after[0]
            if a == _FREE:
                if self.has_free_list and event is not _ALLOC:  # `_push_slots` inline, for one slot
                    count, cap = self._count, self.capacity
                    if count >= cap:  # cannot happen while the lifecycle holds
                        raise RuntimeError(f"free list overflow: {count} + 1 > {cap}")
                    tail = self._head + count
                    self._ring_slots[tail if tail < cap else tail - cap] = lst[0]
                    self._count = count + 1
            elif a in self._waits:
                self._waiting.setdefault(self._slots.fence[lst[0]], []).append(lst)
            self.recorder.record(event, actor, target, launched, lst, before, after)  # fresh lists, never changed
            return True
        if _FREE in after and self.has_free_list and event is not _ALLOC:
            self._push_slots([s for s, a in zip(lst, after) if a == _FREE])
        if not self._waits.isdisjoint(after):
            fence, by_step, waits = self._slots.fence, {}, self._waits
            for s, a in zip(lst, after):
                if a in waits:
                    by_step.setdefault(fence[s], []).append(s)
            for f, released in by_step.items():
                self._waiting.setdefault(f, []).append(released)
        self.recorder.record(event, actor, target, launched, lst, before, after)  # fresh lists, never changed
        return True

    def _push_slots(self, freed: list) -> None:
        count, cap = self._count, self.capacity
        if count + len(freed) > cap:  # cannot happen while the lifecycle holds
            raise RuntimeError(f"free list overflow: {count} + {len(freed)} > {cap}")
        ring, tail = self._ring_slots, self._head + count
        if len(freed) == 1:
            ring[tail if tail < cap else tail - cap] = freed[0]
            self._count = count + 1
            return
        for s in freed:
            ring[tail if tail < cap else tail - cap] = s
            tail += 1
        self._count = count + len(freed)

    def _apply(self, ids: np.ndarray, event: Event, actor: Actor, target: int, before_write=None) -> np.ndarray:
        if ids.size <= self.small and self._apply_slots(ids, event, actor, target, before_write):
            return ids
        table = self.tables[event]
        strict = self.check == "strict"
        if strict:
            kind, needs_target = self._actor_ok[event]
            if actor[0] is not kind or (needs_target and target < 0):
                self._check_actor(ids, event, actor, target)  # raises
        batch = look_up(self.cols, table, ids, actor[1])
        if strict and (type(batch.after) is not int or batch.after == ILLEGAL):
            self._check_batch(batch, event, actor, target)
        if before_write is not None:
            before_write(expand(batch))
        self._write(batch, table, event, actor[1], target, actor)
        return ids

    def _write(self, batch: Batch, table, event: Event, actor_id, target: int, actor) -> None:
        """Write a checked batch: the columns, the free list, the releases' fences, the recorder."""
        ids, after = batch.ids, batch.after
        write(self.cols, table, batch, event, actor_id, target, self.launched)
        frees = self.has_free_list and event is not _ALLOC
        if type(after) is int:  # uniform: every slot moved to `after`
            if after == _FREE:
                if frees:
                    self._push(ids)
            elif after in self._waits:
                self._note_released(ids)
        elif not isinstance(after, np.ndarray):  # one numpy code for all
            after = int(after)
            if frees and after == _FREE:
                self._push(ids)
            elif after in self._waits:
                self._note_released(ids)
        else:  # a mixed batch: find the freed and released slots
            codes = after.tobytes()
            if frees and _FREE_BYTE in codes:
                self._push(ids[after == _FREE])
            waiting = self._waits_mask[after]
            if np.count_nonzero(waiting):
                self._note_released(ids[waiting])
        # `ids` may be a view of the caller's tensor (and is returned to it): record a copy (bytes)
        self.recorder.record(event, actor, target, self.launched, ids.tobytes(), batch.before, after)

    def _check_actor(self, ids, event: Event, actor: Actor, target: int) -> None:
        kind, needs_target = self._actor_ok[event]
        if actor.kind is not kind or (needs_target and target < 0):
            from slotwarden.model.step import legal_rule  # the model says why, in its words

            legal_rule(self._record(int(ids[0])), event, actor, target, self.lifecycle, slot_id=int(ids[0]))

    def _check_batch(self, batch: Batch, event: Event, actor: Actor, target: int, first: int | None = None) -> None:
        """Raise the model's `IllegalMove` for the first refused slot of `batch` (`first`, its
        position, when the caller found it: `actor` is then that slot's actor)."""
        p = _first_illegal(batch.after) if first is None else first
        if p is not None:
            slot_id = int(batch.ids[p])
            from slotwarden.model.step import refusal
            from slotwarden.model.declaration import relation_of

            rec = self._record(slot_id)
            rel = relation_of(self.lifecycle.spec(rec.state), rec, actor)
            more = _count_illegal(batch) - 1
            reason = refusal(self.lifecycle, rec, event, rel) + (
                f" (and {more} more slots in this batch)" if more else ""
            )
            history = self.recorder.explain([slot_id])
            raise IllegalMove(reason + "\n" + history, slot=rec, event=event, actor=actor, slot_id=slot_id)

    def _ids(self, ids, event: Event, actor: Actor, allow_empty: bool = False) -> np.ndarray:
        """Normalise a batch of ids to a 1-D int64 numpy array (`inputs.ids`) and check it
        (strict mode): real slots 1..capacity, each named once."""
        if type(ids) is np.ndarray and ids.dtype is _INT64 and ids.ndim == 1 and ids.strides == _UNIT:
            arr = ids  # `inputs.ids`'s common case, inline: nothing to convert
        else:
            arr = inputs.ids(ids, event, actor)
        if arr.size == 0:
            if allow_empty:
                return arr
            raise BadSlotId("an empty batch", slot_id=None, event=event, actor=actor)
        if self.check == "off":
            return arr
        n = arr.size
        if n > self.small and n * 8 == len(self._known) and arr.tobytes() == self._known:
            # the very ids of the last batch found real and distinct (or handed out by `alloc`:
            # distinct because the free ring holds each FREE slot once): a memcmp, no scatter
            return arr
        if n <= self.small:  # a slot at a time; anything wrong: the checks below say what
            lst = arr.tolist()
            if n == 1:
                if 1 <= lst[0] <= self.capacity:
                    return arr
            elif min(lst) >= 1 and max(lst) <= self.capacity and len(set(lst)) == n:
                return arr
        elif n <= self.capacity and arr.view(np.uint8)[_TOP::8].tobytes() == bytes(n):
            # No ufunc: no id is negative (the top byte of each is 0); the duplicate stamp marks
            # each id's position (an id named twice keeps only its last), the pad slot's mark
            # says whether slot 0 was named, and an id above the capacity makes the scatter
            # raise IndexError.
            seq, stamp = self._seq[:n], self._stamp
            stamp[0] = -1
            try:
                stamp[arr] = seq
            except IndexError:
                pass
            else:
                if stamp[0] == -1 and stamp[arr].tobytes() == seq.tobytes():  # a memcmp
                    self._known = arr.tobytes()
                    return arr
        out = (arr - 1).view(np.uint64) >= np.uint64(self.capacity)
        if out.any():
            bad = int(arr[np.argmax(out)])
            why = (
                "slot 0 is the pad slot, never allocated or freed"
                if bad == 0
                else f"not a slot of a pool of {self.capacity}"
            )
            raise BadSlotId(why, slot_id=bad, event=event, actor=actor)
        if n > self.capacity:  # every id is real, so (pigeonhole) one is named twice
            s = np.sort(arr)
            twice = s[1:][s[1:] == s[:-1]]
            raise BadSlotId("named twice in one batch", slot_id=int(twice[0]), event=event, actor=actor)
        self._stamp[arr] = self._seq[:n]
        dup = self._stamp[arr] != self._seq[:n]
        raise BadSlotId("named twice in one batch", slot_id=int(arr[np.argmax(dup)]), event=event, actor=actor)

    def _peek(self, n: int) -> np.ndarray:
        h = self._head
        if h + n <= self.capacity:
            return self._ring[h : h + n].astype(np.int64)
        return np.concatenate((self._ring[h:], self._ring[: h + n - self.capacity])).astype(np.int64)

    def _push(self, ids: np.ndarray) -> None:
        n, count, cap = ids.size, self._count, self.capacity
        if count + n > cap:  # cannot happen while the lifecycle holds
            raise RuntimeError(f"free list overflow: {count} + {n} > {cap}")
        tail = self._head + count
        if tail >= cap:
            tail -= cap
        if tail + n <= cap:
            self._ring[tail : tail + n] = ids
        else:  # the ring wraps
            first = cap - tail
            self._ring[tail:] = ids[:first]
            self._ring[: n - first] = ids[first:]
        self._count = count + n


def _first_illegal(after) -> int | None:
    """The position of the first refused move of a batch (`after`: one code per slot, or one
    for the whole batch), or None."""
    if isinstance(after, np.ndarray):
        p = after.tobytes().find(_ILLEGAL_BYTE)  # uint8 codes: a byte search, no ufunc
        return None if p < 0 else p
    return 0 if after == ILLEGAL else None


def _count_illegal(batch: Batch) -> int:
    if isinstance(batch.after, np.ndarray):
        return batch.after.tobytes().count(_ILLEGAL_BYTE)
    return batch.ids.size if batch.after == ILLEGAL else 0


def _already_done() -> bool:
    return True


def _event_or_int(code) -> Event | int:
    return Event(int(code)) if int(code) < len(Event) else int(code)
