"""One decision vocabulary, tried (verification/mutants/bridge.py): the runtime's scheduler asking
the checker's `Policy`. With the default policy it passes the scheduler machine; with a history
mutant's policy, written once for the checker, the runtime refuses the bug at the call.
(`abort_pins_lent_slot` is bridged too, but the machine finds it only in some runs: its path, an
abort of a lent turn, is rare in random workloads; its runtime twin has a scripted scenario.)"""

import pytest

from slotwarden.verification.abstract import Policy
from slotwarden.verification.machines import machine_for
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.mutants.bridge import asking
from slotwarden.verification.mutants.history import MUTANTS

BUDGET = Budget(300, 25)  # a mutant stops at its first catch; the correct run spends it all
BRIDGED = {  # the mutants whose bug is a decision of events, and the error the runtime raises
    "lent_rollback_frees": "IllegalMove",
    "rollback_frees_admitted": "IllegalMove",
    "close_leaks": "AuditFailed",
    "sentinel_freed": "BadSlotId",
    "overlength_abort_restores": "IllegalMove",  # the policy aborts the parked slot (its runtime twin copies)
}


def test_the_default_policy_runs_the_scheduler_unchanged():
    result = run_machine("asking the default policy", machine_for(asking(Policy)), Budget(100, 25), 0, shrink=False)
    assert result.passed, result.error


@pytest.mark.parametrize("name", sorted(BRIDGED))
def test_a_mutant_written_once_is_refused_by_the_runtime(name):
    mutant = {m.name: m for m in MUTANTS}[name]
    result = run_machine(name, machine_for(asking(mutant.policy), **mutant.needs), BUDGET, 0, shrink=False)
    assert not result.passed and result.error.split(":")[0] == BRIDGED[name], result.error
