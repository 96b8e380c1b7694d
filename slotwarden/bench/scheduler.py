"""`slotwarden bench scheduler`: the scheduler's host overhead per step, without the layer's compute.

The real `Scheduler` and `StatePool` run with only the model replaced by `StubModel`, whose
`prefill`/`decode` return a constant token tensor: what is timed is `step()` minus the layer.
Workloads at N = 16, 256 and 1024 running requests: `decode` (steady state: launch and fence)
and `churn` (about N/32 requests finish, allocate and admit every step). Then, with the real
layer, the prefix cache off and on (`prefix.py`) and plain against speculative (`speculative.py`).

Each runs with the pool's checks on and off: two schedulers fed the same seeded workload, in
alternating turns of a few steps, the median of the repeats. A second, instrumented pass times
every outermost ledger call and, apart, the zeroing of allocated slots and the launch check
(`check_step` on the step's row -> slot index): the ledger, zeroing and launch check shares, and
the checking share inside the ledger. A ledger with checks off keeps to its numpy path, so a
negative checking share means the checked compiled move beats it (benchmarks/README.md).
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from typing import Callable

import torch

from slotwarden.bench import common as bench_common
from slotwarden.bench import prefix as bench_prefix
from slotwarden.bench import speculative as bench_speculative
from slotwarden.bench.common import device_of, host_clock, machine, sync_for, write_json  # noqa: F401 (write_json: the module's API)
from slotwarden.cli.demo import build_scheduler
from slotwarden.runtime.scheduler.intake import MAX_NEW_TOKENS
from slotwarden.runtime.scheduler.scheduler import Scheduler

NS = (16, 256, 1024)
WORKLOADS = ("decode", "churn")
CHECKS = ("strict", "off")
DEFAULT = dict(repeats=5, loop_s=0.3, warmup=64, min_steps=16)  # the recorded results
QUICK = dict(repeats=2, loop_s=0.02, warmup=8, min_steps=8)  # a smoke run (most of it N=1024)
NEW_TOKENS = (16, 48)  # churn: new tokens of each request
PROMPT = (1, 4)  # churn: prompt tokens of each replacement
LEDGER_CALLS = ("alloc", "alloc_each", "apply", "apply_each", "launch", "fence", "held_by", "_ids")
TARGET_N = 256
TARGET_SHARE = 5.0  # % of the step spent checking, at TARGET_N
TARGET_US = 1000.0  # µs of host overhead per step, at TARGET_N
TARGET_LEDGER = 15.0  # % of the step spent in the ledger (checks on), at TARGET_N
TARGET_LAUNCH = 3.0  # % of the step spent in the launch check (check_step), at TARGET_N


class StubModel:
    """TinyMamba's `prefill`/`decode` signature, no compute: the next token of every row is 1."""

    def __init__(self, rows: int, device):
        self.tokens = torch.ones(rows, dtype=torch.int64, device=device)

    def prefill(self, tokens, slots, conv_state, ssm_state, pad_slot: int = 0):
        return self.tokens[: len(tokens)]

    def decode(self, tokens, slots, conv_state, ssm_state, pad_slot: int = 0):
        return self.tokens[: tokens.shape[0]]


class Workload:
    """N running requests on a stubbed scheduler, kept at N by replacing those that finish."""

    def __init__(self, kind: str, n: int, check: str, device, seed: int = 0):
        self.kind, self.n = kind, n
        self.sched: Scheduler = build_scheduler(
            n, device, check=check, max_running=n, token_budget=max(64, 4 * n), session_timeout=None
        )
        self.sched.model = StubModel(n, device)
        self.rng = random.Random(seed)
        self.tokens = 0
        for _ in range(n):
            self._submit()

    def _submit(self) -> None:
        if self.kind == "decode":
            self.sched.submit([1], MAX_NEW_TOKENS)  # decodes for as long as the benchmark runs
        else:
            self.sched.submit([1] * self.rng.randint(*PROMPT), self.rng.randint(*NEW_TOKENS))

    def steps(self, count: int, timer: Callable[[], float] = time.perf_counter) -> float:
        """Run `count` steps; returns the seconds spent inside `step()` (replacements untimed)."""
        total = 0.0
        step = self.sched.step
        for _ in range(count):
            t0 = timer()
            report = step()
            total += timer() - t0
            self.tokens += report.size if report.kind == "decode" else 0
            for _ in report.finished:
                self._submit()
        return total


