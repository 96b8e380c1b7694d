"""Bugs seeded into the runtime's own code, each of which some stage of `verify` must catch.

Each seeded bug is applied in process for the duration of a `with bug.applied():` block (a
monkeypatch of one function of the ledger, the pool, the scheduler or the kernels, restored in
`finally`); production code has no seeded branches. A ledger bug is seeded into each of its
paths alike: the per-slot path, the numpy kernel and the compiled move (reached through the table
built while the bug is applied, or its arguments). `hunt` runs the stages that should catch it,
then the others, and reports the first that did: the runtime-agreement check, the pool machine,
the guard machine, the continuity machine, or the scheduler machine.

(`verify` reports these under its stage "faults"; a *fault* elsewhere is an exception raised
during a call, which the scheduler's fault contract covers, and a failure from below is one
raised by a kernel or the engine's allocator.)
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator, NamedTuple

import numpy as np
import torch

from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger import transition
from slotwarden.kernels.layer import TinyMamba
from slotwarden.kernels.slots import zero_slots
from slotwarden.model.declaration import Source
from slotwarden.model.errors import BadSlotId
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import NOBODY, Event, Group, State
from slotwarden.runtime.scheduler import admission
from slotwarden.runtime.ledger import ledger as ledger_module
from slotwarden.runtime.ledger import batch as ledger_batch
from slotwarden.runtime.ledger import slots as ledger_slots
from slotwarden.runtime.ledger import state as ledger_state
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.scheduler.scheduler import Scheduler


@contextmanager
def patched(owner, name: str, replacement) -> Iterator[None]:
    """`owner.name = replacement` inside the block; the original comes back in `finally`."""
    original = getattr(owner, name)
    setattr(owner, name, replacement(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


# -- the ledger and its kernels ----------------------------------------------------------------
def _skip_owner_check(look_up):
    """FINISH: the owner bit is taken as set, so any request may finish any running slot."""
    finish = transition.compile_events(LIFECYCLE)[Event.FINISH]  # the ledger's own (cached) table

    def skipping(cols, table, ids, actor_id, at=None):
        batch = look_up(cols, table, ids, actor_id, at)
        if table is not finish:
            return batch
        key = batch.key | transition.OWN
        return batch._replace(key=key, after=table.next_state[key])

    return skipping


def _skip_owner_check_slots(look_up_slots):
    """`_skip_owner_check` on the ledger's per-slot path (batches of up to `SlotLedger.small`)."""
    finish = transition.as_lists(transition.compile_events(LIFECYCLE)[Event.FINISH])

    def skipping(mv, table, ids, actor_ids):
        keys, before, after = look_up_slots(mv, table, ids, actor_ids)
        if table[:4] != finish[:4]:
            return keys, before, after
        keys = [k | transition.OWN for k in keys]
        return keys, before, [table.next_state[k] for k in keys]

    return skipping


def _kernel_table(change):
    """A patch of `compiled.packed`: the compiled move's table, changed by `change(rows)` (rows
    [event, (next, owner, borrower, fence, lock count), key]) for the ledgers made meanwhile."""

    def wrapper(packed):
        def changed(tables):
            rows, probes = packed(tables)
            rows = rows.copy()
            change(rows)
            return rows, probes

        return changed

    return wrapper


def _owner_taken_as_set(rows):
    """FINISH in the compiled move's table: a key without the owner bit moves as the one with it."""
    keys = np.arange(transition.KEYS)
    rows[int(Event.FINISH)][:, keys] = rows[int(Event.FINISH)][:, keys | transition.OWN]


def _borrower_kept(rows):
    """The compiled move's table never rewrites the borrower, but for LEND."""
    for event in Event:
        if event is not Event.LEND:
            rows[int(event), 2] = int(Source.KEEP)


def _no_duplicate_check_compiled(move):
    """The compiled move is told the ids are distinct: it checks no duplicate."""

    def unchecked(self, ids, event, actor, actor_id, target, before_write, dup=True):
        return move(self, ids, event, actor, actor_id, target, before_write, dup=False)

    return unchecked


def _lent_rollback_entry(compile_events):
    """The compiled table sends a rolled-back lent slot to FREE (the seed's bug, in the table)."""

    def flipped(lifecycle=None):
        tables = compile_events() if lifecycle is None else compile_events(lifecycle)
        rollback = tables[Event.ROLLBACK]
        cols = [np.array(c) for c in rollback[:4]]
        key = int(State.LENT) * transition.BITS + transition.BOR
        cols[0][key] = int(State.FREE)
        cols[1][key] = cols[2][key] = cols[3][key] = int(Source.CLEAR)
        return {**tables, Event.ROLLBACK: rollback._replace(**dict(zip(rollback._fields[:4], cols)), writes_owner=True)}

    return flipped


