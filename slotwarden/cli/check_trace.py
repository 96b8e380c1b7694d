"""`slotwarden check-trace FILE`: replay a slot-event trace (docs/traces.md) against the model.

Every line is applied to the pure model pool (`model/pool.py`); a line the model refuses is a
finding and changes nothing, and the replay goes on. At the end every slot that is not FREE is
a leak. The report gives the first illegal move with the history of its slot, the leaks, and a
summary; the exit status is 0 only when there is neither.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Iterable

from slotwarden.model.errors import BadSlotId, LifecycleError
from slotwarden.model.free import free_rule
from slotwarden.model.pool import Pool, apply, check_ids, new_pool
from slotwarden.model.vocabulary import NOBODY, Event, State
from slotwarden.runtime.inputs import actor as checked_actor
from slotwarden.runtime.trace import FREE, Header, TraceFormatError, TraceLine, parse
from slotwarden.cli.trace_report import Finding, Leak, Move, Report, show

MAX_CAPACITY = 2**24
"""The largest pool the checker replays (it builds every slot): a larger header capacity, or
without a header a larger slot id, makes the file not a trace the checker reads."""

HISTORY = 8
"""How many of a slot's moves the report shows before a finding."""


def read(path: Path) -> tuple[int | None, list[tuple[int, TraceLine]]]:
    """The header's capacity (None without one) and the numbered lines; raises TraceFormatError
    for a line that is not UTF-8 or not a trace line, a pool larger than `MAX_CAPACITY`, or a file
    with no event line."""
    capacity, lines, lineno = None, [], 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TraceFormatError(lineno, f"not UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1})")
            item = parse(text, lineno)
            if isinstance(item, Header):
                capacity = _fits(item.capacity, lineno, "capacity")
            elif item is not None:
                if capacity is None and item.ids:
                    _fits(max(item.ids), lineno, "slot id", " (and no header gives a smaller one)")
                lines.append((lineno, item))
    if not lines:
        raise TraceFormatError(max(lineno, 1), "no events (a trace has at least one event line)")
    return capacity, lines


def _fits(n: int, lineno: int, what: str, more: str = "") -> int:
    if n > MAX_CAPACITY:
        why = f"{what} {n} is above {MAX_CAPACITY} (2**24), the largest pool the checker replays{more}"
        raise TraceFormatError(lineno, why)
    return n


def check(lines: Iterable[tuple[int, TraceLine]], capacity: int | None = None) -> Report:
    """Replay `lines` on a model pool of `capacity` slots (default: the largest id named)."""
    lines = list(lines)
    if capacity is None:
        capacity = max((i for _, ln in lines for i in ln.ids), default=1)
    pool = new_pool(max(capacity, 1))
    moves: list[Move] = []
    findings: list[Finding] = []
    for lineno, line in lines:
        if not line.ids:
            ev = line.event if isinstance(line.event, str) else line.event.name.lower()
            findings.append(Finding(lineno, line, None, f"{ev} by {line.actor} names no slot (an empty batch)", ()))
            continue
        try:
            after = replay(pool, line)
        except (LifecycleError, ValueError) as exc:
            slot = getattr(exc, "slot_id", None)
            slot = slot if isinstance(slot, int) and 1 <= slot <= len(pool.slots) else None
            history = tuple(m for m in moves if m.line.ids and slot is not None and _moved(m, slot))[-HISTORY:]
            findings.append(Finding(lineno, line, slot, str(exc).split("\n")[0], history))
            continue
        for i in line.ids:
            moves.append(Move(lineno, line._replace(ids=(i,)), pool.slots[i - 1], after.slots[i - 1]))
        pool = after
    leaks = tuple(
        Leak(i, s, next((m for m in reversed(moves) if _moved(m, i)), None))
        for i, s in enumerate(pool.slots, 1)
        if s.state is not State.FREE
    )
    events = Counter(ln.event if isinstance(ln.event, str) else ln.event.name.lower() for _, ln in lines)
    slots = tuple(sorted({m.line.ids[0] for m in moves}))
    return Report(len(pool.slots), len(lines), events, slots, tuple(findings), leaks, tuple(moves))


