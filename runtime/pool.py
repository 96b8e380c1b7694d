"""`StatePool`: a hybrid model's recurrent-state slots, with their lifecycle enforced.

The state tensors live on the configured device; the ownership ledger (`SlotLedger`) on the
host, so checking an operation never waits for the device. Slot ids go in and come out as host
int64 tensors (or anything array-like); `on_device(ids)` gives the copy kernels index with.
Every operation is a batch of one lifecycle event, checked whole before anything changes (bad
input: `BadInput` and its kinds; an illegal batch: `IllegalMove`/`BadSlotId`). All or nothing,
failures from below included: alloc zeroes (fork copies) its slots after every check and before
the ledger writes. Single-threaded, like its ledger (`WrongThread`).

The prefix cache's moves are pool events too: `insert`, `lock`/`unlock` (checked against the
ledger's record of who holds each lock), `evict`, and `copy` from a cached slot the request has
locked. Copy and fork read only a slot the actor holds or a cached slot it has locked; a LOCK or
UNLOCK fired through `fire`/`fire_each` takes the same checked path.
"""

from __future__ import annotations

import numpy as np
import torch

from slotwarden.kernels.slots import copy_slots, to_device, zero_slots
from slotwarden.model.errors import BadInput, BadSlotId, IllegalCopy
from slotwarden.model.properties import VERIFIED_STATE
from slotwarden.model.vocabulary import NOBODY, PAD_SLOT, Actor, ActorKind, Event, State
from slotwarden.model.write_set import Fill

from slotwarden.runtime import inputs
from slotwarden.runtime.launch import check_step
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.trace import attach as attach_trace
from slotwarden.runtime.trace import launched

_READS = (Event.LOCK, Event.UNLOCK)  # moves the pool's lock record must see


_UNCOMMITTED = np.array([int(s) for s in VERIFIED_STATE], dtype=np.uint8)  # window positions a verify wrote


