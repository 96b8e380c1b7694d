"""`LedgerState`: everything a ledger holds, declared in one place.

The ledger is one class put together from one file per concept (the free ring, the checks, the
per-slot and batch paths, the queries, the lock record, the audit), each a mixin over this base:
every attribute a part reads is declared (annotated) here and set by `LedgerState.__init__`, and
every method a part calls is defined in one of its own bases. The columns are torch CPU tensors
(`tensors`) worked on through numpy views (`cols`) and memoryviews (`views`) of the same memory.

Single-threaded: the first thread that calls a ledger owns it; a call from any other thread raises
`WrongThread` before touching anything (`check_thread`). `adopt()` hands the ledger over. A batch
write (columns, free ring, fence lists, recorder) is one unit: while it runs the thread field holds
a `Writing` mark, so a write an exception interrupts leaves every later call refusing
(`WriteInterrupted`), at the cost of the thread check every call makes anyway.
"""

from __future__ import annotations

import sys
import threading
from _thread import get_ident
from typing import Callable, NamedTuple

import numpy as np
import torch

from slotwarden.model.declaration import Lifecycle, Source
from slotwarden.model.errors import BadInput, LifecycleError, WrongThread
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.table import compile_table
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Slot, State

from slotwarden.runtime import inputs
from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger.codes import CHECKS, RUN_MIN, SMALL, _FREE
from slotwarden.runtime.ledger.recorder import FlightRecorder
from slotwarden.runtime.ledger.tables import BITS, EventTable, ListTable, as_lists, compile_events, released_key
from slotwarden.runtime.ledger.transition import Columns, slot_views


class Writing(NamedTuple):
    """What the ledger's thread field holds while a batch write of `event` runs (`owner`: the
    thread it is restored to after the write's last part)."""

    event: Event
    owner: int


class WriteInterrupted(LifecycleError):
    """A batch write of this ledger was interrupted by an exception between its parts (columns,
    free ring, fence lists, flight recorder): its records may disagree, so every later call
    refuses. Names the write."""

    def __init__(self, mark: Writing):
        self.event = mark.event
        super().__init__(
            f"a {mark.event.name} batch write of this ledger was interrupted between its parts (columns, free "
            "ring, fence lists, flight recorder): its records may disagree, so it refuses every call (make a new one)"
        )


