"""`SlotLedger`: per slot a state, an owner, a borrower, a fence and a lock count, enforced by the
table compiled from the model.

Every operation is a batch of one lifecycle event (by one actor, or with `apply_each`/`alloc_each`
one actor per slot), checked whole against the table and the owner rule (duplicates included)
before anything is written; on a violation the model's typed error names the slot, its state,
owner, the event and the actor. Every argument passes `runtime.inputs` first. A batch of up to
`small` slots takes the per-slot path (`slots`), a larger one the compiled move or the numpy
kernel (`batch`): every path gives the same results and the same errors.

All or nothing: a call that raises (bad input, a refused move, or anything raised by a
`before_write` hook: the pool's zeroing, an engine's `free`) leaves every column, the free list,
the counters and the flight recorder as they were. Single-threaded (`LedgerState`). The last
step a ledger can launch is `STEP_MAX`: one more `launch` raises `FenceError`.
"""

from __future__ import annotations

from _thread import get_ident
from typing import Callable

import numpy as np

from slotwarden.model.errors import BadActor, BadInput, BadSlotId, FenceError
from slotwarden.model.vocabulary import NOBODY, Actor, Event

from slotwarden.runtime import inputs
from slotwarden.runtime.ledger.audit import Audit, Integrity, Leak  # noqa: F401 (the ledger's API)
from slotwarden.runtime.ledger.checks import _first_illegal
from slotwarden.runtime.ledger.codes import CHECKS, RUN_MIN, SMALL, STEP_MAX  # noqa: F401 (the ledger's API)
from slotwarden.runtime.ledger.codes import _ALLOC, _FENCE, _FREE, _FREE_BYTE, _ID_MAX, _INT64, _ONE, _SCHEDULER, _UNIT
from slotwarden.runtime.ledger import ledger_lane
from slotwarden.runtime.ledger.locks import Locks
from slotwarden.runtime.ledger.raw import RawMoves
from slotwarden.runtime.ledger.recorder import Actors
from slotwarden.runtime.ledger.transition import Batch, expand, look_up, write


