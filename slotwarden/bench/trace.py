"""`slotwarden bench trace`: how fast `check-trace` reads a long trace, and that its memory is flat.

`synthetic(n, capacity)` is a clean trace of `n` event lines: slot after slot (round the pool),
a request takes the slot and runs, parks it with its session, the session lends it to a second
request, whose turn runs and finishes; the session frees it (a raw `free`) and the fence gives
it back: the life of docs/traces.md's example. For each size the bench writes it to a file
(header first), times `check_file` on it (the CLI's replay) and measures, in a second pass, the
peak of Python's allocations during the check (tracemalloc). Reported: events/s and the peak,
for each size side by side, so that a peak that grew with the trace would show. events/s is
over wall seconds; the CPU seconds of the checking thread are reported beside them.
"""

from __future__ import annotations

import os
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Iterator

from slotwarden.bench import common
from slotwarden.bench.common import cpu_name, loadavg, loaded_note
from slotwarden.cli.trace.check import check_file
from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime.trace import FREE, Header, TraceLine

DEFAULT = dict(sizes=(10**5, 10**6), capacity=64)
QUICK = dict(sizes=(10**4, 10**5), capacity=64)


def synthetic(n: int, capacity: int = 64) -> Iterator[TraceLine]:
    """A clean trace of `n` event lines on a pool of `capacity` slots (no header)."""
    made = rid = step = 0
    while True:
        slot = made // 8 % capacity + 1
        owner, session, borrower = Actor.request(rid), Actor.session(rid + 1), Actor.request(rid + 2)
        for line in (
            TraceLine(step, Event.ALLOC, (slot,), owner),
            TraceLine(step, Event.ADMIT, (slot,), owner),
            TraceLine(step + 1, Event.PARK, (slot,), owner, session.id),
            TraceLine(step + 1, Event.LEND, (slot,), session, borrower.id),
            TraceLine(step + 1, Event.ADMIT, (slot,), borrower),
            TraceLine(step + 2, Event.FINISH, (slot,), borrower),
            TraceLine(step + 2, FREE, (slot,), session),
            TraceLine(step + 3, Event.FENCE, (slot,), Actor.fence(step + 2)),
        ):
            if made == n:
                return
            made += 1
            yield line
        rid, step = rid + 3, step + 3


def to_json(line: TraceLine) -> str:
    """`line.to_json()`, formatted directly (a test holds them equal): writing 10^6 lines
    through `json.dumps` takes longer than checking them."""
    event = line.event if type(line.event) is str else line.event.name.lower()
    ids = ", ".join(map(str, line.ids))
    target = "null" if line.target == NOBODY else line.target
    return (
        f'{{"step": {line.step}, "event": "{event}", "ids": [{ids}], "actor": "{line.actor.kind.name.lower()}", '
        f'"actor_id": {line.actor.id}, "target": {target}}}'
    )


def write(path: Path, n: int, capacity: int = 64) -> Path:
    """The synthetic trace of `n` events, with its header, at `path`."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(Header(capacity).to_json() + "\n")
        f.writelines(to_json(line) + "\n" for line in synthetic(n, capacity))
    return path


def one(path: Path, n: int) -> dict:
    """Check the trace at `path` twice: timed, then under tracemalloc for its peak."""
    start, cpu = time.perf_counter(), time.thread_time()
    report = check_file(path)
    wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
    if not report.clean or report.lines != n:
        raise RuntimeError(f"the synthetic trace of {n} events did not replay clean ({report.lines} lines)")
    tracemalloc.start()
    try:
        check_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {
        "events": n,
        "file_bytes": path.stat().st_size,
        "wall_s": wall,
        "cpu_s": cpu,
        "events_per_s": n / wall,
        "peak_bytes": peak,
    }


def measure(device=None, *, log=print, sizes=DEFAULT["sizes"], capacity=DEFAULT["capacity"]) -> dict:
    """Every size's numbers, and the machine's."""
    rows, load = [], [loadavg()]
    with tempfile.TemporaryDirectory(prefix="slotwarden-trace-") as folder:
        for n in sizes:
            log(f"trace: writing {n} events")
            path = write(Path(folder) / f"trace-{n}.jsonl", n, capacity)
            log(f"trace: checking {n} events")
            rows.append(one(path, n))
            path.unlink()
            load.append(loadavg())
    return {"rows": rows, "capacity": capacity, "cpu": cpu_name(), "load": load}


def report(result: dict) -> str:
    out = [
        f"check-trace on a clean synthetic trace (pool of {result['capacity']} slots), on {result['cpu']}",
        f"{'events':>10} {'file MB':>8} {'wall s':>8} {'cpu s':>8} {'events/s':>10} {'peak MiB':>9}",
    ]
    for r in result["rows"]:
        out.append(
            f"{r['events']:>10} {r['file_bytes'] / 1e6:>8.1f} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} "
            f"{r['events_per_s']:>10.0f} "
            f"{r['peak_bytes'] / 2**20:>9.2f}"
        )
    note = loaded_note(result["load"], os.cpu_count())
    return "\n".join(out + ([note] if note else []))


def run(args, **params) -> int:
    """The CLI entry point: `slotwarden bench trace [--json FILE] [--quick]`. `params` override
    `measure`'s arguments (the tests use tiny sizes)."""
    return common.run(args, params, DEFAULT, QUICK, measure, report)
