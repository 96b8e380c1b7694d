"""Every bug of the history, injected, is caught: by the exhaustive checker with the right
property and a short trace, and by the Hypothesis scheduler machine, where the runtime raises
at the call that makes the illegal move (or, for a slot never released, at the idle audit)."""

import pytest

from slotwarden.verification.campaign import Budget, run_machine
from slotwarden.verification.checker import check
from slotwarden.verification.mutants import MUTANTS
from slotwarden.verification.stateful import machine_for
from slotwarden.runtime.scheduler import Scheduler

EXPECTED = {  # mutant -> (checker property, where the runtime catches it)
    "lent_rollback_frees": ("legal", "IllegalMove"),
    "rollback_frees_admitted": ("legal", "IllegalMove"),
    "close_leaks": ("no_orphans", "AuditFailed"),
    "stale_handle_after_park": ("handles_match", "IllegalMove"),
    "sentinel_freed": ("legal", "BadSlotId"),
    "abort_leaks": ("no_orphans", "AuditFailed"),
    "early_fence": ("in_flight_not_free", "FenceError"),
}


def test_every_row_of_the_bug_table_has_a_mutant():
    assert set(EXPECTED) == {m.name for m in MUTANTS}
    assert all(issubclass(m.cls, Scheduler) and m.cls is not Scheduler for m in MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_the_checker_catches_it(mutant):
    result = check(mutant.bounds, mutant.policy())
    assert result.violation is not None
    assert result.violation.property == EXPECTED[mutant.name][0]
    assert 1 <= len(result.violation.trace) <= 9


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_the_runtime_catches_it_under_hypothesis(mutant):
    result = run_machine(mutant.name, machine_for(mutant.cls, **mutant.needs), Budget(300, 25))
    assert not result.passed, f"{mutant.name} escaped {result.examples} examples"
    assert result.error.startswith(EXPECTED[mutant.name][1]), result.error
    assert "state = " in result.trace and "state.submit" in result.trace  # the shrunk, runnable steps


def test_the_unmutated_scheduler_passes_the_same_campaign():
    for overlap in (False, True):
        result = run_machine("clean", machine_for(Scheduler, overlap=overlap), Budget(60, 25))
        assert result.passed, result.error + "\n" + result.trace
