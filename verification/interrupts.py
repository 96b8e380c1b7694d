"""The interrupt sweep: an exception raised at one line event inside slotwarden's own frames
(files under model/, runtime/, kernels/) while a small workload runs, then `run()` called again.

The workload (`drive`): plain requests, a session of two turns, an abort of a waiting and of a
running request, the session closed. `sweep(config, points)` runs it once fault-free, counting
the line events, then once per chosen event with a tracer that raises there. Each outcome must
be "exact" (every request ended once, with the fault-free tokens, or a prefix of them when the
forward pass failed or the request was aborted; idle, a clean audit, nothing left) or "broken"
(every later call raises `SchedulerBroken` naming the fault; results handed back were right).
Anything else is a `Failure`: different tokens, stuck (never idle), a lost result or request.
"""

from __future__ import annotations

import os
import random
import sys
from typing import NamedTuple

import torch

import slotwarden.kernels
import slotwarden.model
import slotwarden.runtime
from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.contract import interrupter
from slotwarden.runtime.scheduler.errors import SchedulerBroken

ROOTS = tuple(os.path.dirname(m.__file__) + os.sep for m in (slotwarden.model, slotwarden.runtime, slotwarden.kernels))
MODEL = TinyMamba(TinyMambaConfig(layers=1, dtype=torch.float64))
PLAIN = [([1, 2, 3, 4], 3), ([1, 2, 3, 5], 2), ([9], 3)]  # the first two share a prefix (the cache)
TURNS = [([6, 7], 2), ([8], 2)]
SETTINGS = dict(slots=3, max_running=2, token_budget=4, chunk_size=2, retract_after=1)
BOOKKEEPING = tuple(os.path.join(ROOTS[1], d) + os.sep for d in ("scheduler", "radix"))  # the scheduler's own
RETRIES = 6  # run() calls after a fault before the scheduler counts as stuck


class Config(NamedTuple):
    overlap: bool
    prefix_cache: bool


CONFIGS = tuple(Config(o, c) for o in (False, True) for c in (False, True))


class Failure(NamedTuple):
    config: Config
    event: int
    exc: str
    where: str  # file:line of the event
    what: str


class Raiser:
    """A `sys.settrace` tracer over slotwarden's frames: counts line events; raises `exc` at the
    `at`-th (None: never) and records where."""

    def __init__(self, at=None, exc=KeyboardInterrupt, within=ROOTS):
        self.at, self.exc, self.count, self.where, self.within = at, exc, 0, None, within

    def __call__(self, frame, event, arg):
        return self.local if frame.f_code.co_filename.startswith(self.within) else None

    @interrupter
    def local(self, frame, event, arg):
        if event == "line" and self.where is None:
            self.count += 1
            if self.count == self.at:
                self.where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
                raise self.exc(f"injected at line event {self.at} ({self.where})")
        return self.local


def _traced(raiser, call):
    previous = sys.gettrace()  # coverage.py's tracer under `verify --coverage`: put back after
    sys.settrace(raiser)
    try:
        return call()
    finally:
        sys.settrace(previous)


def _retried(attempt, call) -> None:
    """A call the user makes again if it raised (a fault before it did anything, say)."""
    for _ in range(RETRIES):
        if attempt(call):
            return


def drive(config: Config, raiser: Raiser, abort: bool = True) -> dict:
    """The workload, traced by `raiser` inside every run()/step(); every exception but
    `SchedulerBroken` is caught and run() called again. Returns what happened."""
    sched = build(MODEL, prefix_cache=config.prefix_cache, overlap=config.overlap, **SETTINGS)
    results: list = []  # every Result handed back, in order (a duplicate is a fault)
    seen: list = []

    def attempt(call):
        try:
            out = _traced(raiser, call)
        except SchedulerBroken:
            raise
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included, on purpose
            seen.append(exc)
            return None
        if isinstance(out, dict):  # run()'s
            results.extend(out.values())
        elif out is not None and hasattr(out, "finished"):  # step()'s
            results.extend(out.finished)
        return True

    sid = sched.open_session()
    rids = [sched.submit(p, n) for p, n in PLAIN] + [sched.submit(p, n, session=sid) for p, n in TURNS]
    dropped = sched.submit([4, 4], 2)
    sched.abort(dropped)  # aborted while waiting
    rids.append(dropped)
    stuck = False
    try:
        for _ in range(2):
            attempt(sched.step)
        if abort:
            _retried(attempt, lambda: sched.abort(rids[2]))  # aborted while running (or, after a fault, wherever it is)
        for phase in ("run", "close"):
            if phase == "close":
                _retried(attempt, lambda: sched.close_session(sid))
            for _ in range(RETRIES):
                if attempt(lambda: sched.run(200)):
                    break
            else:
                stuck = True
    except SchedulerBroken:
        pass
    results.extend(sched.collect())  # a broken scheduler still hands back what ended
    return dict(sched=sched, rids=rids, results=results, seen=seen, stuck=stuck, sid=sid)