class StatePool:
    """Conv and SSM state for `config.num_slots` slots (ids 1..num_slots; 0 is the pad slot)."""

    def __init__(self, config: PoolConfig, *, check: str = "strict", recorder_depth: int = 512, trace=None):
        if not isinstance(config, PoolConfig):
            raise BadInput("a PoolConfig", argument="config", value=config)
        self.config = config
        self.device = torch.device(config.device)
        self.conv = [torch.zeros(s, dtype=config.conv_dtype, device=self.device) for s in config.conv_shapes()]
        self.ssm = torch.zeros(config.ssm_shape(), dtype=config.ssm_dtype, device=self.device)
        self.ledger = SlotLedger(config.num_slots, check=check, recorder_depth=recorder_depth)
        self.fills = np.full(config.num_slots + 1, int(Fill.ZEROED), dtype=np.uint8)  # per slot id: `Fill`
        self._reading = False  # lock/unlock is firing its checked moves (fire: to the ledger)
        attach_trace(self.ledger, trace)  # a slot-event trace (runtime/trace.py); None: off, nothing added
        self._probe()

    def _probe(self) -> None:
        """Zero and copy the pad slot (all zeros, so nothing changes): a dtype or device the
        kernels cannot handle is refused here, not at the first alloc."""
        pad = torch.zeros(1, dtype=torch.int64, device=self.device)
        try:
            zero_slots(self.tensors, pad)
            copy_slots(self.tensors, pad, pad)
        except (RuntimeError, NotImplementedError, TypeError) as e:
            dtypes = (self.config.conv_dtype, self.config.ssm_dtype, str(self.device))
            raise BadInput(
                f"slot state of these dtypes cannot be zeroed or copied here ({e})", argument="config", value=dtypes
            ) from None

    @property
    def tensors(self) -> list[torch.Tensor]:
        return [*self.conv, self.ssm]

    @property
    def capacity(self) -> int:
        return self.config.num_slots

    # -- queries -----------------------------------------------------------------------------
    def available(self) -> int:
        return self.ledger.available()

    def awaits_fence(self) -> bool:
        """Whether some slot waits for a fence: released (free at the fence of a step that may
        still use it) or cached and not yet published. Read from the ledger's per-step lists
        of what waits, not a scan of the pool."""
        return self.ledger.awaits_fence()

    def held_by(self, actor: Actor) -> torch.Tensor:
        return torch.from_numpy(self.ledger.held_by(actor))

    def state_of(self, ids) -> list[State]:
        return [State(int(s)) for s in self.ledger.state_of(ids)]

    def audit(self, live_requests=None, live_sessions=None, live_nodes=None):
        """The ledger's audit (`SlotLedger.audit`), with a problem for every cached slot whose
        lock count disagrees with the requests the pool says hold a lock on it."""
        audit = self.ledger.audit(live_requests, live_sessions, live_nodes)
        extra = self.lock_problems()
        return audit._replace(problems=audit.problems + tuple(extra)) if extra else audit

    @property
    def locks(self) -> dict[int, set[int]]:
        """Cached slot -> the requests holding a lock on it (the ledger's record, `SlotLedger.locks`)."""
        return self.ledger.locks

    def lock_problems(self) -> list:
        """Where the ledger's lock counts and its record of lock holders disagree."""
        return self.ledger.lock_problems()

    def lock_holders(self, slot: int) -> frozenset:
        """The requests holding a lock on `slot`."""
        return self.ledger.lock_holders(slot)

    def history(self, slot: int, limit: int = 8):
        self.ledger.check_thread()
        slot = inputs.slot(slot, self.capacity, "history")
        if not inputs.is_int(limit) or limit < 0:
            raise BadInput("a limit is an int >= 0", argument="limit", value=limit)
        return self.ledger.recorder.history(slot, int(limit))

    def on_device(self, ids) -> torch.Tensor:
        """`ids` (a 1-D batch of integers) as int64 on the state's device (an async
        host-to-device copy on CUDA, from pinned memory: no sync). Converts only: the ids are
        not checked against the pool."""
        if isinstance(ids, torch.Tensor) and ids.dtype is torch.int64 and ids.dim() == 1:
            return to_device(ids, self.device)
        return to_device(torch.from_numpy(inputs.ids(ids, "on_device", None)), self.device)

    # -- lifecycle events --------------------------------------------------------------------
    def alloc(self, n: int, owner: Actor) -> torch.Tensor | None:
        """`n` zeroed slots for request `owner`, or None if fewer than `n` are free (then
        nothing changes: never a partial allocation)."""
        ids = self.ledger.alloc(n, owner, before_write=self._take_zeroed)
        return None if ids is None else torch.from_numpy(ids)

    def alloc_each(self, request_ids) -> torch.Tensor | None:
        """One zeroed slot for each request of `request_ids` (the i-th id returned is the i-th
        request's), in one ledger call, or None if too few are free (nothing changes)."""
        ids = self.ledger.alloc_each(request_ids, before_write=self._take_zeroed)
        return None if ids is None else torch.from_numpy(ids)

    def _take_zeroed(self, batch) -> None:
        """Slots being taken hold their previous tenant's state until zeroed (`fills`)."""
        self.fills[batch.ids] = int(Fill.STALE)
        self._zero_batch(batch)

    def _zero_batch(self, batch) -> None:
        zero_slots(self.tensors, self.on_device(batch.ids))
        self.fills[batch.ids] = int(Fill.ZEROED)

    def fire(self, event: Event, ids, actor: Actor, target: int = NOBODY) -> torch.Tensor:
        """Fire `event` by `actor` on every slot of `ids` (all or none); returns the ids. A
        LOCK or UNLOCK goes through `lock`/`unlock`, which keep the pool's lock record."""
        if not self._reading and inputs.is_int(event) and event in _READS:
            return self._read(event, ids, actor, each=False, direct=True)
        return torch.from_numpy(self.ledger.apply(event, ids, actor, target))

    def fire_each(self, event: Event, ids, actor_ids) -> torch.Tensor:
        """Fire `event` on every slot of `ids`, each by its own actor (`SlotLedger.apply_each`:
        the slots of every request that finished this step, in one call); all or none. A LOCK
        or UNLOCK goes through `lock`/`unlock`, which keep the pool's lock record."""
        if not self._reading and inputs.is_int(event) and event in _READS:
            return self._read(event, ids, actor_ids, each=True, direct=True)
        return torch.from_numpy(self.ledger.apply_each(event, ids, actor_ids))

    def admit(self, ids, request: Actor):
        return self.fire(Event.ADMIT, ids, request)

    def rollback(self, ids, request: Actor):
        return self.fire(Event.ROLLBACK, ids, request)

    def finish(self, ids, request: Actor):
        return self.fire(Event.FINISH, ids, request)

    def retract(self, ids, request: Actor):
        return self.fire(Event.RETRACT, ids, request)

    def abort(self, ids, request: Actor):
        return self.fire(Event.ABORT, ids, request)

    def park(self, ids, request: Actor, session: int):
        return self.fire(Event.PARK, ids, request, session)

    def lend(self, ids, session: Actor, request: int):
        return self.fire(Event.LEND, ids, session, request)

    def close(self, session: Actor) -> torch.Tensor:
        """Release every slot `session` owns (raises if one is lent to a turn in flight)."""
        session = inputs.actor(session, Event.CLOSE)
        ids = self.ledger.held_by(session)
        if ids.size == 0:
            return torch.from_numpy(ids)
        return self.fire(Event.CLOSE, ids, session)

    # -- the prefix cache --------------------------------------------------------------------
    def insert(self, ids, request: Actor, node: int):
        """Request `request` donates its running slots to tree node `node` (CACHING: the
        step in flight may still write them; published at its fence)."""
        return self.fire(Event.INSERT, ids, request, node)

    def lock(self, ids, request):
        """`request` (an `Actor`, or one request id per slot) locks published (CACHED) slots to
        read them; refused, nothing changed, for a slot the request already holds a lock on."""
        return self._read(Event.LOCK, ids, request, each=not isinstance(request, Actor))

    def unlock(self, ids, request):
        """`request` (an `Actor`, or one request id per slot: the locks of every copy a fence
        covered, in one call) gives back the locks it holds on `ids`; refused, nothing changed,
        for a slot the request holds no lock on (whatever the count says). With
        one id per slot a slot may be named once per request giving back a lock on it."""
        return self._read(Event.UNLOCK, ids, request, each=not isinstance(request, Actor))

    def evict(self, ids, node):
        """Tree node `node` (an `Actor`, or one node id per slot) gives back its slots: an
        unpublished one (its write aborted) or a published one nobody has locked; released,
        free at the fence of the step in flight."""
        if isinstance(node, Actor):
            return self.fire(Event.EVICT, ids, node)
        return self.fire_each(Event.EVICT, ids, node)

    def _read(self, event: Event, ids, request, each: bool, direct: bool = False) -> torch.Tensor:
        """LOCK or UNLOCK of `ids` by one request (`each` False: an `Actor`) or each slot by
        its own (`each`: one request id per slot), checked whole against the ledger's lock
        record (`SlotLedger.lock_batch`, `check_locks`) before anything changes, then fired and
        recorded (`fire_locks`). The moves go through `fire`/`fire_each` (so whoever watches
        those sees them), or straight to the ledger when `direct` (routed from them)."""
        batch = self.ledger.lock_batch(event, ids, request, each)
        if not batch.actors:  # not a request: the model says why, in its words
            return torch.from_numpy(self.ledger.apply(batch.event, batch.ids, batch.actor))
        self._check_locks(batch.ids, batch.actors, batch.event)
        if direct:
            one, many = self.ledger.apply, self.ledger.apply_each
        else:
            one, many = self.fire, self.fire_each
        self._reading = True
        try:
            self.ledger.fire_locks(batch, one, many)
        finally:
            self._reading = False
        return torch.from_numpy(batch.ids)

    def _check_locks(self, ids: np.ndarray, actors: list, event: Event) -> None:
        """Refuse a lock or unlock the lock record does not allow (`SlotLedger.check_locks`)."""
        self.ledger.check_locks(ids, actors, event)

    def launch(self, done=None, *, slots=None, actors=None, sources=None) -> int:
        """Hand a step to the device; returns its number (`SlotLedger.launch`). With `slots`,
        the step's write set is checked first (`runtime.launch.check_step`: row i writes
        `slots[i]` for request `actors[i]`, NOBODY for a pad row on the pad slot, and reads
        `sources[i]` besides): a refused step (`IllegalStep`) is not launched, nothing changes.
        The slots it writes are filled (`fills`) once it is launched."""
        if slots is None:
            return self.ledger.launch(done)
        ids = inputs.ids(slots, "launch", None)
        check_step(self.ledger, ids, actors, PAD_SLOT, sources, self.fills)
        step = self.ledger.launch(done)
        self.fills[ids[ids != PAD_SLOT]] = int(Fill.WRITTEN)
        launched(self.ledger, step, ids, actors, sources)  # its trace line, when a trace is written
        return step

    def fence(self, step: int | None = None) -> torch.Tensor:
        return torch.from_numpy(self.ledger.fence(step))

    # -- data --------------------------------------------------------------------------------
    def copy(self, src, dst, actor: Actor) -> None:
        """Copy the state of slots `src` into slots `dst`; `actor` must hold both. A source is a
        slot `actor` holds (owns, or borrows), or a published cached slot on which `actor` holds
        a lock (copy-on-write from the prefix cache); another request's or session's slot is
        refused (`IllegalCopy`: their state is not the actor's to read) and nothing is copied."""
        self.ledger.check_thread()
        actor = inputs.actor(actor, "copy")
        src_ids = self.ledger.checked_ids(src, "copy", actor)
        dst_ids = self.ledger.checked_ids(dst, "copy", actor)
        if src_ids.size != dst_ids.size:
            raise BadSlotId(
                f"copy of {src_ids.size} slots into {dst_ids.size}", slot_id=None, event="copy", actor=actor
            )
        self._require_readable(src_ids, actor, "copied from")
        self._require_mine(dst_ids, actor, "copy into")
        if np.intersect1d(src_ids, dst_ids).size:
            overlap = int(np.intersect1d(src_ids, dst_ids)[0])
            raise BadSlotId("copy source and destination overlap", slot_id=overlap, event="copy", actor=actor)
        copy_slots(self.tensors, self.on_device(src_ids), self.on_device(dst_ids))
        self.fills[dst_ids] = int(Fill.COPIED)

    def zero(self, ids, actor: Actor) -> None:
        """Zero the state of slots `actor` holds (owns, or borrows)."""
        self.ledger.check_thread()
        actor = inputs.actor(actor, "zero")
        ids = self.ledger.checked_ids(ids, "zero", actor)
        self._require_mine(ids, actor, "zero of")
        zero_slots(self.tensors, self.on_device(ids))
        self.fills[ids] = int(Fill.ZEROED)

    def fork(self, src: int, owner: Actor) -> torch.Tensor | None:
        """A new slot for request `owner` holding a copy of slot `src`'s state (copy-on-write
        prefix sharing); None if no slot is free. `owner` must be able to read `src` as for
        `copy` (a slot it holds, or a cached slot it has locked); a refusal allocates nothing.
        The copy happens after every check and before the ledger writes: if it raises, nothing
        is allocated."""
        self.ledger.check_thread()
        owner = inputs.actor(owner, "fork")
        src_ids = np.array([inputs.slot(src, self.capacity, "fork", owner)], dtype=np.int64)
        self._require_readable(src_ids, owner, "forked")

        def copy_into(batch) -> None:
            self.fills[batch.ids] = int(Fill.STALE)
            copy_slots(self.tensors, self.on_device(src_ids), self.on_device(batch.ids))
            self.fills[batch.ids] = int(Fill.COPIED)

        ids = self.ledger.alloc(1, owner, before_write=copy_into)
        return None if ids is None else torch.from_numpy(ids)

    def _require_mine(self, ids: np.ndarray, actor: Actor, what: str) -> None:
        """Raise `IllegalCopy` unless `actor` holds (owns or borrows) every slot of `ids`."""
        mine = np.isin(ids, self.ledger.held_by(actor))
        if not mine.all():
            slot = int(ids[np.argmin(mine)])
            raise IllegalCopy(
                f"{what} a slot {actor} does not hold", slot=self.ledger.record(slot), actor=actor, slot_id=slot
            )

    def _require_readable(self, ids: np.ndarray, actor: Actor, what: str) -> None:
        """Raise `IllegalCopy` unless `actor` may read every slot of `ids`: a slot it holds (its
        owner, or the request it is lent to: `SlotLedger.held_by`, the declaration's OWNER and
        BORROWER relations), or a published cached slot on which request `actor` holds a lock.
        Another request's or session's slot is not readable: its state is theirs."""
        readable = np.isin(ids, self.ledger.held_by(actor))
        readable &= ~np.isin(self.ledger.cols.state[ids], _UNCOMMITTED)  # only committed state is copied
        if not readable.all() and actor.kind is ActorKind.REQUEST:
            cached = ~readable & (self.ledger.cols.state[ids] == int(State.CACHED))
            for i in np.flatnonzero(cached).tolist():  # the lock record is per slot (a set of requests)
                readable[i] = actor.id in self.ledger.locks.get(int(ids[i]), ())
        if not readable.all():
            slot = int(ids[np.argmin(readable)])
            rec = self.ledger.record(slot)
            raise IllegalCopy(self._why_unreadable(slot, rec, actor, what), slot=rec, actor=actor, slot_id=slot)

    def _why_unreadable(self, slot: int, rec, actor: Actor, what: str) -> str:
        """Why `actor` may not read `slot` (whose record is `rec`), in the declaration's words."""
        spec = self.ledger.lifecycle.spec(rec.state)
        if int(rec.state) in _UNCOMMITTED:
            return f"slot {slot} is {rec.state.name}: a verified window position, not committed state, cannot be {what}"
        if spec.shared:
            return f"{actor} holds no lock on cached slot {slot}: it cannot be {what}"
        if spec.owner is None or rec.owner == NOBODY:
            return f"a slot that nobody holds cannot be {what}"
        lent = f", lent to request {rec.borrower}" if spec.lent and rec.borrower != NOBODY else ""
        return f"{actor} does not hold slot {slot} (held by {Actor(spec.owner, rec.owner)}{lent}): it cannot be {what}"
