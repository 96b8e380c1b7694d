"""Slot-event traces: one JSON object a line for each batch of one lifecycle event.

The format (docs/traces.md) is engine-agnostic: any engine can write it, and
`slotwarden check-trace` replays it against the model. `StatePool` and `LedgerGuard` write one
when given `trace=` (a path, a text file, or a `TraceWriter`); off by default, and then their
moves run as without one (a launch only looks whether a trace is attached).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from slotwarden.model.errors import SlotwardenError, cut, shown
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event

from slotwarden.runtime.ledger.recorder import Actors, FlightRecorder, ids_of

FORMAT = 1
"""The version of the format, written in the optional header line."""

FREE = "free"
"""The event name of an engine's raw free, which the checker maps to a lifecycle event."""

LAUNCH = "launch"
"""The event name of a launched step's write set (`LaunchLine`)."""

_EVENTS = {e.name.lower(): e for e in Event}
_KINDS = {k.name.lower(): k for k in ActorKind}
_EVENTS_AND_FREE = {**_EVENTS, FREE: FREE}
_new = tuple.__new__


class TraceLine(NamedTuple):
    """One line of a trace: `actor` fires `event` on `ids` during `step` (the step in flight;
    for a fence, the step the device finished is the actor's id). `target` is the borrowing
    request of a lend or the session of a park, else NOBODY. `event` is an `Event` or FREE."""

    step: int
    event: Event | str
    ids: tuple
    actor: Actor
    target: int = NOBODY

    def to_json(self) -> str:
        event = self.event if isinstance(self.event, str) else self.event.name.lower()
        return json.dumps(
            {
                "step": self.step,
                "event": event,
                "ids": list(self.ids),
                "actor": self.actor.kind.name.lower(),
                "actor_id": self.actor.id,
                "target": None if self.target == NOBODY else self.target,
            },
            separators=(", ", ": "),
        )


class LaunchLine(NamedTuple):
    """A launched step's write set (`"event": "launch"`): row i writes slot `slots[i]` for
    request `actors[i]` (NOBODY: a pad row) and reads `sources[i]` besides (its own slot when
    the line gives none). It moves no slot; the checker judges its rows against the slots."""

    step: int
    slots: tuple
    actors: tuple
    sources: tuple
    event: str = LAUNCH

    def to_json(self) -> str:
        actors = [None if a == NOBODY else a for a in self.actors]
        out = {"step": self.step, "event": LAUNCH, "rows": list(self.slots), "actors": actors}
        if self.sources != self.slots:
            out["sources"] = list(self.sources)
        return json.dumps(out, separators=(", ", ": "))


class Header(NamedTuple):
    """The optional first line: the format version and the pool's capacity."""

    capacity: int

    def to_json(self) -> str:
        return json.dumps({"slotwarden_trace": FORMAT, "capacity": self.capacity})


class TraceFormatError(SlotwardenError, ValueError):
    """A line that is not a trace line; names the line number."""

    def __init__(self, lineno: int, why: str):
        self.lineno, self.why = lineno, why
        super().__init__(f"line {lineno}: {why}")


_INT = r"-?(?:0|[1-9][0-9]{0,17})"  # at most 18 digits: an int64, and well within int()'s limit
_CANONICAL = re.compile(
    rf'\{{"step": (0|[1-9][0-9]{{0,17}}+), "event": "([a-z]++)", "ids": \[((?:{_INT}(?:, {_INT})*+)?+)\], '
    rf'"actor": "([a-z]++)", "actor_id": ({_INT}), "target": (null|{_INT})\}}[ \t\r\n]*+'
)
"""A line exactly as `TraceLine.to_json` writes it: read without the JSON parser (it is the hot
path of `check-trace`). Any other line, valid or not, goes through `json.loads`. The possessive
quantifiers (`*+`, `++`) accept the same lines as plain ones (what follows each can never be what
it gave back), without the backtracking."""


def parse(text: str, lineno: int) -> TraceLine | LaunchLine | Header | None:
    """One line of a trace (None for a blank line); raises `TraceFormatError`."""
    m = _CANONICAL.fullmatch(text)
    if m is not None:
        step, event, ids, kind, who, target = m.groups()
        event, kind = _EVENTS_AND_FREE.get(event), _KINDS.get(kind)
        if event is not None and kind is not None:
            ids = (int(ids),) if ids.isdigit() else tuple(map(int, ids.split(", "))) if ids else ()
            actor = _new(Actor, (kind, int(who)))  # tuple.__new__: what the NamedTuples' own __new__ does
            return _new(TraceLine, (int(step), event, ids, actor, NOBODY if target == "null" else int(target)))
    return parse_json(text, lineno)