class LaunchTimer:
    """Times the launch check (`check_step`, called by `StatePool.launch`) per ledger it judges,
    while installed: `seconds[id(ledger)]`."""

    def __init__(self, clock=time.perf_counter):
        from slotwarden.runtime import pool as pool_module

        self.module, self.clock, self.seconds = pool_module, clock, {}
        self.check = pool_module.check_step
        pool_module.check_step = self._timed

    def _timed(self, ledger, *args, **kwargs):
        t0 = self.clock()
        try:
            return self.check(ledger, *args, **kwargs)
        finally:
            self.seconds[id(ledger)] = self.seconds.get(id(ledger), 0.0) + self.clock() - t0

    def remove(self) -> None:
        self.module.check_step = self.check


class LedgerTimer:
    """Times the outermost calls into one ledger (nested calls count once), on that instance;
    with `pool`, also the pool's zeroing inside them (`zeroing`, left out of `seconds`)."""

    def __init__(self, ledger, names=LEDGER_CALLS, pool=None, clock=time.perf_counter):
        self.ledger, self.names, self.pool, self.clock = ledger, names, pool, clock
        self.seconds, self.calls, self._depth, self.zeroing = 0.0, 0, 0, 0.0
        for name in names:
            setattr(ledger, name, self._wrap(getattr(ledger, name)))
        if pool is not None:
            pool._zero_batch = self._zeroing(pool._zero_batch)

    def _zeroing(self, fn):
        clock = self.clock

        def timed(batch):
            t0 = clock()
            try:
                return fn(batch)
            finally:
                took = clock() - t0
                self.zeroing += took
                self.seconds -= took  # the state's work, not the ledger's

        return timed

    def _wrap(self, fn):
        clock = self.clock

        def timed(*args, **kwargs):
            if self._depth:
                return fn(*args, **kwargs)
            self._depth = 1
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += clock() - t0
                self.calls += 1
                self._depth = 0

        return timed

    def remove(self) -> None:
        for name in self.names:
            delattr(self.ledger, name)  # the class's method shows through again
        if self.pool is not None:
            del self.pool._zero_batch


def _interleaved(
    runs: dict, loop_s: float, min_steps: int, chunk: int, sync, instrument: bool, clock=time.perf_counter
) -> dict:
    """One repeat: the schedulers of `runs` step in turns of `chunk` steps (the order alternating
    each turn, so load on the machine hits both alike) until each spent `loop_s` seconds in
    step() and ran `min_steps`. Both run the same seeded workload, so turn i of one and turn i of
    the other step through the same batches. Per check: seconds in step() per step, and with
    `instrument`, seconds inside the ledger per step and ledger calls per step."""
    names = list(runs)
    spent = {c: 0.0 for c in names}
    steps = {c: 0 for c in names}
    timers = (
        {c: LedgerTimer(runs[c].sched.pool.ledger, pool=runs[c].sched.pool, clock=clock) for c in names}
        if instrument
        else {}
    )
    launches = LaunchTimer(clock) if instrument else None
    gc_was = gc.isenabled()
    gc.disable()
    try:
        turn = 0
        while any(spent[c] < loop_s or steps[c] < min_steps for c in names):
            for c in names if turn % 2 == 0 else names[::-1]:
                inside = runs[c].steps(chunk, clock)
                t0 = clock()
                sync()  # on CUDA: what the steps left queued on the device counts too
                spent[c] += inside + (clock() - t0)
                steps[c] += chunk
            turn += 1
    finally:
        for t in timers.values():
            t.remove()
        if launches is not None:
            launches.remove()
        if gc_was:
            gc.enable()
    out = {}
    for c in names:
        out[c] = {"step_s": spent[c] / steps[c], "steps": steps[c]}
        if instrument:
            out[c]["ledger_s"] = timers[c].seconds / steps[c]
            out[c]["ledger_calls"] = timers[c].calls / steps[c]
            out[c]["zeroing_s"] = timers[c].zeroing / steps[c]
            out[c]["launch_check_s"] = launches.seconds.get(id(runs[c].sched.pool.ledger), 0.0) / steps[c]
    return out


