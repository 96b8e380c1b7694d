"""`slotwarden check-trace FILE`: replay a slot-event trace (docs/traces.md) against the model.

The file is read line by line and every line is applied to the pure model as it comes
(`slotwarden.cli.trace.replay`): a line the model refuses is a finding and changes nothing, and
the replay goes on. At the end every slot that is not FREE is a leak. The report gives the first
illegal move with the history of its slot, the leaks, and a summary; the exit status is 0 only
when there is neither. Memory is bounded by the pool and the replay's windows, not the trace.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, Iterator

from slotwarden.cli.trace.replay import HISTORY, MAX_CAPACITY, Replay
from slotwarden.cli.trace.report import Finding, Leak, Move, Report, show
from slotwarden.model.errors import cut
from slotwarden.runtime.trace import Header, LaunchLine, TraceFormatError, TraceLine, parse


def numbered(f) -> Iterator[tuple[int, Header | TraceLine]]:
    """The numbered header and event lines of the binary file `f`, blank lines skipped; raises
    TraceFormatError for a line that is not UTF-8 or not a trace line, a pool larger than
    `MAX_CAPACITY`, or a file with no event line."""
    header = events = False
    lineno = 0
    for lineno, raw in enumerate(f, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceFormatError(lineno, f"not UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1})")
        item = parse(text, lineno)
        if item is None:
            continue
        if type(item) is Header:
            header = True
            _fits(item.capacity, lineno, "capacity")
        else:
            events = True
            ids = item.slots + item.sources if type(item) is LaunchLine else item.ids
            if not header and ids:
                _fits(max(ids), lineno, "slot id", " (and no header gives a smaller one)")
        yield lineno, item
    if not events:
        raise TraceFormatError(max(lineno, 1), "no events (a trace has at least one event line)")


def read(path: Path) -> tuple[int | None, list[tuple[int, TraceLine]]]:
    """The header's capacity (None without one) and every numbered event line, in memory (for
    small files and tests; `check_file` streams)."""
    with open(path, "rb") as f:
        items = list(numbered(f))
    capacity = next((item.capacity for _, item in items if type(item) is Header), None)
    return capacity, [(n, item) for n, item in items if type(item) is not Header]


def check_file(path: Path, capacity: int | None = None) -> Report:
    """Replay the trace at `path` line by line. `capacity` is for a header-less file: given with
    a header that disagrees, the file is refused (TraceFormatError on line 1)."""
    replay = None
    with open(path, "rb") as f:
        for lineno, item in numbered(f):
            if type(item) is Header:
                if capacity and capacity != item.capacity:
                    why = f"the header gives capacity {item.capacity}, --capacity {capacity}"
                    raise TraceFormatError(lineno, why + " (it is for header-less files)")
                capacity = item.capacity
                continue
            if replay is None:
                replay = Replay(capacity)
            replay.feed(lineno, item)
    return replay.report()


def _fits(n: int, lineno: int, what: str, more: str = "") -> int:
    if n > MAX_CAPACITY:
        why = f"{what} {cut(str(n))} is above {MAX_CAPACITY} (2**24), the largest pool the checker replays{more}"
        raise TraceFormatError(lineno, why)
    return n


def check(lines: Iterable[tuple[int, TraceLine]], capacity: int | None = None) -> Report:
    """Replay `lines` on a model pool of `capacity` slots (default: the largest id named)."""
    replay = Replay(capacity)
    for lineno, line in lines:
        replay.feed(lineno, line)
    return replay.report()


def render(report: Report, name: str) -> str:
    """The report as text: first finding with its slot's history, leaks, summary."""
    out = []
    illegal = max(report.illegal, len(report.findings))
    if report.findings:
        f = report.findings[0]
        out.append(f"first illegal move, line {f.lineno}: {f.error}")
        if f.slot is not None:
            out.append(f"  history of slot {f.slot}" + ("" if f.history else ": no earlier move in the trace"))
            out.extend(f"    {m}" for m in f.history)
        for other in report.findings[1:4]:
            out.append(f"then line {other.lineno}: {other.error}")
        if illegal > 4:
            out.append(f"... and {illegal - 4} more illegal moves")
    if report.leaks:
        out.append(f"leaks at the end ({len(report.leaks)} slot{'s' if len(report.leaks) > 1 else ''} not FREE):")
        for leak in report.leaks:
            last = f", last moved on {leak.last}" if leak.last else ""
            out.append(f"  slot {leak.slot}: {show(leak.record)}{last}")
    events = ", ".join(f"{e} {n}" for e, n in sorted(report.events.items()))
    verdict = "clean" if report.clean else f"{illegal} illegal moves, {len(report.leaks)} leaks"
    out.append(
        f"{name}: {report.lines} event lines, {len(report.slots)} slots moved of {report.capacity}; events: "
        f"{events or 'none'}; {verdict}"
    )
    return "\n".join(out)


def run(args) -> int:
    """The subcommand: 0 clean, 1 on any finding or leak, 2 on a file that cannot be read as a trace."""
    path = Path(args.file)
    if args.capacity and args.capacity > MAX_CAPACITY:
        print(
            f"slotwarden check-trace: --capacity {cut(str(args.capacity))} is above {MAX_CAPACITY} (2**24)",
            file=sys.stderr,
        )
        return 2
    try:
        report = check_file(path, args.capacity)
    except TraceFormatError as exc:
        print(f"slotwarden check-trace: {cut(str(path))}:{exc.lineno}: {exc.why}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"slotwarden check-trace: cannot read {cut(str(path))}: {exc.strerror}", file=sys.stderr)
        return 2
    print(render(report, str(path)))
    if args.plot:
        from slotwarden.cli.trace.plot import PlotUnavailable, plot

        try:
            plot(report, args.plot)
        except PlotUnavailable as exc:
            print(f"slotwarden check-trace: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.plot}")
    return 0 if report.clean else 1


__all__ = [
    "HISTORY",
    "MAX_CAPACITY",
    "Report",
    "Finding",
    "Leak",
    "Move",
    "check",
    "check_file",
    "numbered",
    "read",
    "render",
    "run",
]