def parse_json(text: str, lineno: int) -> TraceLine | LaunchLine | Header | None:
    """`parse` for any line, through the JSON parser: every error it can give is named here."""
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(lineno, f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise TraceFormatError(lineno, "not a trace line: JSON nested deeper than the parser reads") from None
    except ValueError as exc:  # a parser limit, e.g. an integer of more digits than int() converts
        raise TraceFormatError(lineno, f"not a trace line: {cut(str(exc).split(';')[0])}") from None
    if not isinstance(obj, dict):
        raise TraceFormatError(lineno, f"a trace line is a JSON object, not {type(obj).__name__}")
    if "slotwarden_trace" in obj:
        if lineno != 1:
            raise TraceFormatError(lineno, "the header may only be the first line")
        if obj["slotwarden_trace"] != FORMAT:
            raise TraceFormatError(lineno, f"format {shown(obj['slotwarden_trace'])}, this checker reads {FORMAT}")
        return Header(_int(obj, "capacity", lineno, low=1))
    if obj.get("event") == LAUNCH:
        return _launch(obj, lineno)
    missing = [k for k in ("step", "event", "ids", "actor", "actor_id") if k not in obj]
    if missing:
        raise TraceFormatError(lineno, f"missing {', '.join(missing)}")
    event = obj["event"]
    if not isinstance(event, str) or event not in _EVENTS_AND_FREE:
        raise TraceFormatError(lineno, f"unknown event {shown(event)} (one of {', '.join(_EVENTS_AND_FREE)})")
    kind = _KINDS.get(obj["actor"]) if isinstance(obj["actor"], str) else None
    if kind is None:
        raise TraceFormatError(lineno, f"unknown actor kind {shown(obj['actor'])} (one of {', '.join(_KINDS)})")
    ids = obj["ids"]
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TraceFormatError(lineno, f"ids must be a list of integers, not {shown(ids)}")
    target = obj.get("target")
    if target is not None and (isinstance(target, bool) or not isinstance(target, int)):
        raise TraceFormatError(lineno, f"target must be an integer or null, not {shown(target)}")
    return TraceLine(
        _int(obj, "step", lineno, low=0),
        _EVENTS.get(event, FREE),
        tuple(ids),
        Actor(kind, _int(obj, "actor_id", lineno)),
        NOBODY if target is None else target,
    )


def _launch(obj: dict, lineno: int) -> LaunchLine:
    missing = [k for k in ("step", "rows", "actors") if k not in obj]
    if missing:
        raise TraceFormatError(lineno, f"a launch line lacks {', '.join(missing)}")
    slots = _ints(obj, "rows", lineno)
    actors = _ints(obj, "actors", lineno, len(slots), none=NOBODY)
    sources = _ints(obj, "sources", lineno, len(slots)) if obj.get("sources") is not None else slots
    return LaunchLine(_int(obj, "step", lineno, low=0), slots, actors, sources)


def _ints(obj: dict, key: str, lineno: int, n: int | None = None, none: int | None = None) -> tuple:
    """`obj[key]`: a list of integers (`null` read as `none`, when given), of `n` when given."""
    v = obj[key]
    ok = isinstance(v, list) and all(
        (isinstance(i, int) and not isinstance(i, bool)) or (i is None and none is not None) for i in v
    )
    if not ok or (n is not None and len(v) != n):
        need = "a list of integers" + ("" if n is None else f", one per row ({n})")
        raise TraceFormatError(lineno, f"{key} must be {need}, not {shown(v)}")
    return tuple(none if i is None else i for i in v)


def _int(obj: dict, key: str, lineno: int, low: int | None = None) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or (low is not None and v < low):
        at_least = "" if low is None else f" >= {low}"
        raise TraceFormatError(lineno, f"{key} must be an integer{at_least}, not {shown(v)}")
    return v


class TraceWriter:
    """Writes trace lines to `sink`: a path (opened for writing, line-buffered so that a crash
    loses no line, closed by `close`) or a text file (flushed by `flush`)."""

    def __init__(self, sink, capacity: int | None = None):
        self._owned = isinstance(sink, (str, Path))
        self.file = open(sink, "w", encoding="utf-8", buffering=1) if self._owned else sink
        if capacity is not None:
            self.file.write(Header(capacity).to_json() + "\n")

    def write(self, step: int, event, ids, actor: Actor, target: int = NOBODY) -> None:
        ids = _host(ids)  # one batch, one line
        self.file.write(TraceLine(int(step), event, ids, actor, int(target)).to_json() + "\n")

    def launch(self, step: int, slots, actors, sources=None) -> None:
        """A launched step's write set, one line (`LaunchLine`)."""
        rows, who = _host(slots), _host(actors)
        src = rows if sources is None else _host(sources)
        self.file.write(LaunchLine(int(step), rows, who, src).to_json() + "\n")

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.flush()
        if self._owned:
            self.file.close()


def _host(ids) -> tuple:
    """A batch of ids (a tensor on any device, an array, a list) as a tuple of ints."""
    ids = ids.cpu() if hasattr(ids, "cpu") else ids  # a device tensor: copied to the host (a sync)
    return tuple(np.asarray(ids, dtype=np.int64).reshape(-1).tolist())


class TracingRecorder(FlightRecorder):
    """A flight recorder that also writes every batch it records to a trace."""

    def __init__(self, depth: int, writer: TraceWriter):
        super().__init__(depth)
        self.writer = writer

    def record(self, event: Event, actor, target: int, epoch: int, ids, before, after) -> None:
        super().record(event, actor, target, epoch, ids, before, after)
        ids = ids_of(ids)
        if type(actor) is Actors:  # a batch of many actors: one line for each, its slots in batch order
            who = np.asarray(actor.ids, dtype=np.int64)
            for me in dict.fromkeys(actor.ids):
                self.writer.write(epoch, event, ids[who == me], Actor(actor.kind, me), target)
        else:
            self.writer.write(epoch, event, ids, actor, target)


def attach(ledger, trace) -> TraceWriter | None:
    """Make `ledger` write every batch it records to `trace` (a path, a text file or a
    `TraceWriter`; None: nothing changes). Returns the writer."""
    if trace is None:
        return None
    writer = trace if isinstance(trace, TraceWriter) else TraceWriter(trace, ledger.capacity)
    ledger.recorder = TracingRecorder(ledger.recorder.depth, writer)
    return writer


def launched(ledger, step: int, slots, actors, sources=None) -> None:
    """Write step `step`'s write set to `ledger`'s trace, if it writes one (`attach`)."""
    writer = getattr(ledger.recorder, "writer", None)
    if writer is not None:
        writer.launch(step, slots, actors, sources)
