"""`slotwarden verify`: run the campaign's jobs (or one shard of them), with progress, a
summary and a report. The pooled jobs run in two worker processes, longest first, while this
process runs the other stages; the coverage job runs last, on every bounds' result. `--job
STAGE/NAME` keeps only the named jobs (`select`; the coverage job brings its bounds' searches).
User errors (a malformed or empty shard, an unknown proof or job, a report folder that cannot be
written) raise `UsageError` before any job runs. Exit status 0 only if every proof is CONFIRMED, every check
holds, and every runtime fault and every mutant is caught. A job that raises is a FAIL row with
its traceback (in report.md, and printed below the row), and the run goes on to its verdict.
"""

from __future__ import annotations

import difflib
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from slotwarden.model import proofs as model_proofs
from slotwarden.verification.crosshair_proofs import DEFAULT_TIMEOUT
from slotwarden.verification.usage import UsageError, output_folder
from slotwarden.verification.verify.jobs import CHECKED, EVERY_MOVE, LEVELS, Row, jobs, skipped_by_quick
from slotwarden.verification.verify.report import summary, write_report, verdict
from slotwarden.verification.verify.stop import FailFast, stop
from slotwarden.verification.verify.workers import FORK, cost, run_pooled, timed


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
    every = select(jobs(level, timeout, args.seed, args.only, getattr(args, "simulate", None)), args.job, level_name)
    todo = [j for i, j in enumerate(every) if i % shards == shard]
    if not todo:
        raise UsageError(
            f"--shard {args.shard}: shard {shard + 1} of {shards} has no job (the {level_name} run has {len(every)}): "
            f"use N <= {len(every)}"
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
        mark = "SKIP" if "skipped" in row.detail else "ok  " if row.ok else "FAIL"
        print(
            f"  [{len(rows):>2}/{expected}] {mark} {row.stage:<11} {row.name:<34} {row.seconds:7.1f} s  {row.summary}",
            flush=True,
        )
        if "traceback" in row.detail:
            print("    " + row.detail["traceback"].rstrip().replace("\n", "\n    "), flush=True)
        if not row.ok and getattr(args, "fail_fast", False):
            raise FailFast(row)

    pooled = sorted((j for j in todo if not callable(j[2])), key=cost, reverse=True)
    print(
        f"== {len(pooled)} jobs (proofs: per-condition timeout {timeout:.0f} s; exhaustive bounds; mutants) in 2 "
        "processes, longest first, beside the stages that follow",
        flush=True,
    )
    stopped = False  # --fail-fast met a failing row
    with ProcessPoolExecutor(max_workers=2, mp_context=FORK) as pool:
        try:
            stages, thunks, names = [j[0] for j in pooled], [j[2] for j in pooled], [j[1] for j in pooled]
            done = pool.map(run_pooled, stages, thunks, names)  # submits every job now
            for stage, name, thunk in todo:
                if callable(thunk) and stage != "exhaustive":
                    show(timed(lambda: [thunk()], stage, name)[0])
            for found, result in done:
                if result is not None:
                    CHECKED[result.bounds] = result
                for row in found:
                    show(row)
        except FailFast:
            stopped = stop(pool)
    for stage, name, thunk in todo if not stopped else ():  # the coverage job reads every search's result
        if callable(thunk) and stage == "exhaustive":
            try:
                show(timed(lambda: [thunk()], stage, name)[0])
            except FailFast:
                break
    total = time.perf_counter() - start
    ok = bool(rows) and all(r.ok for r in rows)  # a run that checked nothing never passes
    print(summary(rows, total, level_name, level), flush=True)
    if args.report:
        write_report(Path(args.report), rows, total, level_name, ok)
        print(f"report: {args.report}/report.md, {args.report}/report.json", flush=True)
    print("verify: " + verdict(ok, level_name), flush=True)
    return 0 if ok else 1


COVERAGE_JOB = "exhaustive/coverage"
"""The rule coverage job: it reads the results of the level's exhaustive searches (`CHECKED`)."""


def job_name(job: tuple) -> str:
    """A job's name for `--job` and for its coverage context: "STAGE/NAME"."""
    return f"{job[0]}/{job[1]}"


def select(every: list, wanted, level_name: str = "default") -> list:
    """The jobs of `every` that `wanted` names ("STAGE/NAME"; None or empty: all), in their
    order; naming the coverage job brings every exhaustive search of the level it reads. An
    unknown name is a `UsageError` that gives the close matches, or else every name."""
    if not wanted:
        return every
    names = [job_name(j) for j in every]
    for name in wanted:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}?" if close else f"the jobs are: {'; '.join(names)}"
            raise UsageError(f"--job {name}: the {level_name} run has no such job; {hint}")
    keep = set(wanted)
    if COVERAGE_JOB in keep:
        keep |= {n for n, j in zip(names, every) if j[0] == "exhaustive"}
    return [j for n, j in zip(names, every) if n in keep]


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
