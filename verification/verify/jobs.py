"""The jobs of `slotwarden verify`: its levels (how much each stage checks), one function per
kind of job that runs it and returns its `Row`, and `jobs()`, the campaign as a fixed list.

The stages: the declaration (the `transitions` machine, `step()`, the table and the runtime's
own paths agree on every move and on many-slot batches; every single-rule mutant of it is
killed), the CrossHair proofs, the exhaustive model checker over the abstract scheduler and
its coverage, the differential stage (the checker's model follows the runtime's scheduler),
verify's self-test, the Hypothesis machines (faults injected at every pool call among them),
continuity (tokens and state against a replay of the transcript; speculative against plain
decoding), the runtime bugs seeded
and hunted, the mutant matrix (each bug of the history caught by the checker, liveness included,
and by the scheduler machine, each for the reason it names), bad input at every entry point and
the SGLang adapter on SGLang's real objects.
A job whose thunk is a tuple runs in a worker process (`workers.run_pooled`).
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

from slotwarden.model import proofs as model_proofs
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.verification.agreement import judge, judge_runtime
from slotwarden.verification.batches import covers, judge_batches
from slotwarden.verification.checker import pins
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS, TEST_BOUNDS, THOROUGH_BOUNDS
from slotwarden.verification.checker.goals import UNREACHABLE, coverage, show_rule
from slotwarden.verification.checker.liveness import check_live
from slotwarden.verification.checker.search import check
from slotwarden.verification.checker.simulate import SIMULATION_BOUNDS, simulate
from slotwarden.verification import interrupts, selftest, speculative
from slotwarden.verification.adapters import sglang_job
from slotwarden.verification.crosshair_proofs import prove, prove_moves
from slotwarden.verification.differential import check_differential, runtime_has_cache
from slotwarden.verification.edges.job import EDGE_CHECKS, edge_row
from slotwarden.verification.machines.speculative import hunter as machine_hunter
from slotwarden.verification.machines.speculative import speculative_continuity_for, speculative_machine_for
from slotwarden.verification.machines.allocator import AllocatorMachine
from slotwarden.verification.machines.bad_input import BadInputMachine, SchedulerBadInputMachine
from slotwarden.verification.machines.campaign import Budget, CampaignResult, run_machine
from slotwarden.verification.machines.continuity import (
    CachedContinuityMachine,
    ContinuityMachine,
)
from slotwarden.verification.machines.guard import GuardMachine
from slotwarden.verification.machines.pool import PoolMachine
from slotwarden.verification.machines.radix import RadixMachine
from slotwarden.verification.machines.scheduler import machine_for
from slotwarden.verification.mutants import declaration as declaration_mutants
from slotwarden.verification.mutants.history import LIVENESS_MUTANTS, MUTANTS
from slotwarden.verification.mutants.window_history import SPECULATIVE_MUTANTS
from slotwarden.verification.mutants.runtime_checks import rejudge_listed, witness
from slotwarden.verification.mutants.seeded import SEEDED_BUGS, hunt
from slotwarden.verification.verify.fault_job import fault_row

LEVELS = {  # examples per machine, steps per example, mutant examples, checker bounds
    "quick": dict(
        differential=40,
        pool=Budget(40, 25),
        allocator=Budget(30, 20),
        scheduler=Budget(25, 20),
        mutant=Budget(300, 25),
        bounds=TEST_BOUNDS,
        proofs=False,
        shrink=False,
    ),
    "default": dict(
        differential=300,
        pool=Budget(200, 30),
        allocator=Budget(150, 25),
        scheduler=Budget(100, 25),
        mutant=Budget(500, 40),  # 30 steps rarely reached an aborted running lent turn (SGLang 40251)
        bounds=DEFAULT_BOUNDS,
        proofs=True,
        shrink=False,  # the checker's trace is the shortest; --thorough also shrinks Hypothesis's
    ),
    "thorough": dict(
        differential=2000,
        pool=Budget(2000, 40),
        allocator=Budget(1000, 40),
        scheduler=Budget(1000, 40),
        mutant=Budget(2000, 40),
        bounds=THOROUGH_BOUNDS,
        proofs=True,
        shrink=True,
        simulate=120.0,  # seconds of random walks per simulated bounds (`checker.simulate`)
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
    cpu: float = 0.0  # CPU seconds of the process that ran it (`timed`), however loaded the machine


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


def declaration_mutants_job(crosshair_timeout: float | None) -> Row:
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
    text = (
        f"{len(verdicts) - len(bad)}/{len(verdicts)} moves on real ledger columns agree with step() "
        "(check strict and off; per-slot, compiled and numpy paths)"
    )
    detail = {"moves": len(verdicts), "disagreements": [f"{v.case} [{v.check}]: {v.problem}" for v in bad[:20]]}
    return Row("declaration", "runtime look_up/write = step()", not bad, time.perf_counter() - start, text, detail)


def _selftest(_) -> Row:
    """verify's own checks, each on a case built to break it (`verification/selftest.py`)."""
    return Row("self-test", "verify's own checks", *selftest.verdict(_checker_row))


