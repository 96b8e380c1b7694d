"""The livelock and hang bugs in verify's mutant matrix: each caught by the checker's liveness
property it names; the livelock's runtime variant by the scheduler machine, which never sees
the scheduler idle (the hangs' runtime variants are not in the catalogue: that half is n/a)."""

import pytest

from slotwarden.verification.abstract import Policy
from slotwarden.verification.machines import machine_for
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.mutants.window_history import SPECULATIVE_MUTANTS
from slotwarden.verification.mutants.history import LIVENESS_MUTANTS, MUTANTS
from slotwarden.verification.verify import jobs as verify


def test_the_matrix_runs_them_after_the_safety_mutants():
    names = [n for stage, n, _ in verify.jobs(verify.LEVELS["quick"], 1.0, 0, None) if stage == "mutants"]
    assert names == [m.name for m in MUTANTS + LIVENESS_MUTANTS + SPECULATIVE_MUTANTS]
    assert all(m.bug.startswith(("vLLM #52520", "vLLM #50754")) and "HISTORY" in m.bug for m in LIVENESS_MUTANTS)


@pytest.mark.parametrize("mutant", LIVENESS_MUTANTS, ids=lambda m: m.name)
def test_verify_catches_each_for_its_liveness_property(mutant):
    mutant = mutant._replace(cls=None, runtime_catch=())  # the checker's half (the machine's: below)
    row = verify._mutant(mutant, Budget(1, 1), 0, False)
    assert row.ok, row.summary
    assert f"checker: {mutant.checker_catch[0]}" in row.summary and "hypothesis: n/a" in row.summary
    assert row.detail["checker"]["property"] == mutant.checker_catch[0]
    missed = verify._mutant(mutant._replace(policy=Policy), Budget(1, 1), 0)  # the correct policy: a miss
    assert not missed.ok and "checker: MISSED" in missed.summary


def test_the_scheduler_machine_catches_the_livelock():
    m = {m.name: m for m in LIVENESS_MUTANTS}["requeue_near_ceiling"]
    result = run_machine(m.name, machine_for(m.cls), Budget(500, 40), None, False)
    assert not result.passed and result.error.split(":")[0] in m.runtime_catch, result.error
    assert "never come free" in result.error and result.caught_by == "invariant"


def test_the_matrix_says_n_a_for_a_missing_runtime_variant():
    from slotwarden.verification.verify.report import summary

    m = {m.name: m for m in LIVENESS_MUTANTS}["turn_awaits_lost_handoff"]
    row = verify.mutant_job(m.name, Budget(1, 1), 0, False)
    (line,) = [
        x for x in summary([row], 1.0, "quick", verify.LEVELS["quick"]).splitlines() if x.startswith(f"| {m.name}")
    ]
    assert "n/a (no runtime variant)" in line and "MISSED" not in line, line
