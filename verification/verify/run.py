"""`slotwarden verify`: the main job. Every check, with progress, a summary, a report.

Stages (each a list of jobs, so `--shard I/N` can split the whole campaign):
1. the declaration: the `transitions` machine, `step()` and the table agree on every move, and
   so does the runtime's own path (compiled tables, `look_up`/`write` on real ledger columns);
   and every single-rule mutant of it is killed by some check, or listed as equivalent;
2. CrossHair proofs of the model's properties (the thirteen one-move proofs in one exploration
   of their conjunction, `prove_every_move`; each alone only when that fails);
3. the bounded exhaustive model checker over the abstract scheduler, then its coverage: every
   declared rule fired (but those listed unreachable, with a reason) and every `sometimes` goal
   reached;
4. the differential stage: the checker's model follows the runtime's scheduler over seeded
   random workloads, move by move, and both agree on every slot's state, owner and borrower;
5. the Hypothesis campaign: pool, an engine allocator behind the guard, the scheduler with
   overlap off and on; every machine must pass;
6. continuity: every finished request's tokens and slot state, bit for bit, against a replay
   of its transcript (the continuity machine), with the prefix cache off and on (follow-ups
   sharing donated prefixes, copy-on-write, evictions);
7. runtime faults: each fault of `runtime_faults.FAULTS` seeded into the runtime in process,
   and hunted by the agreement, pool, guard, continuity and scheduler checks until one catches it;
8. the mutant matrix: each bug of the history injected, and caught by the checker and by the
   Hypothesis scheduler machine (which also says whether the runtime raised at the call), each
   for the reason the mutant names (a catch by another property or error type fails); a bug in
   the state's numbers, which makes only legal moves, by the continuity machine alone;
9. bad input: junk at every entry point of the pool, its ledger and the guard, and at the
   scheduler's submit/abort/close_session, each call a typed error that changed nothing, or a
   success (`verification/machines/bad_input.py`).
Exit 0 only if every proof is CONFIRMED, every check holds, every runtime fault and every
mutant is caught.

Two worker processes take the declaration mutants, the proofs, the exhaustive bounds and the
mutants, longest first (`_cost`), while this process runs the other stages; the coverage job
runs last, on every bounds' result. Each row gives its wall and its CPU seconds.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, NamedTuple

from slotwarden.cli.args import UsageError, output_folder
from slotwarden.model import proofs as model_proofs
from slotwarden.model import registry
from slotwarden.verification.agreement import judge, judge_runtime
from slotwarden.verification.machines.bad_input import BadInputMachine, SchedulerBadInputMachine
from slotwarden.verification.machines.campaign import Budget, CampaignResult, run_machine
from slotwarden.verification.checker.search import (
    _show_rule,
    DEFAULT_BOUNDS,
    TEST_BOUNDS,
    THOROUGH_BOUNDS,
    UNREACHABLE,
    check,
    coverage,
)
from slotwarden.verification.crosshair_proofs import DEFAULT_TIMEOUT, prove, prove_moves
from slotwarden.verification.mutants import declaration as declaration_mutants
from slotwarden.verification.checker import pins
from slotwarden.verification.differential import check_differential, runtime_has_cache
from slotwarden.verification.mutants.history import MUTANTS
from slotwarden.verification.machines.continuity import (
    CachedContinuityMachine,
    ContinuityMachine,
    continuity_machine_for,
)
from slotwarden.verification.mutants.seeded import FAULTS, hunt
from slotwarden.verification.machines.guard import GuardMachine
from slotwarden.verification.machines.pool import PoolMachine
from slotwarden.verification.machines.scheduler import machine_for
from slotwarden.runtime.scheduler.scheduler import Scheduler

LEVELS = {  # examples per machine, steps per example, mutant examples, checker bounds
    "quick": dict(
        differential=40,
        pool=Budget(40, 25),
        scheduler=Budget(25, 20),
        mutant=Budget(300, 25),
        bounds=TEST_BOUNDS,
        proofs=False,
        shrink=False,
    ),
    "default": dict(
        differential=300,
        pool=Budget(200, 30),
        scheduler=Budget(100, 25),
        mutant=Budget(500, 40),  # 30 steps rarely reached an aborted running lent turn (SGLang 40251)
        bounds=DEFAULT_BOUNDS,
        proofs=True,
        shrink=False,  # the checker's trace is the shortest; --thorough also shrinks Hypothesis's
    ),
    "thorough": dict(
        differential=2000,
        pool=Budget(2000, 40),
        scheduler=Budget(1000, 40),
        mutant=Budget(2000, 40),
        bounds=THOROUGH_BOUNDS,
        proofs=True,
        shrink=True,
    ),
}

RUNTIME_LEVELS = {  # the continuity machine; the machines that hunt a seeded runtime fault (they
    # stop at the first catch, so their budget is spent only by a fault that escapes)
    "quick": dict(continuity=Budget(25, 20), cached=Budget(15, 20), hunt=Budget(100, 20)),
    "default": dict(continuity=Budget(100, 25), cached=Budget(40, 25), hunt=Budget(200, 25)),
    "thorough": dict(continuity=Budget(1000, 40), cached=Budget(400, 40), hunt=Budget(1000, 40)),
}


class Row(NamedTuple):
    stage: str
    name: str
    ok: bool
    seconds: float
    summary: str  # one line for the table
    detail: dict  # everything for report.json
    cpu: float = 0.0  # CPU seconds of the process that ran it (`_timed`), however loaded the machine


def _agreement(_) -> Row:
    start = time.perf_counter()
    verdicts = judge()
    bad = [v for v in verdicts if not v.agrees]
    legal = sum(v.step is not None for v in verdicts)
    text = (
        f"{len(verdicts) - len(bad)}/{len(verdicts)} (state, event, actor, relation) combinations agree ({legal} legal)"
    )
    detail = {"combinations": len(verdicts), "legal": legal, "disagreements": [str(v) for v in bad[:20]]}
    return Row("declaration", "machine = step() = table", not bad, time.perf_counter() - start, text, detail)


def _declaration_mutants(crosshair_timeout: float | None) -> Row:
    r = declaration_mutants.run_stage(crosshair_timeout=crosshair_timeout)
    return Row(
        "mutations",
        "declaration mutants",
        r.ok,
        r.seconds,
        declaration_mutants.summary(r),
        declaration_mutants.detail(r),
    )


def _runtime_agreement(_) -> Row:
    start = time.perf_counter()
    verdicts = judge_runtime()
    bad = [v for v in verdicts if not v.agrees]
    text = f"{len(verdicts) - len(bad)}/{len(verdicts)} moves on real ledger columns agree with step() (check strict and off; per-slot, compiled and numpy paths)"
    detail = {"moves": len(verdicts), "disagreements": [f"{v.case} [{v.check}]: {v.problem}" for v in bad[:20]]}
    return Row("declaration", "runtime look_up/write = step()", not bad, time.perf_counter() - start, text, detail)


def _continuity(budget: Budget, seed, machine: type = ContinuityMachine, name: str = "continuity") -> Row:
    r = run_machine(name, machine, budget, seed)
    text = f"{r.examples} examples, tokens and state bit for bit" + ("" if r.passed else f"; FAILED: {r.error}")
    what = "state = transcript's reference" + (", prefix cache on" if machine is CachedContinuityMachine else "")
    return Row("continuity", what, r.passed, r.seconds, text, r._asdict())


def fault_stages(runtime_level: dict, level: dict, seed) -> dict:
    """The stages that hunt a seeded runtime fault: name -> check ("" when it passes)."""

    def machine(name, m, budget):
        def run() -> str:
            r = run_machine(name, m, budget, seed, shrink=False)
            return "" if r.passed else f"{r.error} (example {r.examples})"

        return run

    def agreement() -> str:
        bad = [v for v in judge_runtime() if not v.agrees]
        return (
            ""
            if not bad
            else f"{len(bad)} moves disagree, e.g. {bad[0].case.slot.state.name} {bad[0].case.event.name} by {bad[0].case.actor}: {bad[0].problem}"
        )

    hunt_budget = runtime_level["hunt"]
    pool_steps = max(level["pool"].steps, 40)  # a dirty slot shows only after write, release, fence, alloc, check
    return {
        "agreement": agreement,
        "pool": machine("pool", PoolMachine, Budget(hunt_budget.examples, pool_steps)),
        "guard": machine("guard", GuardMachine, Budget(hunt_budget.examples, level["pool"].steps)),
        "continuity": machine("continuity", ContinuityMachine, hunt_budget),
        "scheduler": machine("scheduler", machine_for(Scheduler), hunt_budget),
    }


def _fault(fault, stages: dict) -> Row:
    c = hunt(fault, stages)
    text = f"caught by {c.stage}: {c.error}" if c.caught else f"ESCAPED {', '.join(c.tried)}"
    return Row("faults", fault.name, c.caught, c.seconds, text[:200], {"what": fault.what, **c._asdict()})


def _proofs(name: str, timeout: float) -> list[Row]:
    """The rows of one proof job: a proof of `model_proofs.PROOFS`, or `EVERY_MOVE`, the
    one-move proofs in one exploration (a row each)."""
    results = prove_moves(timeout=timeout) if name == EVERY_MOVE else [prove(name, timeout=timeout)]
    return [
        Row(
            "proofs",
            r.name,
            r.confirmed,
            r.seconds,
            f"{r.verdict}  {r.property}",
            {"verdict": r.verdict, "message": r.message, "property": r.property},
        )
        for r in results
    ]


EVERY_MOVE = "every one-move proof"
"""The proof job of the one-move proofs at once (`crosshair_proofs.prove_moves`)."""


def _checker_job(bounds) -> tuple:
    """One exhaustive bounds in a worker process: its row and its result (for the coverage job)."""
    r = check(bounds)
    return _checker_row(r), r


def _checker_row(r) -> Row:
    """A bounds' row: it fails on a violation, an incomplete search, or counts other than its
    pin (`verification/checker/pins.py`); a bounds with no pin says so, and fails if it is one of the
    default run's."""
    bounds, v = r.bounds, r.violation
    pin = pins.pin_of(bounds)
    got = (r.states, r.transitions)
    text = f"{r.states} states, {r.transitions} transitions, depth {r.max_depth}" + (
        f"; VIOLATION {v.property}" if v else ""
    )
    pinned = True
    if pin is None:
        pinned = bounds not in DEFAULT_BOUNDS
        text += "; unpinned" + ("" if pinned else " (every bounds of the default run has a pin)")
    elif v is None and r.complete and got != pin:
        pinned = False
        text += f"; PIN MISMATCH: pinned {pin[0]} states, {pin[1]} transitions"
    detail = {
        "bounds": bounds._asdict(),
        "states": r.states,
        "transitions": r.transitions,
        "depth": r.max_depth,
        "pinned": None if pin is None else list(pin),
        "violation": None
        if v is None
        else {"property": v.property, "message": v.message, "trace": list(map(str, v.trace))},
    }
    return Row("exhaustive", str(bounds), v is None and r.complete and pinned, r.seconds, text, detail)