class SlotLedger(RawMoves, Locks, Integrity):
    """Ownership of slots 1..capacity (slot 0 is the pad slot, outside the lifecycle).

    `check="strict"` validates every batch (the default); `check="off"` trusts the caller and
    only applies the table (for measuring what the checks cost). With `free_list=False` the
    ledger keeps no free list of its own (`LedgerGuard` wraps an engine allocator that does)
    and `alloc` events name their ids. The state and its construction: `LedgerState`. The usual
    `alloc`, `apply` and `fence` take the ledger's lane (`ledger_lane`), where it is built.
    """

    LANE = True
    """Whether the usual calls take the ledger's lane (`ledger_lane`; the tests turn it off)."""

    def __init__(self, capacity: int, **options):
        super().__init__(capacity, **options)
        self._lane = ledger_lane.bind(self, _ORIGINALS, _already_done) if self.LANE else None

    def __copy__(self) -> SlotLedger:
        """A shallow copy (its columns shared, as `copy.copy` shares them) on its Python: the lane
        is bound to this ledger's counters, not the copy's."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        ledger_lane.unbind(twin)
        return twin

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
                owner, self._thread = self._thread, self._marks[_ALLOC]  # the write's parts: one unit
                for column, src, clear in self._alloc_writes:  # the fields ALLOC rewrites, read from its table
                    column[s] = (0, me, NOBODY, launched, clear)[src]
                self._slots.code[s] = self._alloc_next | _ALLOC << 8  # the state and the last event, one write
                self.recorder.record(_ALLOC, actor, NOBODY, launched, lst, _FREE, self._alloc_next)  # a fresh list
                h = self._head + 1
                self._head = h if h < self.capacity else 0
                self._count -= 1
                self._thread = owner
                return ids
        return self._alloc_batch(n, actor, actor[1], before_write)

    def alloc_each(self, actor_ids, before_write: Callable[[Batch], None] | None = None) -> np.ndarray | None:
        """One slot from the head of the free list for each request of `actor_ids` (the step's
        candidates, in one call): the i-th id returned is request `actor_ids[i]`'s. Same
        contract as `alloc`: all or none, None when too few are free (nothing changes), a
        refusal names the offending slot and its request, `before_write` as there."""
        self.check_thread()
        n = inputs.length(actor_ids)  # read without converting (a range's from its bounds)
        if n is None:  # no batch type: refused below, by its type
            n = len(actor_ids) if hasattr(actor_ids, "__len__") else -1
        elif n > self.capacity and type(actor_ids) is not range:  # more requests than slots: too few free (none read)
            if not self.has_free_list:
                raise BadSlotId("this ledger keeps no free list: name the ids", slot_id=None, event=_ALLOC, actor=None)
            return None
        who = inputs.actor_ids(actor_ids, n, _ALLOC)
        if who.size == 0:
            raise BadActor("at least one request to allocate for", argument="actor_ids", value=actor_ids, event=_ALLOC)
        actors = Actors(self._alloc_kind, tuple(who.tolist()))
        if not self.has_free_list:
            raise BadSlotId("this ledger keeps no free list: name the ids", slot_id=None, event=_ALLOC, actor=None)
        if who.size > self._count:
            return None
        return self._alloc_batch(who.size, actors, who, before_write)

    def _alloc_batch(self, n: int, actor: Actor | Actors, actor_id, before_write) -> np.ndarray | None:
        """`alloc` of `n` slots by the per-slot path (up to `small`) or the vectorised one:
        `actor` one request for all (`actor_id` its id) or `Actors` (`actor_id` their ids)."""
        if n <= self.small:
            ids = self._alloc_slots(n, actor, before_write)
            if ids is not None:
                return ids
        if self.mover is not None:  # the compiled lane: checked and written in one pass of C
            if type(actor) is not Actors and actor[0] is not self._alloc_kind:
                self._check_actor(self._peek(1), _ALLOC, actor, NOBODY)  # raises
            ids = self._peek(n)
            owner = self._thread  # the move and the ring's advance: one unit, marked from the move's write on
            self._move(ids, _ALLOC, actor, actor_id, NOBODY, before_write, dup=False, hold=True)
            self._advance(n)
            self._thread = owner
            return ids
        h, at = self._head, None
        if h + n <= self.capacity:
            ring = self._ring[h : h + n]
            ids = ring.astype(np.int64)
            if n >= self.run_min:
                first = ring.item(0)
                if 1 <= first and ring.tobytes() == np.arange(first, first + n, dtype=np.int32).tobytes():
                    at = slice(first, first + n)  # one run of slots (a memcmp): the run lane (see `_run`)
        else:
            ids = self._peek(n)
        where = ids if at is None else at
        if self.check == "strict":
            each = type(actor) is Actors
            if not each and actor[0] is not self._alloc_kind:
                self._check_actor(ids, _ALLOC, actor, NOBODY)
            # the free list is the FREE set, or the ledger is corrupt (a byte count, no ufunc)
            if self.cols.state[where].tobytes() != _FREE_BYTE * n:
                batch = look_up(self.cols, self._alloc, ids, actor_id, at)
                p = _first_illegal(batch.after)
                self._check_batch(batch, _ALLOC, actor[p] if each and p is not None else actor, NOBODY, first=p)
        batch = Batch(ids, self._alloc_key, _FREE, self._alloc_next)  # uniform: every slot FREE
        if before_write is not None:
            before_write(expand(batch))
        owner, self._thread = self._thread, self._marks[_ALLOC]  # the write's parts: one unit
        write(self.cols, self._alloc, batch, _ALLOC, actor_id, NOBODY, self.launched, at)
        # the recorder keeps its own copy (bytes): the caller gets `ids` and may write into it. The
        # same bytes are a known batch: real ids, distinct as the free ring's are (see `_ids`)
        self._known = known = ids.tobytes()
        self._known_run = at
        self.recorder.record(_ALLOC, actor, NOBODY, self.launched, known, _FREE, self._alloc_next)
        self._advance(n)
        self._thread = owner
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
        raw, at = None, None  # the bytes of a large batch, once read (the recorder keeps them); its run
        checked = True  # whether the ids were checked here (the compiled move checks its own)
        if type(ids) is np.ndarray and ids.dtype is _INT64 and ids.ndim == 1 and ids.strides == _UNIT:
            # a plain int64 array (what `alloc` returns): one id for the per-slot path is checked
            # inline (a real slot?), a larger batch by the compiled move as it moves them; without
            # it, a large batch equal to the last one known real and distinct (see `_ids`) needs
            # no check, nor does one run of real slots (`_run`: distinct by construction);
            # anything else, `_ids` checks (and says what is wrong)
            n = ids.size
            if n == 1 and self.small:
                if not 1 <= ids.tolist()[0] <= self.capacity:
                    ids = self._ids(ids, event, actor)
            elif n <= self.small or n > self.capacity:  # too long: refused by its length
                ids = self._ids(ids, event, actor)
            elif self.mover is not None:
                checked = False  # the compiled lane (`_apply`)
            elif n * 8 == len(self._known) and (raw := ids.tobytes()) == self._known:
                at = self._known_run
            else:
                at = self._run(ids)
                if at is None:
                    ids = self._ids(ids, event, actor)  # the very array, if it passes: `raw` stays its bytes
        else:
            ids = self._ids(ids, event, actor)
        if event is _ALLOC or event is _FENCE:
            ids = self._refused_here(ids, event, actor, checked)
        return self._apply(ids, event, actor, target, before_write, raw, at)

    def apply_one(self, event: Event, slot: int, actor: Actor, before_write=None) -> int:
        """`apply(event, [slot], actor)` for one slot named by a plain int (an engine's one-slot
        alloc or free), for the events that name no target: the same checks, errors, record and
        `before_write`, with one kernel call where the compiled move is built (else the per-slot
        path). Returns the state the slot moved to. Anything else (another type, a refused move,
        check="off", a fence) goes through `apply`, which raises or does it."""
        if get_ident() != self._thread:
            self._bind_or_refuse()
        if actor is not self._actor:  # the actor validated last is still valid (an Actor is immutable)
            actor = self._actor = inputs.actor(actor)
        ok = type(event) is Event and type(slot) is int and 0 < slot <= self.capacity and self.check == "strict"
        if ok:
            kind, needs_target = self._actor_ok[event]
            ok = actor[0] is kind and not needs_target and event is not _FENCE
            ok = ok and not (event is _ALLOC and self.has_free_list)
        if ok and self.mover is not None:
            moved = self._move_one(event, slot, actor, before_write)
            if moved is not None:
                return moved
        elif ok:
            ids = _ONE.copy()
            ids[0] = slot
            if self._apply_slots(ids, event, actor, NOBODY, before_write):
                return self._slots.state[slot]
        self.apply(event, [slot], actor, before_write=before_write)  # raises, or moves it
        return int(self.cols.state[slot])

    def _move_one(self, event: Event, slot: int, actor: Actor, before_write) -> int | None:
        """`apply_one` by the compiled move (checked, then written; with `before_write` the
        kernel checks first and writes after the hook). None if it refuses: nothing written."""
        ids = _ONE.copy()
        ids[0] = slot
        me, epoch, mover = actor[1], self.launched, self.mover
        if before_write is None:
            got = mover.move(event, ids, me, NOBODY, epoch, None, None, None, True, False)
        else:
            before, after, keys = np.empty(1, np.uint8), np.empty(1, np.uint8), np.empty(1, np.int64)
            got = mover.move(event, ids, me, NOBODY, epoch, before, after, keys, False, False)
            if got < 0:
                return None
            before_write(Batch(ids, keys, before, after))  # filled by the check pass, as `_move` hands them
            got = mover.move(event, ids, me, NOBODY, epoch, before, after, keys, True, False)
            if got < 0:  # the hook ran: never asked again (the slot is as it was, as checked)
                raise RuntimeError(f"the compiled move refused {event.name} of slot {slot} after checking it")
        if got < 0:
            return None
        lst, moved = [slot], got & 0xFF  # one slot: one state before and after (never MIXED)
        self._settle_one(lst, moved, event)
        self.recorder.record(event, actor, NOBODY, epoch, lst, [got >> 8], [moved])  # fresh lists, never changed
        return moved

    def _refused_here(self, ids: np.ndarray, event: Event, actor: Actor, checked: bool) -> np.ndarray:
        """What `apply` refuses itself, for an ALLOC or a FENCE: an alloc naming ids where the
        pool chooses them, a fence of a step still on the device. Bad ids are refused first, as
        on every path (`checked`: they were checked already). Returns the ids."""
        alloc_by_id = event is _ALLOC and self.has_free_list
        early = event is _FENCE and actor.kind is _SCHEDULER and actor.id > self.finished_steps()
        if not checked and (alloc_by_id or early):
            ids = self._ids(ids, event, actor)
        if alloc_by_id:
            raise BadSlotId(
                "alloc takes a count here: the pool chooses the slots", slot_id=None, event=event, actor=actor
            )
        if early:
            # a fence for a step still on the device would free slots it may use (overlap bug)
            raise FenceError(
                f"fence of step {actor.id} on slots {ids.tolist()[:8]}, but the device has finished only "
                f"step {self.finished_steps()} ({self.launched} launched)"
            )
        return ids

    def apply_each(
        self, event: Event, ids, actor_ids, before_write: Callable[[Batch], None] | None = None
    ) -> np.ndarray:
        """Fire `event` on every slot of `ids`, each by its own actor: `ids[i]` is moved by the
        actor of the event's kind with id `actor_ids[i]` (every request that finished this
        step, in one call). Same contract as `apply`: checked whole first, all or none; a
        refusal names the first offending slot and its actor. For the events that name no
        target (rollback, admit, finish, retract, abort, close). Returns the ids."""
        self.check_thread()
        event = inputs.event(event)
        spec = self.lifecycle.event(event)
        if event in (_ALLOC, _FENCE) or spec.target is not None:
            raise BadInput("apply_each fires an event that names no target and no step", argument="event", value=event)
        kind = spec.actor
        if self._plain_lists(ids, actor_ids):  # lists of plain ints, checked: real, distinct slots; actor ids
            actors = Actors(kind, tuple(actor_ids))
            ids, who = np.array(ids, dtype=np.int64), np.array(actor_ids, dtype=np.int64)
        else:
            arr = inputs.ids(ids, event, None, self.capacity)  # type and length; its ids below, naming their actors
            who = inputs.actor_ids(actor_ids, arr.size, event)
            actors = Actors(kind, tuple(who.tolist()))
            ids = self._ids(arr, event, actors)
        if ids.size <= self.small and self._apply_slots(ids, event, actors, NOBODY, before_write):
            return ids
        if self.mover is not None:  # the compiled lane
            self._move(ids, event, actors, who, NOBODY, before_write)
            return ids
        ids, who = self._detached(ids), self._detached(who)  # views of a column: their moves would change them
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
        self.check_thread()
        done = inputs.done(done)
        if self.launched >= STEP_MAX:  # the fence column is int32: one more step would not fit
            raise FenceError(
                f"{self.launched} steps launched: the fence column holds steps up to {STEP_MAX}, so no "
                "further step can be launched on this ledger (make a new one)"
            )
        step = self.launched + 1
        self._pending[step] = done or _already_done  # first: interrupted here, the next launch overwrites it
        self.launched = step  # one store: the step is launched, or it is not
        return step

    def finished_steps(self) -> int:
        """The latest step such that it and every step before it have finished (no wait)."""
        self.check_thread()
        return self._finished()

    def _finished(self) -> int:
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
        self.check_thread()
        step = inputs.step(step)
        done = self._finished()
        if step is None:
            step = done
        if step > self.launched:
            raise FenceError(f"fence of step {step}, but only {self.launched} steps were launched")
        if step > done:
            raise FenceError(f"fence of step {step} before the device finished it (finished: {done})")
        due, steps, released, at = self._due(step)
        if released and due.size:
            due = self._fence_released(due, Actor.fence(step), before_write, at)
        elif due.size:
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
        done, self.completed = self.completed, max(self.completed, step)  # first: interrupted after, stale
        for s in range(done + 1, step + 1):  # entries of `_pending` are only memory (never read again)
            self._pending.pop(s, None)
        return due


def _already_done() -> bool:
    return True


_ORIGINALS = {name: getattr(SlotLedger, name) for name in ledger_lane.STANDS_IN_FOR}