def _batch_agreement(_) -> Row:
    """Many-slot batches (runs, several runs, scattered, mixed in owner and in state) through
    `SlotLedger.apply` down its batched paths against `step()` slot by slot."""
    start = time.perf_counter()
    verdicts = judge_batches()
    bad = [v for v in verdicts if not v.agrees]
    kinds = covers(verdicts)
    text = (
        f"{len(verdicts) - len(bad)}/{len(verdicts)} batches agree with step() slot by slot ("
        + ", ".join(f"{k} {n}" for k, (n, _) in kinds.items())
        + f"; paths {', '.join(sorted({v.path for v in verdicts}))})"
    )
    detail = {"batches": len(verdicts), "kinds": kinds, "disagreements": [str(v) for v in bad[:20]]}
    return Row("declaration", "runtime batches = step()", not bad, time.perf_counter() - start, text, detail)


def _continuity(budget: Budget, seed, machine: type = ContinuityMachine, name: str = "continuity") -> Row:
    r = run_machine(name, machine, budget, seed)
    text = f"{r.examples} examples, tokens and state bit for bit" + ("" if r.passed else f"; FAILED: {r.error}")
    what = "state = transcript's reference" + {"continuity+cache": ", prefix cache on"}.get(name, "")
    what += ", speculative requests" if name == "continuity+speculative" else ""
    return Row("continuity", what, r.passed, r.seconds, text, r._asdict())