def _keeps_borrower(write):
    """The scatter forgets the borrower column: a lent slot given back keeps its borrower."""

    def forgetful(cols, table, batch, event, actor_id, target, epoch, at=None):
        kept = cols.borrower[batch.ids].copy()
        write(cols, table, batch, event, actor_id, target, epoch, at)
        if event is not Event.LEND:
            cols.borrower[batch.ids] = kept

    return forgetful


def _keeps_borrower_slots(write_slots):
    """`_keeps_borrower` on the ledger's per-slot path (batches of up to `SlotLedger.small`)."""

    def forgetful(mv, table, ids, keys, after, event, actor_ids, target, epoch):
        kept = [mv.borrower[s] for s in ids]
        write_slots(mv, table, ids, keys, after, event, actor_ids, target, epoch)
        if event is not Event.LEND:
            for s, b in zip(ids, kept):
                mv.borrower[s] = b

    return forgetful


def _no_duplicate_check(ids_check):
    """The duplicate-id check within a batch is gone."""

    def unchecked(self, ids, event, actor, allow_empty=False):
        try:
            return ids_check(self, ids, event, actor, allow_empty)
        except BadSlotId as exc:
            if "twice" not in exc.reason:
                raise
            return np.asarray(ids, dtype=np.int64).reshape(-1)

    return unchecked


def _early_push(apply):
    """The free ring takes a released slot at once, before the fence of its step."""

    def pushing(self, ids, event, actor, target, before_write=None, *rest, **named):
        out = apply(self, ids, event, actor, target, before_write, *rest, **named)
        released = ids[self.cols.state[ids] == int(State.RELEASED)]
        if released.size and self.has_free_list:
            self._push(released)
        return out

    return pushing


def _guard_gives_back_released(fire):
    """The guard hands a released slot back to the engine's allocator at once, not at its fence."""

    def eager(self, event, ids, actor, target=NOBODY):
        back = fire(self, event, ids, actor, target)
        moved = np.asarray(self.ledger.recorder.entries[-1].ids)
        released = moved[self.ledger.cols.state[moved] == int(State.RELEASED)]
        if released.size:
            self.allocator.free(torch.from_numpy(released))
        return back

    return eager


# -- the pool ----------------------------------------------------------------------------------
def _copy_anywhere(require_mine):
    """copy, fork and zero write into slots that someone else holds."""
    return lambda self, ids, actor, what: None


def _read_any_held(require_readable):
    """copy and fork read any slot some request or session holds, not only the actor's own."""

    def lax(self, ids, actor, what):
        groups = self.ledger._group[self.ledger.cols.state[ids]]
        held = (groups == int(Group.BATCH_OWNED)) | (groups == int(Group.SESSION_OWNED))
        if not held.all():
            require_readable(self, ids[~held], actor, what)

    return lax


def _alloc_not_zeroed(alloc):
    """alloc hands out a slot holding whatever state it held before."""

    def dirty(self, n, owner):
        ids = self.ledger.alloc(n, owner)
        return None if ids is None else torch.from_numpy(ids)

    return dirty


def _lend_zeroes(lend):
    """LEND zeroes the lent slot: the turn does not continue its session's state."""

    def zeroing(self, ids, session, request):
        out = lend(self, ids, session, request)
        zero_slots(self.tensors, self.on_device(out))
        return out

    return zeroing


# -- the scheduler and the kernels ---------------------------------------------------------------
def _lent_turns_first(pick_victim):
    """Retraction prefers a session turn on its lent slot, whatever the starved request lacks
    (each turn at most once, so that one retracted while a slot is all the request lacks still
    makes progress): the faulty retraction below runs in most workloads that retract at all."""

    def picking(sched, exclude, frees_slot=True):
        done = sched.__dict__.setdefault("turns_retracted", set())
        turns = [
            r
            for r in sched.running
            if r.lent and r.rid not in exclude | done and len(r.output) > r.outputs_at_admit and r.remaining() > 0
        ]
        victim = max(turns, key=lambda r: (r.remaining(), r.rid), default=None)
        if victim is None:
            return pick_victim(sched, exclude, frees_slot)
        done.add(victim.rid)
        return victim

    return picking


def _retract_by_finish(release_retracted):
    """A retracted lent turn gives its slot back by the finish path, which commits the partial
    turn to its session as if it had finished (transcript, pending token, not stale)."""

    def by_finish(sched, req):
        if not req.lent:
            return release_retracted(sched, req)
        s = sched.sessions[req.session]
        sched.release_finished(req)
        s.transcript = s.transcript + s.pending + req.prompt + req.output[:-1]
        s.pending, s.stale = req.output[-1:], False

    return by_finish


def _retracted_not_stale(turn_retracted):
    """A retracted lent turn leaves its session as it is: not marked stale."""

    def not_stale(sched, s, req, lent):
        pass

    return not_stale


def _wrong_row(decode):
    """Decode reads and writes the state of the wrong slot row (rows shifted by one)."""

    def shifted(self, tokens, slots, conv_state, ssm_state, pad_slot=0):
        return decode(self, tokens, slots.roll(1) if slots.numel() > 1 else slots, conv_state, ssm_state, pad_slot)

    return shifted