_CHECKED: dict = {}  # bounds -> CheckResult of this process's exhaustive jobs, for the coverage job


def _coverage(bounds_list) -> Row:
    """Every declared rule fired and every `sometimes` goal reached over the run's bounds
    (bounds this process did not check, e.g. in another shard, are checked here)."""
    start = time.perf_counter()
    results = [_CHECKED.get(b) or check(b) for b in bounds_list]
    cover = coverage(results)
    detail = {
        "missed_rules": list(cover.missed_rules),
        "stale_unreachable": list(cover.stale_unreachable),
        "missed_goals": list(cover.missed_goals),
        "unreachable": {_show_rule(k): why for k, why in UNREACHABLE.items()},
    }
    return Row(
        "exhaustive",
        "rule coverage and goals",
        cover.ok,
        time.perf_counter() - start,
        str(cover),
        detail | {"states": 0},
    )


def _differential(workloads: int, seed) -> Row:
    start = time.perf_counter()
    r = check_differential(workloads, 40, seed=0 if seed is None else seed)
    runs = [r]
    if runtime_has_cache():  # and with the prefix cache on (follow-ups share donated prefixes)
        runs.append(check_differential(max(workloads // 2, 1), 40, seed=0 if seed is None else seed, cache=True))
    texts = []
    for run in runs:
        text = f"{run.workloads} workloads, {run.operations} operations, {run.moves} slot moves followed"
        text += (
            f"; DIVERGED: {run.divergence}"
            if run.divergence
            else f"; never made: {', '.join(run.unexercised)}"
            if run.unexercised
            else ""
        )
        texts.append(("with the prefix cache: " if run.cache else "") + text)
    return Row(
        "differential",
        "model = runtime scheduler",
        all(run.ok for run in runs),
        time.perf_counter() - start,
        "; ".join(texts),
        r._asdict()
        | {"unexercised": list(r.unexercised)}
        | {"cache": [run._asdict() | {"unexercised": list(run.unexercised)} for run in runs[1:]]},
    )


def _machine(name: str, machine: type, budget: Budget, seed) -> Row:
    r = run_machine(name, machine, budget, seed)
    text = f"{r.examples} examples" + ("" if r.passed else f"; FAILED: {r.error}")
    return Row("hypothesis", name, r.passed, r.seconds, text, r._asdict())


def _mutant(mutant, budget: Budget, seed, shrink: bool = True) -> Row:
    start = time.perf_counter()
    c = check(mutant.bounds, mutant.policy()) if mutant.policy is not None else None
    hunter = continuity_machine_for if mutant.machine == "continuity" else machine_for
    if mutant.cls is None:  # only the checker's half is in the catalogue: the runtime's is n/a
        h = CampaignResult(mutant.name, True, 0.0, 0, "", "", "")
    else:
        h = run_machine(mutant.name, hunter(mutant.cls, **mutant.needs), budget, seed, shrink)
    prop = c.violation.property if c is not None and c.violation else None
    caught_checker, caught_hypothesis = mutant.caught_for_the_right_reason(prop, h.error)
    where = {"call": "raised at the call", "audit": "idle audit", "invariant": "invariant"}.get(h.caught_by, "-")
    if h.caught_by == "invariant":
        where = f"{mutant.machine} invariant"
    c_text = (
        "n/a: no slot move is wrong, the state's numbers are"
        if c is None
        else "MISSED"
        if prop is None
        else prop
        if caught_checker
        else f"WRONG REASON {prop} (want {'/'.join(mutant.checker_catch)})"
    )
    kind = h.error.split(":")[0]
    h_text = (
        "n/a: no runtime variant in the catalogue"
        if mutant.cls is None
        else "MISSED"
        if h.passed
        else kind
        if caught_hypothesis
        else f"WRONG REASON {kind} (want {'/'.join(mutant.runtime_catch)})"
    )
    text = (
        f"checker: {c_text} (trace {len(c.violation.trace) if c is not None and c.violation else '-'})"
        f"; hypothesis: {h_text} after {h.examples} examples, {where}"
    )
    detail = {
        "bug": mutant.bug,
        "rule": mutant.rule,
        "expected": {"checker": list(mutant.checker_catch), "runtime": list(mutant.runtime_catch)},
        "machine": mutant.machine,
        "right_reason": {"checker": caught_checker, "hypothesis": caught_hypothesis},
        "checker": {
            "property": prop,
            "applies": c is not None,
            "states": c.states if c is not None else 0,
            "trace": list(map(str, c.violation.trace)) if c is not None and c.violation else [],
            "seconds": c.seconds if c is not None else 0.0,
        },
        "hypothesis": h._asdict(),
    }
    return Row("mutants", mutant.name, caught_checker and caught_hypothesis, time.perf_counter() - start, text, detail)


def jobs(level: dict, proof_timeout: float, seed, only) -> list[tuple[str, str, Callable]]:
    """Every job of the campaign as (stage, name, thunk), in a fixed order (for sharding). A
    job whose thunk is a tuple runs in the worker processes: `_pooled(stage, thunk)`."""
    out = [("declaration", "agreement", lambda: _agreement(None))]
    survivors_timeout = proof_timeout if level is LEVELS["thorough"] else None  # CrossHair on unlisted survivors
    out += [("mutations", "declaration mutants", (survivors_timeout,))]
    out += [("declaration", "runtime agreement", lambda: _runtime_agreement(None))]
    if level["proofs"]:
        names = only or [EVERY_MOVE] + [n for n in model_proofs.PROOFS if n not in model_proofs.MOVE_PROOFS]
        out += [("proofs", n, (n, proof_timeout)) for n in names]
    out += [("exhaustive", str(b), (b,)) for b in level["bounds"]]
    out.append(("exhaustive", "coverage", lambda: _coverage(level["bounds"])))
    out.append(("differential", "model = runtime", lambda: _differential(level["differential"], seed)))
    machines = [
        ("pool", PoolMachine, level["pool"]),
        ("guard", GuardMachine, level["pool"]),
        ("scheduler", machine_for(Scheduler, overlap=False), level["scheduler"]),
        ("scheduler+overlap", machine_for(Scheduler, overlap=True), level["scheduler"]),
    ]
    out += [("hypothesis", n, lambda n=n, m=m, b=b: _machine(n, m, b, seed)) for n, m, b in machines]
    runtime = RUNTIME_LEVELS[next((k for k, v in LEVELS.items() if v == level), "default")]
    out.append(("continuity", "continuity", lambda: _continuity(runtime["continuity"], seed)))
    out.append(
        (
            "continuity",
            "continuity+cache",
            lambda: _continuity(runtime["cached"], seed, CachedContinuityMachine, "continuity+cache"),
        )
    )
    stages = fault_stages(runtime, level, seed)
    out += [("faults", f.name, lambda f=f: _fault(f, stages)) for f in FAULTS]
    out += [("mutants", m.name, (m.name, level["mutant"], seed, level["shrink"])) for m in MUTANTS]
    junk = [("pool, ledger, guard", BadInputMachine), ("scheduler", SchedulerBadInputMachine)]
    out += [
        ("bad input", n, lambda n=n, m=m: _machine(n, m, level["scheduler"], seed)._replace(stage="bad input"))
        for n, m in junk
    ]
    return out


def _pooled(stage: str, args: tuple) -> tuple[list[Row], object]:
    """Run one job in a worker process: its rows, and for an exhaustive bounds its result."""
    if stage == "exhaustive":
        searched = []

        def search() -> list[Row]:
            row, result = _checker_job(*args)
            searched.append(result)
            return [row]

        return _timed(search), searched[0]
    if stage == "proofs":
        return _timed(lambda: _proofs(*args)), None
    if stage == "mutations":
        return _timed(lambda: [_declaration_mutants(*args)]), None
    return _timed(lambda: [_mutant_named(*args)]), None


def _timed(run: Callable[[], list]) -> list[Row]:
    """The rows `run` returns, their CPU seconds (this process's) shared among them."""
    start = time.process_time()
    rows = run()
    cpu = (time.process_time() - start) / max(len(rows), 1)
    return [r._replace(cpu=cpu) for r in rows]


_FORK = multiprocessing.get_context("fork")
"""Workers start as copies of this process (nothing to import again)."""

_PROOF_COST = {EVERY_MOVE: 20.0, "conserved": 16.0}
"""Rough CPU seconds of the longest proof jobs, only to order the jobs longest first (a wrong
guess costs at most an idle tail); any other proof counts as a few seconds."""


def _cost(job: tuple) -> float:
    """A job's rough CPU seconds, to start the longest first so that no long job runs alone at
    the end. An exhaustive bounds costs about one second per 20,000 transitions of its pin (an
    unpinned one, its size unknown, counts as the longest); a proof counts as its usual cost,
    and the declaration mutants and a mutant as a few seconds each."""
    stage, name, args = job
    if stage == "exhaustive":
        pin = pins.pin_of(args[0])
        return float("inf") if pin is None else pin[1] / 20_000
    if stage == "proofs":
        return _PROOF_COST.get(name, 4.0)
    return 4.0


def _mutant_named(name: str, budget: Budget, seed, shrink: bool) -> Row:
    return _mutant({m.name: m for m in MUTANTS}[name], budget, seed, shrink)


def run_verify(args) -> int:
    """Run the campaign of `args`. User errors (a malformed or empty shard, an unknown proof,
    a report folder that cannot be written) raise `UsageError` before any job runs. PASS needs
    every check to hold and at least one check to have run."""
    level_name = "quick" if args.quick else "thorough" if args.thorough else "default"
    level = LEVELS[level_name]
    timeout = args.proof_timeout or DEFAULT_TIMEOUT
    shard, shards = _parse_shard(args.shard)
    unknown = sorted(set(args.only or ()) - set(model_proofs.PROOFS))
    if unknown:
        raise UsageError(f"--only {unknown[0]}: no such proof; the proofs are {', '.join(model_proofs.PROOFS)}")
    if args.report:
        output_folder(args.report, "--report")
    every = jobs(level, timeout, args.seed, args.only)
    todo = [j for i, j in enumerate(every) if i % shards == shard]
    if not todo:
        raise UsageError(
            f"--shard {args.shard}: shard {shard + 1} of {shards} has no job (the {level_name} run has {len(every)}): use N <= {len(every)}"
        )
    print(
        f"slotwarden verify: {level_name} run, shard {shard + 1}/{shards}, {len(todo)} jobs, seed {args.seed}",
        flush=True,
    )
    if level_name == "quick":
        print("quick run skips: " + "; ".join(skipped_by_quick()), flush=True)
    start = time.perf_counter()
    rows: list[Row] = []
    expected = len(todo) + sum(len(model_proofs.MOVE_PROOFS) - 1 for j in todo if j[1] == EVERY_MOVE)  # rows

    def show(row: Row) -> None:
        rows.append(row)
        mark = "ok  " if row.ok else "FAIL"
        print(
            f"  [{len(rows):>2}/{expected}] {mark} {row.stage:<11} {row.name:<34} {row.seconds:7.1f} s  {row.summary}",
            flush=True,
        )

    pooled = sorted((j for j in todo if not callable(j[2])), key=_cost, reverse=True)
    print(
        f"== {len(pooled)} jobs (proofs: per-condition timeout {timeout:.0f} s; exhaustive bounds; mutants) in 2 "
        "processes, longest first, beside the stages that follow",
        flush=True,
    )
    with ProcessPoolExecutor(max_workers=2, mp_context=_FORK) as pool:
        done = pool.map(_pooled, [j[0] for j in pooled], [j[2] for j in pooled])  # submits every job now
        for stage, name, thunk in todo:
            if callable(thunk) and stage != "exhaustive":
                show(_timed(lambda: [thunk()])[0])
        for found, result in done:
            if result is not None:
                _CHECKED[result.bounds] = result
            for row in found:
                show(row)
    for stage, name, thunk in todo:  # the coverage job reads every search's result
        if callable(thunk) and stage == "exhaustive":
            show(_timed(lambda: [thunk()])[0])
    total = time.perf_counter() - start
    ok = bool(rows) and all(r.ok for r in rows)  # a run that checked nothing never passes
    print(_summary(rows, total, level_name, level), flush=True)
    if args.report:
        _write_report(Path(args.report), rows, total, level_name, ok)
        print(f"report: {args.report}/report.md, {args.report}/report.json", flush=True)
    print("verify: " + verdict(ok, level_name), flush=True)
    return 0 if ok else 1


def verdict(ok: bool, level_name: str) -> str:
    """PASS or FAIL; a quick pass says that it proved nothing."""
    if not ok:
        return "FAIL"
    return "PASS (quick: proofs skipped)" if level_name == "quick" else "PASS"


def skipped_by_quick() -> list[str]:
    """What `--quick` leaves out of the default run, read from the two levels."""
    quick, default = LEVELS["quick"], LEVELS["default"]
    out = [f"the {len(model_proofs.PROOFS)} CrossHair proofs"]
    out.append(
        f"{len(default['bounds']) - len(quick['bounds'])} of the exhaustive bounds (runs {len(quick['bounds'])} small "
        f"ones, plus their rule coverage: {len(quick['bounds']) + 1} exhaustive checks)"
    )
    for key in ("pool", "scheduler", "mutant"):
        q, d = quick[key], default[key]
        out.append(f"{key} machines at {q.examples}x{q.steps} examples x steps instead of {d.examples}x{d.steps}")
    out.append(f"differential at {quick['differential']} workloads instead of {default['differential']}")
    return out


def _parse_shard(text: str | None) -> tuple[int, int]:
    if text is None:
        return 0, 1
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"--shard {text}: want I/N, two whole numbers with 1 <= I <= N (e.g. 1/4)")
    i, n = int(parts[0]), int(parts[1])
    if not 1 <= i <= n:
        raise UsageError(f"--shard {text}: want I/N with 1 <= I <= N")
    return i - 1, n


def _summary(rows: list[Row], total: float, level_name: str, level: dict) -> str:
    lines = ["", "== summary", "| stage | checks | passed | seconds | CPU seconds |", "|---|---:|---:|---:|---:|"]
    for stage in (
        "declaration",
        "mutations",
        "proofs",
        "exhaustive",
        "differential",
        "hypothesis",
        "continuity",
        "faults",
        "mutants",
        "bad input",
    ):
        mine = [r for r in rows if r.stage == stage]
        if mine:
            lines.append(
                f"| {stage} | {len(mine)} | {sum(r.ok for r in mine)} | {sum(r.seconds for r in mine):.1f} "
                f"| {sum(r.cpu for r in mine):.1f} |"
            )
        elif stage == "proofs" and not level["proofs"]:
            lines.append("| proofs | skipped (--quick) | - | - | - |")
    states = sum(r.detail["states"] for r in rows if r.stage == "exhaustive")
    lines.append(f"exhaustive: {states} reachable states over {sum('bounds' in r.detail for r in rows)} bounds")
    for r in rows:
        if r.stage == "mutations":
            lines += ["", "== declaration mutants: kill matrix (per rule: how each of its mutants was killed)"]
            lines += declaration_mutants.matrix_lines(r.detail)
    mutants = [r for r in rows if r.stage == "mutants"]
    if mutants:
        lines += [
            "",
            "== mutant matrix",
            "| mutant | bug (SGLang PR) | expected catch | checker: property, trace | Hypothesis: examples, seconds, caught at |",
            "|---|---|---|---|---|",
        ]
        for r in mutants:
            c, h = r.detail["checker"], r.detail["hypothesis"]
            where = {
                "call": "the call (" + h["error"].split(":")[0] + ")",
                "audit": "idle audit (AuditFailed)",
                "invariant": f"{r.detail.get('machine', 'scheduler')} invariant",
            }.get(h["caught_by"], "MISSED")
            want, right = r.detail["expected"], r.detail["right_reason"]
            got = c["property"] or "MISSED"
            where = where if right["hypothesis"] or h["passed"] else "WRONG REASON " + where
            checked = (
                f"{got if right['checker'] or not c['property'] else 'WRONG REASON ' + got}, {len(c['trace'])} steps"
                if c.get("applies", True)
                else "n/a (only legal moves; the state's numbers are wrong)"
            )
            lines.append(
                f"| {r.name} | {r.detail['bug']} | {'/'.join(want['checker']) or '-'}; {'/'.join(want['runtime'])} "
                f"| {checked} | {h['examples']}, {h['seconds']:.1f} s, {where} |"
            )
    lines.append(f"\n{level_name} run: {total:.1f} s in all, {sum(r.cpu for r in rows):.1f} CPU seconds in its jobs")
    return "\n".join(lines)


def _write_report(folder: Path, rows: list[Row], total: float, level_name: str, ok: bool) -> None:
    from slotwarden.model.diagram import mermaid

    folder.mkdir(parents=True, exist_ok=True)
    data = {"ok": ok, "level": level_name, "seconds": total, "results": [r._asdict() for r in rows]}
    (folder / "report.json").write_text(json.dumps(data, indent=2, default=str))
    md = [f"# slotwarden verify: {verdict(ok, level_name)}", "", "```mermaid", mermaid().rstrip(), "```", ""]
    md += ["## Properties", "", "| property | kind | in words | proofs | checks |", "|---|---|---|---|---|"]
    md += [
        f"| {p.name} | {p.kind.value} | {registry.text(p.name)} | {', '.join(p.proofs) or '-'} | {', '.join(p.checks)} |"
        for p in registry.PROPERTIES.values()
    ]
    md += ["", "## Results", "", "| stage | check | ok | seconds | result |", "|---|---|---|---:|---|"]
    md += [f"| {r.stage} | {r.name} | {'yes' if r.ok else 'NO'} | {r.seconds:.1f} | {r.summary} |" for r in rows]
    for r in rows:
        if r.stage == "mutations":
            md += ["", "## Declaration mutants", "", *declaration_mutants.matrix_lines(r.detail), ""]
            md += ["| mutant | killed by | witness |", "|---|---|---|"]
            md += [
                f"| {k['mutant']} | {k['killed_by'] or 'equivalent'} | {k['detail'] or r.detail['equivalent'].get(k['mutant'], '')} |"
                for k in r.detail["kills"]
            ]
    md += ["", "## Counterexamples", ""]
    for r in rows:
        trace = r.detail.get("trace") or (r.detail.get("hypothesis") or {}).get("trace")
        checker = (r.detail.get("checker") or {}).get("trace") or ((r.detail.get("violation") or {}).get("trace"))
        if trace or checker:
            md += [f"### {r.stage}: {r.name}", ""]
            if checker:
                md += ["Shortest trace (exhaustive checker):", "", "```", *checker, "```", ""]
            if trace:
                md += ["Shrunk steps (Hypothesis, runnable):", "", "```python", trace, "```", ""]
    (folder / "report.md").write_text("\n".join(md))
