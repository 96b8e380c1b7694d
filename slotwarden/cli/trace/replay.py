"""The streaming replay behind `check-trace`: each line is applied to the model as it comes.

A `Replay` keeps each moved slot's record (the pure model's `Slot`, moved by the compiled declaration, all or
nothing per line), the last `HISTORY` moves of each slot, the first `FINDINGS` illegal moves and
a count of the rest, and the plot's window: the moves of the last `SPAN` + 1 lines (frozen around
the first finding: `BEFORE` lines before it, `AFTER` after) and each slot's last move before
them. So its memory is bounded by the slots moved (at most the pool's capacity) times these
windows, never by the trace's length. Without a header the pool is as large as the largest id
named, known only at the end: every id 1..`MAX_CAPACITY` is a slot meanwhile, and a refusal
that names the pool's size is worded at the end.
"""

from __future__ import annotations

from collections import Counter, deque

from slotwarden.cli.trace.moves import compiled, free_events, key, move
from slotwarden.cli.trace.report import Finding, Leak, Move, Report
from slotwarden.model.errors import BadSlotId, LifecycleError
from slotwarden.model.free import free_rule
from slotwarden.model.launch import check_step
from slotwarden.model.pool import check_ids
from slotwarden.model.step import step
from slotwarden.model.vocabulary import FREE_SLOT, NOBODY, Event, State
from slotwarden.model.write_set import ALL_WRITTEN, Row, RowKind
from slotwarden.runtime.inputs import actor as checked_actor
from slotwarden.runtime.trace import FREE, LAUNCH, LaunchLine, TraceLine

MAX_CAPACITY = 2**24
"""The largest pool the checker replays: a larger header capacity, or without a header a
larger slot id, makes the file not a trace the checker reads."""

HISTORY = 8
"""How many of a slot's moves the report shows before a finding (and keeps for each slot)."""

FINDINGS = 100
"""How many illegal moves a report keeps (with their slots' histories); the rest are counted."""

BEFORE, AFTER = 16, 4
"""How many lines before and after the first finding the plot shows."""

SPAN = BEFORE + AFTER
"""Without a finding the plot shows the last SPAN + 1 lines of the trace."""

_SIZED = "not a slot of a pool of"  # the refusal that names the pool's size
_NAMES = {**{e: e.name.lower() for e in Event}, FREE: FREE}
_MOVES, _FREES = compiled(), free_events()  # the declaration, compiled once


class _Slots:
    """The replay's records as the model's step check reads them (`slots[i]`: slot i + 1)."""

    def __init__(self, records: dict, capacity: int):
        self.records, self.capacity = records, capacity

    def __len__(self) -> int:
        return self.capacity

    def __getitem__(self, i: int):
        return self.records.get(i + 1, FREE_SLOT)


_LOCKING = (Event.LOCK, Event.UNLOCK, Event.EVICT)


