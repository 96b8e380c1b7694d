"""Slot-event traces end to end: what the runtime writes, `check-trace` reads back clean.

- A scheduler (sessions, parallel sampling, the prefix cache, an abort) writing to a text file
  and a drop-in allocator writing to a path: each trace starts with the pool's header and
  replays clean (no illegal move; idle at the end, no slot left held).
- Every line read back round-trips: the parser's fast path and its JSON path give the same
  line, and writing it again gives the same text; the header too.
- Every malformed line is refused with a `TraceFormatError` naming its line number and what is
  wrong (`BAD_LINES`), and a trace with the seed bug's free is reported at that line.
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from slotwarden.cli.trace.check import check_file
from slotwarden.kernels.layer import TinyMambaConfig
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guarded_allocator import GuardedAllocator
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.trace import FORMAT, Header, TraceFormatError, TraceLine, TraceWriter, parse, parse_json

LINE = '{{"step": 1, "event": "alloc", "ids": [1], "actor": "request", "actor_id": 1, "target": null{}}}'
BAD_LINES = {  # a line (as line 2 of a file, unless it is a header test) -> words its refusal holds
    "not json": "not JSON",
    "[" * 100_000: "nested deeper",
    '{"step": ' + "7" * 5000 + "}": "not a trace line: Exceeds the limit",
    "[1, 2]": "a JSON object, not list",
    '{"slotwarden_trace": 1, "capacity": 4}': "the header may only be the first line",
    '{"step": 1, "event": "alloc"}': "missing ids, actor, actor_id",
    LINE.replace('"alloc"', '"explode"').format(""): "unknown event 'explode'",
    LINE.replace('"request"', '"robot"').format(""): "unknown actor kind 'robot'",
    LINE.replace("[1]", "[true]").format(""): "ids must be a list of integers, not [True]",
    LINE.replace("[1]", '"1"').format(""): "ids must be a list of integers, not '1'",
    LINE.replace("null", "true").format(""): "target must be an integer or null, not True",
    LINE.replace('"step": 1', '"step": -1').format(""): "step must be an integer >= 0, not -1",
    LINE.replace('"actor_id": 1', '"actor_id": 1.5').format(""): "actor_id must be an integer, not 1.5",
}
BAD_HEADERS = {
    '{"slotwarden_trace": 2, "capacity": 4}': f"format 2, this checker reads {FORMAT}",
    '{"slotwarden_trace": 1, "capacity": 0}': "capacity must be an integer >= 1, not 0",
}


def problems() -> list[str]:
    out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="slotwarden-trace-") as tmp:
        out += _scheduler_trace(Path(tmp) / "scheduler.jsonl")
        out += _allocator_trace(Path(tmp) / "allocator.jsonl")
        out += _seed_bug(Path(tmp) / "seed-bug.jsonl")
    out += _refusals()
    return out


def _scheduler_trace(path: Path) -> list[str]:
    text = io.StringIO()  # a text file: the pool's ledger makes its writer, with the header
    sched = build(TinyMambaConfig(layers=1), slots=4, max_running=3, prefix_cache=True, trace=text)
    sid = sched.open_session()
    sched.submit([1, 2, 3], max_new_tokens=3, session=sid)
    sched.submit([4, 5], max_new_tokens=2, session=sid)
    sched.submit_n([6, 7, 8], max_new_tokens=3, n=3, temperature=1.0, seed=5)
    doomed = sched.submit([9, 9, 9, 9], max_new_tokens=6)
    sched.step()
    sched.abort(doomed)
    sched.run()
    sched.close_session(sid)
    sched.run()
    sched.flush_cache()
    sched.step()  # fences what the flush released
    path.write_text(text.getvalue())
    return _judged(path, "scheduler", sched.pool.capacity)


def _allocator_trace(path: Path) -> list[str]:
    writer = TraceWriter(str(path), 4)  # a path: the writer opens it, and closes it
    allocator = GuardedAllocator(FreeList(4), trace=writer)
    with allocator.acting(Actor.request(1)):
        ids = allocator.alloc(2)
        allocator.admit(ids)
        allocator.park(ids[:1], 7)
        allocator.free(ids[1:])
    with allocator.acting(Actor.session(7)):
        allocator.lend(ids[:1], 2)
    with allocator.acting(Actor.request(2)):
        allocator.admit(ids[:1])
        allocator.fire(Event.FINISH, ids[:1])
    with allocator.acting(Actor.session(7)):
        allocator.free(ids[:1])
    allocator.fence()
    writer.flush()
    writer.close()
    return _judged(path, "allocator", 4)


def _judged(path: Path, who: str, capacity: int) -> list[str]:
    out = []
    lines = path.read_text().splitlines()
    if not lines or parse(lines[0], 1) != Header(capacity):
        out.append(f"{who} trace: the first line is {lines[:1]}, not the header of capacity {capacity}")
    report = check_file(path)
    if not report.clean or report.leaks or report.findings:
        first = report.findings[0].error if report.findings else f"leaks {[leak.slot for leak in report.leaks]}"
        out.append(f"{who} trace: check-trace finds it unclean: {first}")
    if report.lines != len(lines) - 1 or report.lines < 5:
        out.append(f"{who} trace: check-trace read {report.lines} event lines of {len(lines) - 1}")
    for n, text in enumerate(lines, 1):
        fast, slow = parse(text, n), parse_json(text, n)
        if fast != slow or fast.to_json() != text:
            out.append(f"{who} trace line {n}: parse {fast}, JSON path {slow}, written again {fast.to_json()!r}")
            break
    return out


def _seed_bug(path: Path) -> list[str]:
    """The seed bug in a trace: request 2 frees the slot session 7 lent it; check-trace names line 6."""
    lines = [Header(2).to_json()]
    for event, actor, target in (
        (Event.ALLOC, Actor.request(1), -1),
        (Event.ADMIT, Actor.request(1), -1),
        (Event.PARK, Actor.request(1), 7),
        (Event.LEND, Actor.session(7), 2),
        ("free", Actor.request(2), -1),
    ):
        lines.append(TraceLine(1, event, (1,), actor, target).to_json())
    path.write_text("\n".join(lines) + "\n")
    report = check_file(path)
    if not report.findings or report.findings[0].lineno != 6:
        return [f"check-trace of the seed bug's trace: findings {[f.lineno for f in report.findings]}, want line 6"]
    return []


def _refusals() -> list[str]:
    out = []
    for text, words in BAD_LINES.items():
        out += _refused(text, 2, words)
    for text, words in BAD_HEADERS.items():
        out += _refused(text, 1, words)
    header = Header(5).to_json()
    if parse(header, 1) != Header(5):
        out.append(f"the header {header} reads back as {parse(header, 1)}")
    spaced = LINE.format(', "extra": 0').replace(": ", ":  ")  # valid, not canonical: the JSON path
    want = TraceLine(1, Event.ALLOC, (1,), Actor.request(1))
    if parse(spaced, 3) != want or parse("  \n", 4) is not None:
        out.append(f"a non-canonical line reads {parse(spaced, 3)}, not {want} (or a blank line is not skipped)")
    return out


def _refused(text: str, lineno: int, words: str) -> list[str]:
    shown = text if len(text) < 60 else text[:40] + "..."
    try:
        got = parse(text, lineno)
    except TraceFormatError as e:
        if e.lineno != lineno or not str(e).startswith(f"line {lineno}: ") or words not in str(e):
            return [f"{shown!r} on line {lineno}: refused with {str(e)[:120]!r}, want the words {words!r}"]
        return []
    except Exception as e:  # noqa: BLE001 (any other error is the finding)
        return [f"{shown!r} on line {lineno}: {type(e).__name__}: {str(e)[:100]}, not a TraceFormatError"]
    return [f"{shown!r} on line {lineno}: read as {got}, not refused"]
