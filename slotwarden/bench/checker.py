"""`slotwarden bench checker`: the exhaustive checker's speed against today's, in one run.

For each bounds (default: the default run's, `checker.bounds.DEFAULT_BOUNDS`; --quick: the
tests' small ones; neither with speculative windows, which the reference does not model), the
checker (`checker.search.check`) and the reference it was made from
(`checker.reference.search.check`, the checker as it was) each search the whole state space,
interleaved, `rounds` times; the least CPU seconds of each (`time.process_time`: what other
processes take on a shared machine is not counted) give states and transitions per CPU-second
and the ratio. Both must find the same states, transitions, depth and verdict, else
`RuntimeError`: a faster checker that explores something else measures nothing.
"""

from __future__ import annotations

import os
import platform
import time

from slotwarden.bench import common
from slotwarden.verification.checker import reference
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS, TEST_BOUNDS
from slotwarden.verification.checker.search import check

DEFAULT = dict(bounds=tuple(b for b in DEFAULT_BOUNDS if not b.drafts), rounds=1)
QUICK = dict(bounds=tuple(b for b in TEST_BOUNDS if not b.drafts), rounds=2)
CONTENDERS = (("checker", check), ("reference", reference.check))


def _verdict(r) -> tuple:
    return r.states, r.transitions, r.max_depth, None if r.violation is None else r.violation.property


def one(bounds, rounds: int) -> dict:
    """One bounds: the least CPU seconds of each contender over `rounds` interleaved runs."""
    cpu: dict = {}
    seen: dict = {}
    for _ in range(rounds):
        for name, search in CONTENDERS:
            start = time.process_time()
            r = search(bounds)
            cpu[name] = min(cpu.get(name, float("inf")), time.process_time() - start)
            seen[name] = _verdict(r)
    if len(set(seen.values())) != 1:
        raise RuntimeError(f"{bounds}: the checkers disagree: {seen}")
    states, transitions, depth, violation = seen["checker"]
    row = {"bounds": str(bounds), "states": states, "transitions": transitions, "depth": depth}
    row["violation"] = violation
    for name, _ in CONTENDERS:
        row[name] = {
            "cpu_s": cpu[name],
            "states_per_s": states / cpu[name],
            "transitions_per_s": transitions / cpu[name],
        }
    row["ratio"] = cpu["reference"] / cpu["checker"]
    return row


def measure(device=None, *, log=print, bounds=DEFAULT["bounds"], rounds=DEFAULT["rounds"]) -> dict:
    """Every bounds' row, the totals, and the machine's."""
    rows, load = [], [common.loadavg()]
    for b in bounds:
        log(f"checker: {b}")
        rows.append(one(b, rounds))
        load.append(common.loadavg())
    total = {"states": sum(r["states"] for r in rows), "transitions": sum(r["transitions"] for r in rows)}
    for name, _ in CONTENDERS:
        cpu = sum(r[name]["cpu_s"] for r in rows)
        total[name] = {
            "cpu_s": cpu,
            "states_per_s": total["states"] / cpu,
            "transitions_per_s": total["transitions"] / cpu,
        }
    total["ratio"] = total["reference"]["cpu_s"] / total["checker"]["cpu_s"]
    return {
        "rows": rows,
        "total": total,
        "rounds": rounds,
        "cpu": common.cpu_name(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load": load,
    }


def report(result: dict) -> str:
    out = [
        f"the exhaustive checker against the reference (today's form), CPU seconds, least of {result['rounds']}, "
        f"on {result['cpu']}",
        f"{'bounds':<50} {'states':>9} {'transitions':>11} {'ref cpu s':>9} {'cpu s':>8} {'ref states/s':>12} "
        f"{'states/s':>9} {'trans/s':>9} {'ratio':>6}",
    ]
    for r in [*result["rows"], {"bounds": "total", **result["total"]}]:
        new, ref = r["checker"], r["reference"]
        out.append(
            f"{r['bounds']:<50} {r['states']:>9} {r['transitions']:>11} {ref['cpu_s']:>9.2f} {new['cpu_s']:>8.2f} "
            f"{ref['states_per_s']:>12.0f} {new['states_per_s']:>9.0f} {new['transitions_per_s']:>9.0f} "
            f"{r['ratio']:>5.2f}x"
        )
    note = common.loaded_note(result["load"], result["cpu_count"])
    return "\n".join(out + ([note] if note else []))


def run(args, **params) -> int:
    """The CLI entry point: `slotwarden bench checker [--json FILE] [--quick]`. `params`
    override `measure`'s arguments (the tests use tiny bounds)."""
    return common.run(args, params, DEFAULT, QUICK, measure, report)