def measure(
    device=None,
    *,
    ns=NS,
    workloads=WORKLOADS,
    repeats: int = DEFAULT["repeats"],
    loop_s: float = DEFAULT["loop_s"],
    warmup: int = DEFAULT["warmup"],
    min_steps: int = DEFAULT["min_steps"],
    chunk: int = 8,
    log: Callable[[str], None] = lambda s: None,
) -> dict:
    """Every number the table shows, the repeats behind them and the metadata (what --json writes)."""
    device = device_of(device)
    sync = sync_for(device)
    clock = host_clock(device)  # on a CPU, this thread's CPU seconds: other processes' time slices do not count
    med = statistics.median
    rows = []
    for kind in workloads:
        for n in ns:
            log(f"{kind} N={n}: building and warming up")
            runs = {c: Workload(kind, n, c, device) for c in CHECKS}
            for w in runs.values():
                w.steps(warmup)
            if kind == "decode" and any(len(w.sched.running) != n for w in runs.values()):
                raise RuntimeError(f"expected {n} running requests after warm-up")
            plain = [_interleaved(runs, loop_s, min_steps, chunk, sync, False, clock) for _ in range(repeats)]
            inst = [_interleaved(runs, loop_s, min_steps, chunk, sync, True, clock) for _ in range(repeats)]
            on = med(r["strict"]["step_s"] for r in plain)
            off = med(r["off"]["step_s"] for r in plain)
            share = med(100.0 * (r["strict"]["step_s"] - r["off"]["step_s"]) / r["strict"]["step_s"] for r in plain)
            ledger_on = med(r["strict"]["ledger_s"] for r in inst)
            ledger_off = med(r["off"]["ledger_s"] for r in inst)
            ledger_share = med(100.0 * r["strict"]["ledger_s"] / r["strict"]["step_s"] for r in inst)
            zeroing_share = med(100.0 * r["strict"]["zeroing_s"] / r["strict"]["step_s"] for r in inst)
            launch_share = med(100.0 * r["strict"]["launch_check_s"] / r["strict"]["step_s"] for r in inst)
            in_ledger = med(
                100.0 * (r["strict"]["ledger_s"] - r["off"]["ledger_s"]) / r["strict"]["step_s"] for r in inst
            )
            w = runs["strict"]
            rows.append(
                {
                    "workload": kind,
                    "n": n,
                    "on_us": on * 1e6,
                    "off_us": off * 1e6,
                    "checking_share": share,
                    "ledger_on_us": ledger_on * 1e6,
                    "ledger_off_us": ledger_off * 1e6,
                    "ledger_share": ledger_share,
                    "zeroing_share": zeroing_share,
                    "launch_check_us": med(r["strict"]["launch_check_s"] for r in inst) * 1e6,
                    "launch_check_share": launch_share,
                    "checking_share_in_ledger": in_ledger,
                    "ledger_calls_per_step": med(r["strict"]["ledger_calls"] for r in inst),
                    "steps_timed": sum(r["strict"]["steps"] for r in plain),
                    "running_at_end": len(w.sched.running),
                    "requests_submitted": w.sched.submitted,
                    "repeats_us": {c: [r[c]["step_s"] * 1e6 for r in plain] for c in CHECKS},
                    "ledger_repeats_us": {c: [r[c]["ledger_s"] * 1e6 for r in inst] for c in CHECKS},
                }
            )
            log(f"{kind} N={n}: checks on {on * 1e6:.0f} µs/step, off {off * 1e6:.0f} µs/step")
    return {
        "meta": {
            **machine(device),
            "load_average": bench_common.loadavg(),
            "clock": clock.__name__,  # thread_time: this thread's CPU seconds (on a CPU)
            "repeats": repeats,
            "loop_s": loop_s,
            "warmup": warmup,
            "chunk": chunk,
            "model": "StubModel (constant tokens, no compute); the real Scheduler and StatePool",
        },
        "rows": rows,
        "targets": targets(rows),
    }


def targets(rows: list) -> list:
    out = []
    for row in rows:
        if row["n"] != TARGET_N:
            continue
        out.append(
            {
                "what": f"checking share at N={TARGET_N} ({row['workload']}, measured in the ledger)",
                "limit": f"<= {TARGET_SHARE:g}%",
                "value": f"{row['checking_share_in_ledger']:.1f}% "
                f"(whole-step difference: {row['checking_share']:.1f}%)",
                "met": row["checking_share_in_ledger"] <= TARGET_SHARE,
            }
        )
        out.append(
            {
                "what": f"ledger share at N={TARGET_N} ({row['workload']}, checks on)",
                "limit": f"<= {TARGET_LEDGER:g}%",
                "value": f"{row['ledger_share']:.1f}% ({row['ledger_calls_per_step']:.1f} ledger calls a step)",
                "met": row["ledger_share"] <= TARGET_LEDGER,
            }
        )
        out.append(
            {
                "what": f"launch check share at N={TARGET_N} ({row['workload']}, check_step / step)",
                "limit": f"<= {TARGET_LAUNCH:g}%",
                "value": f"{row['launch_check_share']:.1f}% ({row['launch_check_us']:.0f} µs a step)",
                "met": row["launch_check_share"] <= TARGET_LAUNCH,
            }
        )
        out.append(
            {
                "what": f"host overhead per step at N={TARGET_N} ({row['workload']}, checks on)",
                "limit": f"<= {TARGET_US / 1000:g} ms",
                "value": f"{row['on_us'] / 1000:.2f} ms",
                "met": row["on_us"] <= TARGET_US,
            }
        )
    return out