class Replay:
    """Feed it numbered trace lines in order (`feed`), then take its `report`."""

    def __init__(self, capacity: int | None = None):
        self.capacity = capacity  # None: no header, the largest id named (known at the end)
        self.bound = capacity if capacity is not None else MAX_CAPACITY
        self.slots: dict = {}  # slot id -> its record, for every slot a line moved
        self.history: dict = {}  # slot id -> deque of its last HISTORY moves
        self.events: Counter = Counter()
        self.findings: list = []
        self.illegal = self.lines = self.last = 0
        self.largest = 1
        self.unsized: list = []  # findings whose wording needs the pool's size (no header)
        self.recent: deque = deque()  # the plot's window, oldest first
        self.before: dict = {}  # slot id -> its last move before the window
        self.hi = None  # the window's last line, set at the first finding
        self.locks: dict = {}  # slot id -> the requests holding a lock on it, for launch lines

    def feed(self, lineno: int, line: TraceLine) -> None:
        """Replay one line: its moves, or a finding that changes nothing."""
        self.lines += 1
        self.last = lineno
        if type(line) is LaunchLine:
            self._launch(lineno, line)
            return
        event, ids = line.event, line.ids
        name = _NAMES.get(event) or (event if type(event) is str else event.name.lower())
        self.events[name] += 1
        if not ids:
            self._found(lineno, line, None, f"{name} by {line.actor} names no slot (an empty batch)")
            return
        top = ids[0] if len(ids) == 1 else max(ids)
        if top > self.largest:
            self.largest = top
        try:
            moves = self._moves(line, self.bound, lineno)
        except (LifecycleError, ValueError) as exc:
            slot = getattr(exc, "slot_id", None)
            slot = slot if type(slot) is int and 1 <= slot <= self.bound else None
            if self.capacity is None and isinstance(exc, BadSlotId) and _SIZED in exc.reason:
                self.unsized.append(len(self.findings))
            self._found(lineno, line, slot, str(exc).split("\n")[0])
            return
        slots, history = self.slots, self.history
        for made in moves:
            i = made[4]
            slots[i] = made[3]
            kept = history.get(i)
            if kept is None:
                kept = history[i] = deque(maxlen=HISTORY)
            kept.append(made)
        if event in _LOCKING:
            self._lock(event, ids, line.actor.id)
        if self.hi is None:  # the window follows the trace: moves older than SPAN lines leave it
            recent = self.recent
            recent.extend(moves)
            if recent[0][0] < lineno - SPAN:
                self._trim(lineno - SPAN)
        elif lineno <= self.hi:
            self.recent.extend(moves)

    def _lock(self, event: Event, ids: tuple, who: int) -> None:
        """The lock record after a LOCK, UNLOCK or EVICT line (whose locks each slot holds)."""
        for i in ids:
            if event is Event.LOCK:
                self.locks.setdefault(i, []).append(who)
            elif event is Event.UNLOCK and who in self.locks.get(i, ()):
                self.locks[i].remove(who)
            elif event is Event.EVICT:
                self.locks.pop(i, None)

    def _launch(self, lineno: int, line: LaunchLine) -> None:
        """Judge a launched step's rows against the slots as the trace left them (the model's
        `check_step`); a refused row is a finding. A trace says nothing of zeroing or copies, so
        every slot counts as filled: the first-read rule is the runtime's, not the replay's."""
        self.events[LAUNCH] += 1
        top = max(line.slots + line.sources, default=0)
        if top > self.largest:
            self.largest = top
        rows = tuple(
            Row(RowKind.PAD if a == NOBODY else RowKind.REQUEST, a, w, r)
            for w, a, r in zip(line.slots, line.actors, line.sources)
        )
        try:
            check_step(rows, _Slots(self.slots, self.bound), ALL_WRITTEN, self.locks)
        except (LifecycleError, ValueError) as exc:
            slot = getattr(exc, "slot_id", None)
            bounded = slot if type(slot) is int and 1 <= slot <= self.bound else None
            self._found(lineno, line, bounded, str(exc).split("\n")[0])

    def _moves(self, line: TraceLine, capacity: int, lineno: int = 0) -> list:
        """The moves of the line, one (lineno, line, record before, record after, slot id) for
        each slot, or raise the model's error. Each move is read from the compiled declaration
        (`slotwarden.cli.trace.moves`); a move it has no rule for is the model's `step`, which
        raises. A raw `free` makes on each slot the move the declaration gives a free by that
        actor (`model/free.py`); an actor the runtime refuses is refused here too (`BadActor`)."""
        event, ids, actor, get = line.event, line.ids, line.actor, self.slots.get
        checked_actor(actor, event if event != FREE else None)
        if len(ids) != 1 or type(ids[0]) is not int or not 1 <= ids[0] <= capacity:  # else they are fine
            check_ids(ids, capacity, event, actor)
        aid, target, epoch, out = actor.id, line.target, line.step, []
        if event == FREE:
            frees = _FREES[actor.kind]
            for i in ids:
                rec = get(i, FREE_SLOT)
                k = key(rec, aid)
                fired = frees[k] or free_rule(rec, actor, slot_id=i).event  # no event: the model raises
                table = _MOVES[fired]
                after = move(rec, table.moves[k], aid, target, epoch) if target >= 0 or not table.needs_target else None
                out.append((lineno, line, rec, after or step(rec, fired, actor, target, epoch, slot_id=i), i))
            return out
        table = _MOVES[event]
        moves = table.moves if table.kind is actor.kind and (target >= 0 or not table.needs_target) else None
        relevant = table.relevant
        for i in ids:
            rec = get(i, FREE_SLOT)
            after = move(rec, moves[key(rec, aid, relevant[rec[0]])], aid, target, epoch) if moves else None
            out.append((lineno, line, rec, after or step(rec, event, actor, target, epoch, slot_id=i), i))
        return out

    def _found(self, lineno: int, line: TraceLine, slot: int | None, error: str) -> None:
        self.illegal += 1
        if len(self.findings) < FINDINGS:
            history = tuple(Move._make(m) for m in self.history.get(slot, ())) if slot is not None else ()
            self.findings.append(Finding(lineno, line, slot, error, history))
        if self.hi is None:  # the first finding: the plot's window stops moving
            self._trim(lineno - BEFORE)
            self.hi = lineno + AFTER

    def _trim(self, lo: int) -> None:
        recent, before = self.recent, self.before
        while recent and recent[0][0] < lo:
            move = recent.popleft()
            before[move[4]] = move

    def report(self) -> Report:
        """The report of the lines fed so far."""
        capacity = max(self.capacity if self.capacity is not None else self.largest, 1)
        findings = list(self.findings)
        for k in self.unsized:  # worded with the pool's size, now known
            f = findings[k]
            try:
                self._moves(f.line, capacity)
            except (LifecycleError, ValueError) as exc:
                findings[k] = f._replace(error=str(exc).split("\n")[0])
        leaks = tuple(
            Leak(i, s, Move._make(self.history[i][-1]))
            for i, s in sorted(self.slots.items())
            if s.state is not State.FREE
        )
        window = sorted([*self.before.values(), *self.recent], key=lambda m: m[0])
        return Report(
            capacity,
            self.lines,
            self.events,
            tuple(sorted(self.slots)),
            tuple(findings),
            leaks,
            tuple(Move._make(m) for m in window),
            self.illegal,
            self.last,
        )