class LedgerState:
    """The columns, the free ring, the compiled tables and the counters of a ledger of slots
    1..capacity (slot 0 is the pad slot, outside the lifecycle)."""

    # -- settings
    capacity: int
    check: str  # "strict" checks every batch; "off" trusts the caller and only applies the table
    lifecycle: Lifecycle
    has_free_list: bool  # False: the engine keeps the free list (`LedgerGuard`), ALLOC names its ids
    small: int  # batches of up to this many slots take the per-slot path (tests move it)
    run_min: int  # the smallest numpy batch the run lane takes (tests move it)
    # -- the columns: one storage, three views
    tensors: dict[str, torch.Tensor]  # by name, the torch tensors that own the memory
    cols: Columns  # numpy views: state, owner, borrower, fence, last event, lock count, state+event
    _slots: Columns  # the same as memoryviews, for the per-slot path
    _stamp: np.ndarray  # int32 scratch: the duplicate stamp (every check writes it before reading)
    # -- the free ring: `_count` slots from `_head`, wrapping at `capacity`
    _ring: np.ndarray  # int32
    _ring_slots: memoryview  # the same, for the per-slot path
    _head: int
    _count: int
    # -- the compiled tables
    tables: dict[Event, EventTable]
    _lists: dict[Event, ListTable]  # the same as Python lists
    _actor_ok: dict[Event, tuple[ActorKind, bool]]  # per event, its actor kind and whether it names a target
    _alloc: EventTable
    _alloc_kind: ActorKind
    _alloc_key: int  # the key of an ALLOC from FREE
    _alloc_list: ListTable
    _alloc_next: int  # the state it moves to
    _alloc_writes: tuple  # the fields it rewrites: (memoryview column, source, clear value)
    _alloc_inline: bool  # whether `alloc` may write one slot inline (no lock count moves)
    _released_key: tuple[int | None, int]  # FENCE of a RELEASED slot whose fence passed: key, next state
    _owner_kind: np.ndarray  # uint8 per state: the kind of actor that owns a slot in it (NO_KIND: none)
    _lent: np.ndarray  # bool per state: whether a slot in it is lent
    _group: np.ndarray  # uint8 per state: its group
    _waits: frozenset[int]  # the states whose slots wait for a fence
    _waits_mask: np.ndarray  # bool per state code (256): the same
    mover: object | None  # a `compiled.Mover` over these columns and tables (None: the numpy path)
    # -- the steps
    launched: int  # the latest step handed to the device
    completed: int  # the latest step fenced
    _pending: dict[int, Callable[[], bool]]  # step -> whether the device has finished it
    _waiting: dict[int, list]  # fence step -> the slots released to wait for it (a fence reads only these)
    # -- what was checked last (fast lanes)
    _known: bytes  # the bytes of the last large batch of ids known real and distinct
    _known_run: slice | None  # that batch's slice, if it is one run
    _actor: Actor  # the actor `inputs.actor` accepted last (immutable: still valid)
    _lane: object  # the ledger's lane bound over its usual alloc, apply and fence (`ledger_lane`), or None
    # -- the rest
    recorder: FlightRecorder
    locks: dict[int, set[int]]  # cached slot -> the requests holding a lock on it (`Locks`)
    _thread: int | Writing | None  # the thread using the ledger (bound at its first call), or a write's mark
    _marks: tuple  # per event, the `Writing` mark of a batch write of it by the owner thread
    _binding: threading.Lock  # only taken by a thread that is not the owner

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
        self._slots, self._ring_slots = slot_views(self.cols), memoryview(self._ring)
        self.has_free_list = free_list
        self._head, self._count = 0, (capacity if free_list else 0)
        self.tables = compile_events(lifecycle)
        self._alloc = self.tables[Event.ALLOC]
        self.small = SMALL
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
        self._released_key = released_key(self.tables[Event.FENCE])
        table = compile_table(lifecycle)
        self._owner_kind = _frozen(np.array(table.owner_kind, dtype=np.uint8))
        self._lent = _frozen(np.array(table.lent, dtype=bool))
        self._group = _frozen(np.array(table.group, dtype=np.uint8))
        # the states whose slots wait for a fence (their records name the step), as the
        # declaration says: a move into one files the slot under that step
        self._waits = frozenset(s for s in range(len(State)) if table.fenced[s])
        self._waits_mask = np.array([s in self._waits for s in range(256)], dtype=bool)
        self.recorder = FlightRecorder(int(recorder_depth))
        self.launched = 0
        self.completed = 0
        self._pending = {}
        self._waiting = {}
        self.locks = {}
        self._thread = None
        self._marks = ()
        self._known = b""
        self._known_run = None
        self.run_min = RUN_MIN
        # a valid Actor, never None, or a first call by `None` would pass as "the actor checked last"
        self._actor = Actor(ActorKind.SCHEDULER, 0)
        self._binding = threading.Lock()
        # None without the extension, or with check="off" (the tests set it to None to run the numpy path)
        self.mover = compiled.mover(self.cols, self._stamp, self.tables) if check == "strict" else None

    # -- threads -----------------------------------------------------------------------------
    def adopt(self) -> None:
        """The calling thread takes the ledger over (the one using it must be done with it)."""
        with self._binding:
            if type(self._thread) is Writing:
                raise WriteInterrupted(self._thread)
            self._bind(threading.get_ident())

    def check_thread(self) -> None:
        """Refuse (`WrongThread`, nothing touched) a call from a thread other than the ledger's;
        the first thread to call binds it. One integer comparison when the caller is the owner:
        every public call of the ledger, and of a pool or guard over it, starts with it. A write
        left interrupted (its `Writing` mark still there) fails the comparison: `WriteInterrupted`."""
        if get_ident() != self._thread:
            self._bind_or_refuse()

    def check_owner(self) -> None:
        """The thread check alone, which a write left interrupted does not fail (the scheduler's
        `collect` hands back what ended even then)."""
        mark = self._thread
        if type(mark) is not Writing or mark.owner != get_ident():
            self.check_thread()

    def _bind(self, me: int) -> None:
        self._marks = tuple(Writing(e, me) for e in Event)
        self._thread = me

    def _bind_or_refuse(self) -> None:
        me = threading.get_ident()
        mark = self._thread
        if type(mark) is Writing and mark.owner == me:
            raise WriteInterrupted(mark)
        with self._binding:
            if self._thread is None:
                self._bind(me)
                return
        owner = mark.owner if type(mark) is Writing else mark
        raise WrongThread(
            f"this slot ledger is used by thread {owner}; thread {me} called it. A pool, ledger "
            "and guard are single-threaded: serialise the calls, or hand over with adopt()"
        )

    def _record(self, slot: int) -> Slot:
        """Slot `slot`'s record, read from the columns (no checks)."""
        c = self.cols
        return Slot(
            State(int(c.state[slot])),
            int(c.owner[slot]),
            int(c.borrower[slot]),
            int(c.fence[slot]),
            int(c.readers[slot]),
        )


def _frozen(array: np.ndarray) -> np.ndarray:
    """`array`, read-only (a table compiled from the lifecycle, handed out by the queries)."""
    array.setflags(write=False)
    return array