def format_table(result: dict) -> str:
    head = (
        "workload",
        "N",
        "checks on µs/step",
        "checks off µs/step",
        "checking share",
        "ledger share",
        "zeroing share",
        "launch check share",
        "checking in ledger",
        "ledger calls/step",
    )
    body = [
        (
            r["workload"],
            str(r["n"]),
            f"{r['on_us']:.0f}",
            f"{r['off_us']:.0f}",
            f"{r['checking_share']:.1f}%",
            f"{r['ledger_share']:.1f}%",
            f"{r['zeroing_share']:.1f}%",
            f"{r['launch_check_share']:.1f}%",
            f"{r['checking_share_in_ledger']:.1f}%",
            f"{r['ledger_calls_per_step']:.1f}",
        )
        for r in result["rows"]
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(head), line(tuple("-" * w for w in widths)), *(line(b) for b in body)])


def format_report(result: dict) -> str:
    m = result["meta"]
    lines = [
        f"slotwarden bench scheduler  device={m['device']} ({m['device_name']}, {m['cpu_count']} CPUs)  "
        f"torch {m['torch']}  python {m['python']}",
        "host overhead of Scheduler.step() with the layer stubbed out (constant tokens, no compute); "
        f"median of {m['repeats']} repeats, checks on/off interleaved every {m['chunk']} steps"
        + ("; CPU seconds of the stepping thread (time.thread_time)" if m.get("clock") == "thread_time" else "")
        + (
            f"; 1-min load average at the end {m['load_average']:.1f} on {m['cpu_count']} CPUs"
            if m.get("load_average")
            else ""
        ),
        "checking share = (on - off) / on;  ledger share = time inside the ledger, the zeroing left out / step "
        "(checks on);  zeroing share = the pool's zeroing of allocated slots (run inside alloc) / step;  "
        "launch check share = the launch check (check_step of the step's row -> slot index) / step (checks on);  "
        "checking in ledger = (ledger on - ledger off) / step (checks on)",
        "",
        format_table(result),
        "",
        "targets (information, not a verdict):",
    ]
    for t in result["targets"]:
        lines.append(f"  {t['what']}: {t['value']} (target {t['limit']}): {'met' if t['met'] else 'not met'}")
    return "\n".join(lines)


def measure_all(
    device=None,
    *,
    prefix: dict | None = None,
    speculative: dict | None = None,
    log: Callable[[str], None] = lambda s: None,
    **settings,
):
    """`measure`, then the shared-prefix workload with the prefix cache on and off
    (`bench_prefix`; its settings `prefix`, None for its defaults) under "prefix", then the
    speculative workload (`bench_speculative`; settings `speculative`) under "speculative"."""
    result = measure(device, log=log, **settings)
    log("shared-prefix workload: the prefix cache off, then on")
    result["prefix"] = bench_prefix.measure(device, **(prefix or bench_prefix.DEFAULT))
    log("speculative workload: plain decoding, then each drafter")
    result["speculative"] = bench_speculative.measure(device, **(speculative or bench_speculative.DEFAULT))
    return result


def report_all(result: dict) -> str:
    text = format_report(result) + "\n\n" + bench_prefix.format_table(result["prefix"])
    return text + "\n\n" + bench_speculative.format_table(result["speculative"])


def run(args, **params) -> int:
    """The CLI entry point: `slotwarden bench scheduler [--device D] [--json FILE] [--quick]`.
    `params` override `measure_all`'s arguments (the tests use tiny sizes)."""
    quick = dict(QUICK, prefix=bench_prefix.QUICK, speculative=bench_speculative.QUICK)
    return bench_common.run(args, params, DEFAULT, quick, measure_all, report_all)
