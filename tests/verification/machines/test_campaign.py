"""The campaign runner leaves no trace in the process: the forced seed and the counting
`__init__` it installs are undone after a passing run, a failing run and an interrupted one."""

import hypothesis.core
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from slotwarden.verification.machines.campaign import Budget, run_machine


class Passes(RuleBasedStateMachine):
    @rule(x=st.integers(0, 3))
    def anything(self, x):
        pass


class Fails(RuleBasedStateMachine):
    @rule(x=st.integers(0, 3))
    def boom(self, x):
        raise ValueError("planted")


class Interrupted(RuleBasedStateMachine):
    @rule()
    def stop(self):
        raise KeyboardInterrupt


@pytest.mark.parametrize("machine, passed", [(Passes, True), (Fails, False)])
def test_a_run_restores_the_seed_and_the_machine(machine, passed):
    before = hypothesis.core.global_force_seed
    result = run_machine("m", machine, Budget(3, 3), seed=1234, shrink=False)
    assert result.passed is passed and result.examples >= 1
    assert hypothesis.core.global_force_seed == before  # not pinned to 1234 for later runs
    assert "__init__" not in machine.__dict__  # the counting __init__ is gone


def test_an_interrupted_run_restores_them_too():
    before = hypothesis.core.global_force_seed
    with pytest.raises(KeyboardInterrupt):
        run_machine("m", Interrupted, Budget(3, 3), seed=99, shrink=False)
    assert hypothesis.core.global_force_seed == before
    assert "__init__" not in Interrupted.__dict__