# -- the catalogue -------------------------------------------------------------------------------
class SeededBug(NamedTuple):
    name: str
    what: str
    patches: tuple  # (owner, attribute, wrapper): the wrapper gets the original, returns the fault
    stages: tuple  # the stages that should catch it, tried first (the others are tried after)

    @contextmanager
    def applied(self) -> Iterator[None]:
        with _all(self.patches):
            yield


@contextmanager
def _all(patches):
    if not patches:
        yield
        return
    (owner, name, wrapper), rest = patches[0], patches[1:]
    with patched(owner, name, wrapper), _all(rest):
        yield


_LENT_TURNS_FIRST = (admission, "pick_victim", _lent_turns_first)

SEEDED_BUGS = (
    SeededBug(
        "ledger_skips_owner_check",
        "the ledger skips the owner check for FINISH",
        (
            (ledger_module, "look_up", _skip_owner_check),
            (ledger_batch, "look_up", _skip_owner_check),
            (ledger_slots, "look_up_slots", _skip_owner_check_slots),
            (compiled, "packed", _kernel_table(_owner_taken_as_set)),
        ),
        ("agreement",),
    ),
    SeededBug(
        "retract_lent_by_finish",
        "a retracted session turn gives its lent slot back by the finish path",
        (_LENT_TURNS_FIRST, (Scheduler, "release_retracted", _retract_by_finish)),
        ("continuity",),
    ),
    SeededBug(
        "copy_into_foreign_slot",
        "copy, fork and zero write into a slot someone else holds",
        ((StatePool, "_require_mine", _copy_anywhere),),
        ("pool",),
    ),
    SeededBug(
        "copy_reads_foreign_slot",
        "copy and fork read a slot another request or session holds (its state is not theirs)",
        ((StatePool, "_require_readable", _read_any_held),),
        ("pool",),
    ),
    SeededBug(
        "no_duplicate_check",
        "the duplicate-id check within a batch is removed",
        ((SlotLedger, "_ids", _no_duplicate_check), (SlotLedger, "_move", _no_duplicate_check_compiled)),
        ("pool",),
    ),
    SeededBug(
        "lend_zeroes_state",
        "LEND zeroes the lent slot, so a session loses its state between turns",
        ((StatePool, "lend", _lend_zeroes),),
        ("continuity",),
    ),
    SeededBug(
        "retract_turn_not_stale",
        "a session turn retracted by the legal RETRACT without marking the session stale",
        (_LENT_TURNS_FIRST, (Scheduler, "turn_retracted", _retracted_not_stale)),
        ("continuity",),
    ),
    SeededBug(
        "free_ring_before_fence",
        "the free ring takes a released slot before its step's fence",
        ((SlotLedger, "_apply", _early_push),),
        ("scheduler", "pool"),
    ),
    SeededBug(
        "alloc_not_zeroed",
        "alloc hands out a slot that still holds its last owner's state",
        ((StatePool, "alloc", _alloc_not_zeroed),),
        ("pool",),
    ),
    SeededBug(
        "decode_wrong_row",
        "decode reads and writes the state of another slot's row",
        ((TinyMamba, "decode", _wrong_row),),
        ("continuity",),
    ),
    SeededBug(
        "table_lent_rollback_frees",
        "the compiled table frees a rolled-back lent slot",
        ((ledger_state, "compile_events", _lent_rollback_entry),),
        ("agreement",),
    ),
    SeededBug(
        "write_keeps_borrower",
        "the batched scatter never clears the borrower",
        (
            (ledger_module, "write", _keeps_borrower),
            (ledger_batch, "write", _keeps_borrower),
            (ledger_slots, "write_slots", _keeps_borrower_slots),
            (compiled, "packed", _kernel_table(_borrower_kept)),
        ),
        ("agreement",),
    ),
    SeededBug(
        "guard_frees_before_fence",
        "the guard gives a released slot back to the engine before its fence",
        ((LedgerGuard, "fire", _guard_gives_back_released),),
        ("guard",),
    ),
)


class Catch(NamedTuple):
    fault: str
    caught: bool
    stage: str  # the first stage that caught it, or ""
    error: str  # what that stage said
    seconds: float
    tried: tuple  # the stages run, in order


def hunt(fault: SeededBug, stages: dict[str, Callable[[], str]]) -> Catch:
    """Apply `fault` and run `stages` (name -> check returning "" when it passes, else what it
    found): the fault's own stages first, then the others, until one catches it."""
    order = [s for s in fault.stages if s in stages] + [s for s in stages if s not in fault.stages]
    start, tried = time.perf_counter(), []
    for name in order:
        tried.append(name)
        with fault.applied():
            found = stages[name]()
        if found:
            return Catch(fault.name, True, name, found, time.perf_counter() - start, tuple(tried))
    return Catch(fault.name, False, "", "", time.perf_counter() - start, tuple(tried))