def problem(run: dict, reference: dict, raiser: Raiser) -> str:
    """What breaks the contract in one faulted `run` (empty: nothing), against the fault-free
    outputs `reference` ({rid: tokens})."""
    sched, rids, results, seen = run["sched"], run["rids"], run["results"], run["seen"]
    got: dict = {}
    for r in results:
        if r.rid in got:
            return f"request {r.rid} ended twice: {got[r.rid]} then {r}"
        got[r.rid] = r
    aborted = {rids[2], rids[-1]}
    for rid, r in got.items():
        prefix = r.output == reference[rid][: len(r.output)]
        if r.reason == "length" and rid not in aborted and r.output != reference[rid] or not prefix:
            return f"request {rid}: {r.output} ({r.reason}) where the fault-free run gives {reference[rid]}"
        if r.reason not in ("length", "abort", "session closed") and "failed" not in r.reason:
            return f"request {rid} ended {r.reason!r}"
    if sched.broken is not None:
        named = any(repr(e) in str(sched.broken) for e in seen) or "injected" in str(sched.broken)
        if not named:
            return f"broken without naming the fault: {sched.broken}"
        for call in (sched.step, sched.run, sched.open_session, lambda: sched.submit([1], 1), sched.flush_cache):
            try:
                call()
            except SchedulerBroken:
                continue
            return f"a broken scheduler answered {call}"
        return ""
    if raiser.where is not None and not seen:
        return "the fault was swallowed"
    if run["stuck"]:
        return f"stuck: {seen[-1]!r}"
    if len(seen) > 1:
        return f"{len(seen)} exceptions for one fault: {seen!r}"
    if set(got) != set(rids):
        return f"lost: requests {sorted(set(rids) - set(got))} never handed back"
    if not sched.idle or sched.requests or sched.sessions:
        return "not idle, or requests or sessions left"
    try:
        audit = sched.check_audit()
    except Exception as exc:  # noqa: BLE001 - reported
        return f"the idle audit failed: {exc}"
    return "" if audit.clean else f"the idle audit is not clean: {audit}"


def reference(config: Config, within=ROOTS) -> tuple[dict, int]:
    """The fault-free outputs ({rid: tokens}) and the number of line events of the run."""
    raiser = Raiser(within=within)
    run = drive(config, raiser)
    whole = drive(config, Raiser(), abort=False)  # what the aborted request would have said: it says a prefix
    outputs = {r.rid: r.output for r in run["results"]}
    outputs[run["rids"][2]] = next(r.output for r in whole["results"] if r.rid == run["rids"][2])
    assert not run["seen"] and not problem(run, outputs, raiser), run
    return outputs, raiser.count


def sweep(config: Config, events, exc=KeyboardInterrupt, within=ROOTS) -> list[Failure]:
    """Fault each line event in `events` (numbers from 1, counted in files under `within`) in
    turn; the contract's failures."""
    outputs, _ = reference(config)
    failures = []
    for at in events:
        raiser = Raiser(at, exc, within)
        what = problem(drive(config, raiser), outputs, raiser)
        if what:
            failures.append(Failure(config, at, exc.__name__, raiser.where, what))
    return failures


def sample(config: Config, k: int | None, seed: int, within=ROOTS) -> list[int]:
    """`k` line events of `config`'s run drawn with `seed` (None: every one)."""
    _, count = reference(config, within)
    return (
        list(range(1, count + 1))
        if k is None or k >= count
        else sorted(random.Random(seed).sample(range(1, count + 1), k))
    )


def campaign(per_config: int | None, seed: int, within=BOOKKEEPING) -> tuple[int, list[Failure]]:
    """`per_config` line events (None: every one) of each configuration, each faulted with a
    KeyboardInterrupt and with a RuntimeError: (faults tried, failures)."""
    tried, failures = 0, []
    for config in CONFIGS:
        events = sample(config, per_config, seed, within)
        for exc in (KeyboardInterrupt, RuntimeError):
            tried += len(events)
            failures += sweep(config, events, exc, within)
    return tried, failures
