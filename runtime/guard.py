"""`LedgerGuard`: our ownership ledger in front of an engine's own slot allocator.

An engine keeps its allocator (anything with SGLang's `MambaSlotAllocator` shape:
`alloc(n) -> index tensor or None`, `free(index tensor)`) and routes every slot move through
the guard, naming who makes it. The guard checks the move against the lifecycle first and
raises at the call that makes a bad one (a double free, a rollback freeing a session's slot,
the pad slot or a `-1` sentinel freed), with the engine's free list untouched. Released slots
reach the engine's free list only at the fence of the step that may still use them.

All or nothing, the engine included: slots are handed to the engine's `free` after every check
and before the ledger writes, so an engine whose `free` raises still owns none of them and the
ledger still says where they are (never FREE in the ledger while missing from the engine).
Bad input is refused (`runtime.inputs`) before the engine is asked anything. Single-threaded,
like its ledger (`WrongThread`). With `fills` it keeps each slot's `Fill` for the first-read rule.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from slotwarden.model.errors import BadInput, BadSlotId, shown
from slotwarden.model.step import legal_rule
from slotwarden.model.vocabulary import FREE_SLOT, NOBODY, Actor, Event, State
from slotwarden.model.write_set import Fill

from slotwarden.runtime import inputs
from slotwarden.runtime import launch as _launch
from slotwarden.runtime.ledger.ledger import Audit, SlotLedger
from slotwarden.runtime.trace import attach as attach_trace
from slotwarden.runtime.trace import launched


_FREE = int(State.FREE)
_CPU = torch.device("cpu")
_INT64, _ALLOC = torch.int64, Event.ALLOC


def host_raw(ids: torch.Tensor, n: int, mover) -> bytes | None:
    """The ids of `ids`, a 1-D int64 CPU tensor of `n` ids, as `SlotLedger.apply_raw` takes them:
    a copy of their bytes, read by the ledger's compiled move (`mover`) from the tensor's own
    memory while the caller holds it; None where that would need a copy through numpy (a
    subclass, a strided view) or the tensor has no plain storage (sparse: `data_ptr` refuses).
    No device sync: host memory only."""
    if type(ids) is not torch.Tensor:
        return None
    try:
        if n == 1:  # one element: its address, whatever the strides
            return mover.read(ids.data_ptr(), 1)
        return mover.read(ids.data_ptr(), n) if ids.is_contiguous() else None
    except RuntimeError:  # no storage to read (a sparse tensor)
        return None


class SlotAllocator(Protocol):
    """The allocator shape the guard wraps (SGLang's `MambaSlotAllocator`)."""

    def alloc(self, need_size: int) -> torch.Tensor | None: ...

    def free(self, free_index: torch.Tensor) -> None: ...


class LedgerGuard:
    """Wraps `allocator` (slots 1..capacity) with the lifecycle's ownership ledger; `fills`: keep
    each slot's `Fill` (`self.fills`, uint8 per slot id, all ZEROED at first, as an engine's
    state starts) and judge the first-read rule at `check_step`."""

    def __init__(self, allocator: SlotAllocator, capacity: int, *, check: str = "strict", trace=None, fills=False):
        if not (callable(getattr(allocator, "alloc", None)) and callable(getattr(allocator, "free", None))):
            raise BadInput("an allocator with alloc(n) and free(ids)", argument="allocator", value=allocator)
        capacity = inputs.capacity(capacity)
        if callable(getattr(allocator, "available_size", None)):
            free = allocator.available_size()  # every slot starts free in the ledger: so must it in the engine
            if free != capacity:
                raise BadInput(
                    f"the allocator has {free} slots free, the ledger would start with {capacity}",
                    argument="capacity",
                    value=capacity,
                )
        self.allocator = allocator
        self.ledger = SlotLedger(capacity, check=check, free_list=False)
        attach_trace(self.ledger, trace)  # a slot-event trace (runtime/trace.py); None: off, nothing added
        self.device = _CPU  # where the engine's index tensors live (from alloc)
        self._alloc_kind = self.ledger.lifecycle.event(Event.ALLOC).actor
        self.fills = np.full(capacity + 1, int(Fill.ZEROED), dtype=np.uint8) if fills else None

    def alloc(self, n: int, owner: Actor) -> torch.Tensor | None:
        """The engine allocates; the guard records `owner` for every slot, or hands the slots
        back to the engine and raises if the engine gave out a slot that is not free. A bad
        count or an actor that may not allocate raises before the engine is asked (an engine
        slicing its free list would take `free[:-1]` for n = -1)."""
        ledger = self.ledger
        ledger.check_thread()
        owner = ledger.checked_actor(owner, Event.ALLOC)
        if type(n) is not int or n < 1:
            n = inputs.count(n, owner)
        if owner[0] is not self._alloc_kind:
            legal_rule(FREE_SLOT, Event.ALLOC, owner, NOBODY, self.ledger.lifecycle)  # raises, in the model's words
        ids = self.allocator.alloc(n)
        if ids is None:
            return None
        return self._record_alloc(ids, n, owner)

    def _record_alloc(self, ids, n: int, owner: Actor) -> torch.Tensor:
        """The engine's alloc gave `ids` for `owner` (checked): the ledger records them, or the
        engine takes them back and this raises (`BadSlotId` for a batch that is not `n` free
        slots, or the model's error)."""
        ledger = self.ledger
        if not isinstance(ids, torch.Tensor) or len(ids.shape) != 1:
            self._refuse_shape(ids, n, owner)
        try:
            if ids.shape[0] != n:
                raise BadSlotId(
                    f"the engine's alloc({n}) gave {shown(ids)}", slot_id=None, event=Event.ALLOC, actor=owner
                )
            # host ids: their copy checked and written by one kernel call (`SlotLedger.apply_raw`)
            if ids.dtype is _INT64 and ids.is_cpu and ledger.mover is not None:
                raw = host_raw(ids, n, ledger.mover)
                if raw is not None and ledger.apply_raw(_ALLOC, raw, owner) >= 0:
                    self.device = _CPU
                    self._taken(ids.numpy())
                    return ids
            # a device sync for CUDA ids (`.item()`, `host_ids`): the ledger records them on the host
            if n == 1 and ids.dtype is torch.int64 and (ids.is_cpu or ids.is_cuda):
                one = ids.item()
                self.ledger.apply_one(Event.ALLOC, one, owner)
                self._taken(one)
            else:
                host = inputs.host_ids(ids)
                taken = self.ledger.apply(Event.ALLOC, ids if host is None else host, owner)
                self._taken(taken)
        except Exception:
            self.allocator.free(ids)
            raise
        self.device = _CPU if ids.is_cpu else ids.device
        return ids

    def _taken(self, ids) -> None:
        """Slots just allocated hold their previous tenant's state (with `fills`)."""
        if self.fills is not None:
            self.fills[ids] = int(Fill.STALE)

    def _refuse_shape(self, ids, n: int, owner: Actor) -> None:
        """The engine's alloc gave something that is not a 1-D tensor (a list, a 2-D tensor):
        what it holds goes back to the engine flattened to a 1-D int64 tensor, where it can be,
        and the alloc is refused (`BadSlotId`, the engine's own failure to take it back chained)."""
        refused = BadSlotId(
            f"the engine's alloc({n}) gave {type(ids).__name__} {shown(ids)}, not a 1-D tensor of slot ids",
            slot_id=None,
            event=Event.ALLOC,
            actor=owner,
        )
        try:
            self.allocator.free(torch.as_tensor(ids, dtype=torch.int64).reshape(-1))
        except Exception as exc:  # noqa: BLE001 - the refusal is the error to raise
            raise refused from exc
        raise refused

    def fire(self, event: Event, ids, actor: Actor, target: int = NOBODY) -> torch.Tensor:
        """`actor` moves `ids` by `event` (rollback, finish, retract, abort, admit, park, lend,
        close): checked whole first, then applied. Slots that become FREE at once (a
        candidate's rollback or abort) go back to the engine now, released ones at their
        fence. Returns the ids given back to the engine now."""
        self.ledger.check_thread()
        actor = inputs.actor(actor)
        event = inputs.event(event, actor)
        if event is Event.ALLOC:  # naming ids here would take them while the engine still lists them free
            raise BadSlotId(
                "alloc through alloc(n, owner): the engine chooses the slots", slot_id=None, event=event, actor=actor
            )
        back = []
        self.ledger.apply(
            event,
            ids,
            actor,
            target,
            before_write=lambda batch: back.append(self._give_back(batch.ids[batch.after == _FREE])),
        )
        return back[0]

    def check_step(self, slot_indices, actors, pad: int = 0, sources=None) -> None:
        """Refuse (`IllegalStep`, naming row, slot, holder and actor) a step whose rows may not
        write `slot_indices` (row -> slot id; SGLang: each request's `req.kv.mamba_pool_idx`,
        gathered for the batch) for `actors` (one request id per row, NOBODY for a pad row on
        the pad slot 0): `runtime.launch.check_step` on this guard's ledger. Changes nothing;
        call it just before launching the step. With `fills`, every slot read must be filled
        (zeroed, copied into or written since its alloc), and the slots of an accepted step are
        WRITTEN from then on. With a trace, the accepted write set is written to it as the next
        step's (`launched + 1`)."""
        _launch.check_step(self.ledger, slot_indices, actors, pad, sources, self.fills)
        if self.fills is not None:
            ids = _rows(slot_indices)
            self.fills[ids[ids != pad]] = int(Fill.WRITTEN)
        launched(self.ledger, self.ledger.launched + 1, slot_indices, actors, sources)

    def zeroed(self, ids) -> None:
        """The engine zeroed slots `ids` (SGLang: a batch's `mamba_clear_indices`, cleared before
        its kernels run): they are ZEROED (with `fills`; without, nothing is kept). Ids outside
        1..capacity or named twice are refused (`BadSlotId`) and nothing changes."""
        if self.fills is not None:
            self.fills[self.ledger.checked_ids(ids, "zeroed", None)] = int(Fill.ZEROED)

    def copied(self, dst, src=None) -> None:
        """The engine copied slots `src` into slots `dst` (SGLang: a batch's copy-on-write, from
        a cached slot): each `dst` is COPIED if its source was filled, else STALE (a copy of
        stale bytes); without `src` (a source outside this pool) COPIED. Checked as `zeroed`, but
        a source may be named twice (two requests copying one cached prefix)."""
        if self.fills is None:
            return
        to = self.ledger.checked_ids(dst, "copied", None)
        if src is None:
            self.fills[to] = int(Fill.COPIED)
            return
        fro = inputs.ids(src, "copied", None)
        if fro.size != to.size:
            raise BadSlotId(f"a copy of {fro.size} slots into {to.size}", slot_id=None, event="copied", actor=None)
        # the sources checked as the ledger checks ids, each once: one cached prefix may be
        # copied into several slots
        self.ledger.checked_ids(np.unique(fro), "copied", None)
        self.fills[to] = np.where(_launch.TABLES.readable[self.fills[fro]], int(Fill.COPIED), int(Fill.STALE))

    def launch(self, done=None) -> int:
        return self.ledger.launch(done)

    def fence(self, step: int | None = None) -> torch.Tensor:
        """Released slots whose step has finished go back to the engine's free list."""
        back = []
        due = self.ledger.fence(
            step, before_write=lambda batch: back.append(self._give_back(batch.ids[batch.after == _FREE]))
        )
        return back[0] if back else torch.from_numpy(due).to(self.device)

    def _give_back(self, ids: np.ndarray) -> torch.Tensor:
        """Hand `ids` to the engine (before the ledger writes: if `free` raises, nothing moved)."""
        back = torch.from_numpy(ids).to(self.device)  # `ids` is the ledger's own copy or the caller's batch
        if ids.size:
            self.allocator.free(back)
        return back

    # -- integrity ---------------------------------------------------------------------------
    def available(self) -> int:
        """How many slots the ledger holds FREE: what the engine's free list should hold."""
        self.ledger.check_thread()
        return int(np.count_nonzero(self.ledger.cols.state[1:] == _FREE))

    def audit(self, live_requests=None, live_sessions=None) -> Audit:
        """The ledger's audit, plus the engine's free list against the ledger's FREE set: with
        a `free_slots` tensor (SGLang's allocator) its duplicates and the ids missing from it or
        not FREE; otherwise only its count (`available_size()`)."""
        audit = self.ledger.audit(live_requests, live_sessions)
        problems = list(audit.problems)
        free_ids = np.flatnonzero(self.ledger.cols.state[1:] == _FREE) + 1
        listed = getattr(self.allocator, "free_slots", None)
        if isinstance(listed, torch.Tensor):
            engine = listed.cpu().numpy().astype(np.int64)  # device sync when the list is on a device
            ids, times = np.unique(engine, return_counts=True)
            if (times > 1).any():
                problems.append(f"the engine's free list holds duplicates: {_show(ids[times > 1], times[times > 1])}")
            extra, missing = np.setdiff1d(ids, free_ids), np.setdiff1d(free_ids, ids)
            if extra.size:
                problems.append(f"the engine's free list holds ids the ledger has not FREE: {extra.tolist()[:16]}")
            if missing.size:
                problems.append(f"FREE slots missing from the engine's free list: {missing.tolist()[:16]}")
        elif hasattr(self.allocator, "available_size") and self.allocator.available_size() != free_ids.size:
            problems.append(
                f"the engine reports {self.allocator.available_size()} free slots, the ledger {free_ids.size}"
            )
        free_ok = audit.free_list_ok and len(problems) == len(audit.problems)
        return audit._replace(free_list_ok=free_ok, problems=tuple(problems))


def _rows(slot_indices) -> np.ndarray:
    """A checked step's row -> slot ids on the host (a device tensor is copied: a sync, as in the check)."""
    return inputs.ids(slot_indices, "check_step", None)


def _show(ids: np.ndarray, times: np.ndarray) -> str:
    return ", ".join(f"slot {int(i)} x{int(n)}" for i, n in zip(ids[:16], times[:16]))
