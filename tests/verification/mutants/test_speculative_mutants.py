"""The speculative-decoding history mutants: each caught by the checker with the property it names
(the correct twin passes the same bounds) and by the runtime machines with the error it names; a
bug only the speculative path has is invisible without speculative requests."""

import pytest

from slotwarden.verification.abstract import Policy
from slotwarden.verification.checker.search import check
from slotwarden.verification.machines.speculative import hunter as machine_hunter
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.machines.scheduler import machine_for
from slotwarden.verification.mutants.window_history import SPECULATIVE_MUTANTS

EXPECTED = {  # name: (the checker's property, the runtime's error), one bug of the history each
    "lookahead_cached": ("legal", "IllegalMove"),  # vLLM #48375
    "stale_window_read": ("reads_committed", "IllegalStep"),  # vLLM #56531
    "verify_never_commits": ("reads_current", "AssertionError"),  # SGLang #26351
    "window_one_slot": ("writes_held", "IllegalStep"),  # vLLM #41233
    "rollback_in_place": ("rollback_restores", "AssertionError"),  # llama.cpp #26695
    "verify_before_alloc": ("ids_in_pool", "IllegalStep"),  # SGLang #28484
    "count_before_fence": ("legal", "IllegalMove"),  # vLLM #50021
}


def test_every_bug_of_the_issue_has_a_mutant_with_both_halves():
    assert {m.name: (m.checker_catch and m.checker_catch[0], m.runtime_catch[0]) for m in SPECULATIVE_MUTANTS} == {
        name: (EXPECTED[name][0], EXPECTED[name][1]) for name in EXPECTED
    }
    assert all(m.bounds.drafts and m.cls is not None and m.policy is not None for m in SPECULATIVE_MUTANTS)


@pytest.mark.parametrize("mutant", SPECULATIVE_MUTANTS, ids=lambda m: m.name)
def test_the_checker_catches_it_and_passes_the_correct_twin(mutant):
    result = check(mutant.bounds, mutant.policy())
    assert result.violation is not None and result.violation.property == EXPECTED[mutant.name][0]
    assert check(mutant.bounds, Policy()).ok


@pytest.mark.parametrize("mutant", SPECULATIVE_MUTANTS, ids=lambda m: m.name)
def test_the_runtime_catches_it_under_hypothesis(mutant):
    hunter = machine_hunter(mutant.machine)
    result = run_machine(mutant.name, hunter(mutant.cls, **mutant.needs), Budget(300, 25), seed=0, shrink=False)
    assert not result.passed, f"{mutant.name} escaped {result.examples} examples"
    assert result.error.split(":")[0] == EXPECTED[mutant.name][1], result.error


def test_without_speculative_requests_the_machines_miss_them():
    """The broken variant of the hunt: the plain scheduler machine, which submits no `spec_k`."""
    mutant = {m.name: m for m in SPECULATIVE_MUTANTS}["count_before_fence"]
    assert run_machine(mutant.name, machine_for(mutant.cls), Budget(60, 25), seed=0, shrink=False).passed
    assert not run_machine(mutant.name, machine_hunter("speculative")(mutant.cls), Budget(60, 25), seed=0).passed
