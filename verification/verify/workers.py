"""The worker side of `slotwarden verify`: the jobs that run in the two worker processes (the
declaration mutants, the proofs, the exhaustive bounds and the mutants), started longest first
(`cost`) as copies of the parent process, and the CPU seconds of every job's rows (`timed`).
A job that raises gives one FAIL row with its traceback (`raised`), never a run with no verdict."""

from __future__ import annotations

import multiprocessing
import sys
import time
import traceback
from typing import Callable

from slotwarden.verification.checker import pins
from slotwarden.verification.verify.jobs import (
    EVERY_MOVE,
    Row,
    checker_job,
    declaration_mutants_job,
    mutant_job,
    proofs_job,
)


def run_pooled(stage: str, args: tuple, name: str = "") -> tuple[list[Row], object]:
    """Run one job in a worker process: its rows, and for an exhaustive bounds its result (None
    if it raised: its FAIL row says why)."""
    if stage == "exhaustive":
        searched = [None]

        def search() -> list[Row]:
            row, searched[0] = checker_job(*args)
            return [row]

        return timed(search, stage, name), searched[0]
    if stage == "proofs":
        return timed(lambda: proofs_job(*args), stage, name), None
    if stage == "mutations":
        return timed(lambda: [declaration_mutants_job(*args)], stage, name), None
    return timed(lambda: [mutant_job(*args)], stage, name), None


def timed(run: Callable[[], list], stage: str = "", name: str = "") -> list[Row]:
    """The rows `run` returns, their CPU seconds (this process's) shared among them; if `run`
    raises, the one FAIL row of job `stage`/`name` that says so (`raised`). Under coverage.py
    the lines it runs are labelled "stage/name" (`in_context`), those after it "" again."""
    start, wall = time.process_time(), time.perf_counter()
    in_context(f"{stage}/{name}")
    try:
        rows = run()
    except Exception as exc:  # a job's fault is a verdict (FAIL), not the end of the run
        rows = [raised(stage, name, exc, time.perf_counter() - wall)]
    finally:
        in_context("")
    cpu = (time.process_time() - start) / max(len(rows), 1)
    return [r._replace(cpu=cpu) for r in rows]


def in_context(name: str) -> None:
    """Label the lines this process runs from now on `name` (coverage.py's dynamic context),
    when it runs under coverage.py (`verify --coverage`); else nothing."""
    coverage = sys.modules.get("coverage")  # imported by coverage.py's own start, never here
    current = getattr(getattr(coverage, "Coverage", None), "current", None)
    cov = current() if current else None
    if cov is not None:
        cov.switch_context(name)


def raised(stage: str, name: str, exc: BaseException, seconds: float) -> Row:
    """The FAIL row of a job that raised `exc`: its type and message in the summary, the whole
    traceback in the detail (and in report.md)."""
    text = "".join(traceback.format_exception(exc))
    first = (str(exc).splitlines() or [""])[0]
    summary = f"RAISED {type(exc).__name__}: {first}"[:200]
    return Row(stage, name, False, seconds, summary, {"raised": type(exc).__name__, "traceback": text})


FORK = multiprocessing.get_context("fork")
"""Workers start as copies of this process (nothing to import again)."""

PROOF_COST = {EVERY_MOVE: 20.0, "conserved": 16.0}
"""Rough CPU seconds of the longest proof jobs, only to order the jobs longest first (a wrong
guess costs at most an idle tail); any other proof counts as a few seconds."""


def cost(job: tuple) -> float:
    """A job's rough CPU seconds, to start the longest first so that no long job runs alone at
    the end. An exhaustive bounds costs about one second per 20,000 transitions of its pin (an
    unpinned one, its size unknown, counts as the longest); a proof counts as its usual cost,
    and the declaration mutants and a mutant as a few seconds each."""
    stage, name, args = job
    if stage == "exhaustive":
        pin = pins.pin_of(args[0])
        return float("inf") if pin is None else pin[1] / 20_000
    if stage == "proofs":
        return PROOF_COST.get(name, 4.0)
    return 4.0
