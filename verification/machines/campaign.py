"""Running the Hypothesis machines as a campaign: clean runs must pass, mutants must fail.

Each run records its verdict, time, the number of examples Hypothesis tried, and for a failure
the exception (which tells where the bug was caught: an `IllegalMove`, `BadSlotId` or
`FenceError` at the call that made it, or `AuditFailed` at the idle audit) and the shrunk,
runnable step sequence Hypothesis printed.
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple

import hypothesis.core
from hypothesis import HealthCheck, Phase, __version__, settings
from hypothesis.database import InMemoryExampleDatabase
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test


class Budget(NamedTuple):
    examples: int
    steps: int


class CampaignResult(NamedTuple):
    name: str
    passed: bool
    seconds: float
    examples: int
    error: str  # exception type and first line, for a failure
    caught_by: str  # "call" (the illegal move raised), "audit", "invariant", or "" when passed
    trace: str  # the shrunk steps Hypothesis printed
    blob: str = ""  # a failure's `@reproduce_failure` blob: `replay` runs that one example again


_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)  # no `explain`: it reruns a lot
_BLOB = re.compile(r"@reproduce_failure\('[^']*', b'([^']*)'\)")
_AT_CALL = ("IllegalMove", "BadSlotId", "FenceError", "IllegalCopy")


def run_machine(
    name: str, machine: type, budget: Budget, seed: int | None = None, shrink: bool = True
) -> CampaignResult:
    """Run `machine` for `budget`; never raises for a failing machine, reports it.

    Two passes: the search (no shrinking) gives the time and number of examples to the first
    failure; for a failure, a second pass replays it from an in-memory database and shrinks
    it, giving the shortest step sequence Hypothesis can find and where it was caught
    (`shrink=False`: the failing steps as first found)."""
    database = InMemoryExampleDatabase()
    search = attempt(machine, budget, seed, database, (Phase.explicit, Phase.reuse, Phase.generate))
    if search.passed or not shrink:
        return search._replace(name=name)
    shrunk = attempt(machine, budget, seed, database, _SHRINK)  # same seed: finds it again, then shrinks
    return search._replace(
        name=name,
        error=shrunk.error or search.error,
        caught_by=shrunk.caught_by or search.caught_by,
        trace=shrunk.trace or search.trace,
        blob=shrunk.blob or search.blob,
    )


def attempt(machine: type, budget: Budget, seed, database, phases) -> CampaignResult:
    lines: list[str] = []
    count = [0]
    original_init = machine.__init__
    own_init = machine.__dict__.get("__init__")  # None: inherited, and inherited again afterwards

    def counting_init(self, *a, **kw):
        count[0] += 1
        original_init(self, *a, **kw)

    machine.__init__ = counting_init
    chosen = settings(
        max_examples=budget.examples,
        stateful_step_count=budget.steps,
        deadline=None,
        database=database,
        suppress_health_check=list(HealthCheck),
        print_blob=True,  # taken out of the trace into `blob`
        report_multiple_bugs=False,
        phases=phases,
    )
    previous_seed = hypothesis.core.global_force_seed
    hypothesis.core.global_force_seed = 0 if seed is None else seed  # reproducible by default
    start = time.perf_counter()
    try:
        with with_reporter(lines.append):
            run_state_machine_as_test(machine, settings=chosen)
        error, caught = "", ""
    except Exception as exc:  # the machine found a counterexample
        kind = type(exc).__name__
        error = f"{kind}: {str(exc).splitlines()[0] if str(exc) else ''}"
        caught = "call" if kind in _AT_CALL else "audit" if kind == "AuditFailed" else "invariant"
        lines.extend(getattr(exc, "__notes__", ()))  # Hypothesis attaches the steps as notes
    finally:  # whatever happened, later runs in this process see neither the seed nor the patch
        hypothesis.core.global_force_seed = previous_seed
        if own_init is None:
            del machine.__init__
        else:
            machine.__init__ = own_init
    seconds = time.perf_counter() - start
    blobs = [m.group(1) for m in map(_BLOB.search, lines) if m]
    trace = "\n".join(line for line in lines if line.strip() and not _BLOB.search(line))
    return CampaignResult("", not error, seconds, count[0], error, caught, trace, blobs[0] if blobs else "")


def replay(machine: type, blob: str, steps: int) -> CampaignResult:
    """Run the one example `blob` (a failure's `CampaignResult.blob`) of `machine` again, as
    `@reproduce_failure` does: its verdict is the error it raises now (`DidNotReproduce` when
    it passes)."""
    once = type(
        machine.__name__, (machine,), {"_hypothesis_internal_use_reproduce_failure": (__version__, blob.encode())}
    )
    return attempt(once, Budget(1, steps), 0, None, (Phase.explicit, Phase.reuse, Phase.generate))