def seeded_bug_stages(runtime_level: dict, level: dict, seed) -> dict:
    """The stages that hunt a seeded runtime fault: name -> check ("" when it passes)."""

    def machine(name, m, budget):
        def run() -> str:
            r = run_machine(name, m, budget, seed, shrink=False)
            return "" if r.passed else f"{r.error} (example {r.examples})"

        return run

    def agreement() -> str:
        bad = [v for v in judge_runtime() if not v.agrees]
        if not bad:
            batches = [v for v in judge_batches() if not v.agrees]
            return f"{len(batches)} batches disagree, e.g. {batches[0]}" if batches else ""
        return (
            f"{len(bad)} moves disagree, e.g. {bad[0].case.slot.state.name} {bad[0].case.event.name} by "
            f"{bad[0].case.actor}: {bad[0].problem}"
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


INTERRUPT_EVENTS = {"quick": 30, "default": 100, "thorough": None}  # line events per configuration and exception


def _interrupts(per_config, seed) -> Row:
    """The interrupt sweep (verification/interrupts.py) over the scheduler's own frames."""
    start = time.perf_counter()
    tried, failures = interrupts.campaign(per_config, 0 if seed is None else int(seed))
    text = (
        f"{tried - len(failures)}/{tried} faults at a line of the scheduler's bookkeeping: exact, or broken and named"
    )
    detail = {"tried": tried, "failures": [f"{f.config} {f.exc} at {f.where}: {f.what}" for f in failures[:20]]}
    return Row("interrupts", "settrace sweep", not failures, time.perf_counter() - start, text, detail)


def _sglang(quick: bool) -> Row:
    start = time.perf_counter()
    ok, text, detail = sglang_job(quick)
    return Row("adapters", "SGLang 0.5.23 real objects", ok, time.perf_counter() - start, text, detail)


def _seeded_bug(fault, stages: dict) -> Row:
    c = hunt(fault, stages)
    text = f"caught by {c.stage}: {c.error}" if c.caught else f"ESCAPED {', '.join(c.tried)}"
    return Row("faults", fault.name, c.caught, c.seconds, text[:200], {"what": fault.what, **c._asdict()})


def proofs_job(name: str, timeout: float) -> list[Row]:
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


def checker_job(bounds) -> tuple:
    """One exhaustive bounds in a worker process: its row and its result (for the coverage job)."""
    r = check_live(bounds)  # the safety properties, then (on the graph it kept) the liveness ones
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
    text += f"; {r.liveness}" if r.liveness is not None else ""
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


CHECKED: dict = {}  # bounds -> CheckResult of this process's exhaustive jobs, for the coverage job


def _coverage(bounds_list) -> Row:
    """Every declared rule fired and every `sometimes` goal reached over the run's bounds
    (bounds this process did not check, e.g. in another shard, are checked here)."""
    start = time.perf_counter()
    results = [CHECKED.get(b) or check(b) for b in bounds_list]
    cover = coverage(results)
    detail = {
        "missed_rules": list(cover.missed_rules),
        "stale_unreachable": list(cover.stale_unreachable),
        "missed_goals": list(cover.missed_goals),
        "unreachable": {show_rule(k): why for k, why in UNREACHABLE.items()},
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
    c = check_live(mutant.bounds, mutant.policy()) if mutant.policy is not None else None  # safety, then liveness
    hunter = machine_hunter(mutant.machine)
    if mutant.cls is None:  # only the checker's half is in the catalogue: the runtime's is n/a
        h = CampaignResult(mutant.name, True, 0.0, 0, "", "", "")
    else:
        machine = hunter(mutant.cls, **mutant.needs)
        h = run_machine(mutant.name, machine, budget, seed, shrink)
    safety = mutant.cls is not None and mutant not in LIVENESS_MUTANTS  # a livelock's example runs to the step limit
    rejudged = rejudge_listed(mutant.name, witness(mutant.name, machine, h, budget.steps) if safety else None)
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
        f"; its example under {rejudged.replayed} listed declaration mutants"
        + "".join(f"; NOT EQUIVALENT: {m}" for m in rejudged.not_equivalent)
        + "".join(f"; DOES NOT KILL {m} (KILLED_AT_RUNTIME)" for m in rejudged.unproved)
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
        "rejudged": rejudged._asdict(),
    }
    return Row(
        "mutants",
        mutant.name,
        caught_checker and caught_hypothesis and rejudged.ok,
        time.perf_counter() - start,
        text,
        detail,
    )


def mutant_job(name: str, budget: Budget, seed, shrink: bool) -> Row:
    return _mutant({m.name: m for m in MUTANTS + LIVENESS_MUTANTS + SPECULATIVE_MUTANTS}[name], budget, seed, shrink)


def _simulation(bounds, seconds: float, seed) -> Row:
    r = simulate(bounds, seconds=seconds, seed=0 if seed is None else seed)
    v = None if r.violation is None else {"property": r.violation.property, "trace": list(r.violation.trace)}
    detail = r._asdict() | {"bounds": bounds._asdict(), "violation": v, "states": r.states}
    return Row("simulation", str(bounds), r.ok, r.seconds, str(r), detail)


def jobs(level: dict, proof_timeout: float, seed, only, walks: float | None = None) -> list[tuple[str, str, Callable]]:
    """Every job of the campaign as (stage, name, thunk), in a fixed order (for sharding). A
    job whose thunk is a tuple runs in the worker processes: `workers.run_pooled(stage, thunk)`.
    `walks`: seconds of simulation per simulated bounds (None: the level's; 0: none)."""
    out = [("declaration", "agreement", lambda: _agreement(None))]
    survivors_timeout = proof_timeout if level is LEVELS["thorough"] else None  # CrossHair on unlisted survivors
    out += [("mutations", "declaration mutants", (survivors_timeout,))]
    out += [("declaration", "runtime agreement", lambda: _runtime_agreement(None))]
    out += [("declaration", "runtime batches", lambda: _batch_agreement(None))]
    out += [("self-test", "verify's own checks", lambda: _selftest(None))]
    if level["proofs"]:
        names = only or [EVERY_MOVE] + [n for n in model_proofs.PROOFS if n not in model_proofs.MOVE_PROOFS]
        out += [("proofs", n, (n, proof_timeout)) for n in names]
    out += [("exhaustive", str(b), (b,)) for b in level["bounds"]]
    out.append(("exhaustive", "coverage", lambda: _coverage(level["bounds"])))
    walk = level.get("simulate") if walks is None else walks  # seconds of walks per bounds (`--simulate`)
    out += [("simulation", str(b), lambda b=b: _simulation(b, walk, seed)) for b in SIMULATION_BOUNDS if walk]
    out.append(("differential", "model = runtime", lambda: _differential(level["differential"], seed)))
    machines = [
        ("pool", PoolMachine, level["pool"]),
        ("guard", GuardMachine, level["pool"]),
        ("allocator", AllocatorMachine, level["allocator"]),
        ("radix tree", RadixMachine, level["allocator"]),
        ("scheduler", machine_for(Scheduler, overlap=False), level["scheduler"]),
        ("scheduler+overlap", machine_for(Scheduler, overlap=True), level["scheduler"]),
        ("scheduler+speculative", speculative_machine_for(Scheduler), level["scheduler"]),
    ]
    out += [("hypothesis", n, lambda n=n, m=m, b=b: _machine(n, m, b, seed)) for n, m, b in machines]
    runtime = RUNTIME_LEVELS[next((k for k, v in LEVELS.items() if v == level), "default")]
    out.append(("continuity", "continuity", lambda: _continuity(runtime["continuity"], seed)))
    for name, machine, budget in (
        ("continuity+cache", CachedContinuityMachine, runtime["cached"]),
        ("continuity+speculative", speculative_continuity_for(Scheduler), runtime["continuity"]),
    ):
        out.append(("continuity", name, lambda n=name, m=machine, b=budget: _continuity(b, seed, m, n)))
    out.append(
        ("continuity", "speculative = plain", lambda: Row("continuity", "speculative = plain", *speculative.row()))
    )
    events = INTERRUPT_EVENTS[next((k for k, v in LEVELS.items() if v == level), "default")]
    out.append(
        ("contract", "pool-call faults", lambda: fault_row(next(k for k in LEVELS if LEVELS[k] == level), seed, Row))
    )
    out.append(("interrupts", "settrace sweep", lambda: _interrupts(events, seed)))
    stages = seeded_bug_stages(runtime, level, seed)
    out += [("faults", f.name, lambda f=f: _seeded_bug(f, stages)) for f in SEEDED_BUGS]
    out += [
        ("mutants", m.name, (m.name, level["mutant"], seed, level["shrink"]))
        for m in MUTANTS + LIVENESS_MUTANTS + SPECULATIVE_MUTANTS
    ]
    junk = [("pool, ledger, guard", BadInputMachine), ("scheduler", SchedulerBadInputMachine)]
    out += [
        ("bad input", n, lambda n=n, m=m: _machine(n, m, level["scheduler"], seed)._replace(stage="bad input"))
        for n, m in junk
    ]
    out += [("edges", n, lambda n=n: edge_row(n, Row)) for n in EDGE_CHECKS]
    out.append(("adapters", "sglang", lambda: _sglang(level is LEVELS["quick"])))  # last: it imports SGLang
    return out


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
