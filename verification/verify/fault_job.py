"""The fault-injection job of `slotwarden verify`: the fault machines (verification/machines/faults.py),
without and with the prefix cache, each at its level's budget; one row, failing if either does."""

from __future__ import annotations

import time

from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.machines.faults import CachedFaultMachine, FaultMachine

BUDGETS = {  # (without the cache, with it) per level
    "quick": (Budget(40, 25), Budget(15, 25)),
    "default": (Budget(100, 25), Budget(40, 25)),
    "thorough": (Budget(1000, 40), Budget(400, 40)),
}


def fault_row(level: str, seed, row: type):
    """The job's `row` (verify's `Row`): both machines, the first failure's error and steps."""
    start = time.perf_counter()
    plain, cached = BUDGETS[level]
    runs = [
        run_machine("faults", FaultMachine, plain, seed),
        run_machine("faults+cache", CachedFaultMachine, cached, seed),
    ]
    bad = [r for r in runs if not r.passed]
    text = ", ".join(f"{r.name} {r.examples} examples" for r in runs) + (
        f"; FAILED {bad[0].name}: {bad[0].error}" if bad else "; tokens exact or refused, audits clean"
    )
    detail = {r.name: r._asdict() for r in runs}
    return row("contract", "pool-call faults", not bad, time.perf_counter() - start, text, detail)