def replay(pool: Pool, line: TraceLine) -> Pool:
    """The pool after `line`, or raise the model's error (nothing changes). A raw `free` makes
    on each slot the move the declaration gives a free by that actor (see `model/free.py`).
    An actor the runtime refuses (NOBODY, an id outside int64) is refused here too (`BadActor`)."""
    checked_actor(line.actor, line.event if line.event != FREE else None)
    if line.event != FREE:
        return apply(pool, line.event, line.ids, line.actor, line.target, line.step)
    if not line.ids:
        raise BadSlotId("an empty batch", slot_id=NOBODY, event="free", actor=line.actor)
    check_ids(line.ids, len(pool.slots), "free", line.actor)
    groups: dict[Event, list[int]] = {}
    for i in line.ids:
        groups.setdefault(free_rule(pool.slots[i - 1], line.actor, slot_id=i).event, []).append(i)
    for event, ids in groups.items():
        pool = apply(pool, event, ids, line.actor, NOBODY, line.step)
    return pool


def _moved(m: Move, slot: int) -> bool:
    return m.line.ids[0] == slot


def render(report: Report, name: str) -> str:
    """The report as text: first finding with its slot's history, leaks, summary."""
    out = []
    if report.findings:
        f = report.findings[0]
        out.append(f"first illegal move, line {f.lineno}: {f.error}")
        if f.slot is not None:
            out.append(f"  history of slot {f.slot}" + ("" if f.history else ": no earlier move in the trace"))
            out.extend(f"    {m}" for m in f.history)
        for other in report.findings[1:4]:
            out.append(f"then line {other.lineno}: {other.error}")
        if len(report.findings) > 4:
            out.append(f"... and {len(report.findings) - 4} more illegal moves")
    if report.leaks:
        out.append(f"leaks at the end ({len(report.leaks)} slot{'s' if len(report.leaks) > 1 else ''} not FREE):")
        for leak in report.leaks:
            last = f", last moved on {leak.last}" if leak.last else ""
            out.append(f"  slot {leak.slot}: {show(leak.record)}{last}")
    events = ", ".join(f"{e} {n}" for e, n in sorted(report.events.items()))
    verdict = "clean" if report.clean else f"{len(report.findings)} illegal moves, {len(report.leaks)} leaks"
    out.append(
        f"{name}: {report.lines} event lines, {len(report.slots)} slots moved of {report.capacity}; events: "
        f"{events or 'none'}; {verdict}"
    )
    return "\n".join(out)


def run(args) -> int:
    """The subcommand: 0 clean, 1 on any finding or leak, 2 on a file that cannot be read as a trace."""
    path = Path(args.file)
    try:
        header_capacity, lines = read(path)
    except TraceFormatError as exc:
        print(f"slotwarden check-trace: {path}:{exc.lineno}: {exc.why}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"slotwarden check-trace: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 2
    if args.capacity and header_capacity and args.capacity != header_capacity:
        why = f"the header gives capacity {header_capacity}, --capacity {args.capacity} (it is for header-less files)"
        print(f"slotwarden check-trace: {path}:1: {why}", file=sys.stderr)
        return 2
    if args.capacity and args.capacity > MAX_CAPACITY:
        print(f"slotwarden check-trace: --capacity {args.capacity} is above {MAX_CAPACITY} (2**24)", file=sys.stderr)
        return 2
    capacity = args.capacity or header_capacity
    report = check(lines, capacity)
    print(render(report, str(path)))
    if args.plot:
        from slotwarden.cli.trace_plot import PlotUnavailable, plot

        try:
            plot(report, args.plot)
        except PlotUnavailable as exc:
            print(f"slotwarden check-trace: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.plot}")
    return 0 if report.clean else 1


__all__ = ["MAX_CAPACITY", "Report", "Finding", "Leak", "Move", "check", "read", "replay", "render", "run"]
