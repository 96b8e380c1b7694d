"""The checker against the reference it was made from (`checker.reference`, today's form): on
the tests' bounds and on every history mutant of the checker (the liveness ones on the graph),
the same states, transitions, depth, rules, goals and verdict, trace included. The reference
judges no launch's rows: a write-set mutant (its bug is in the rows alone) is compared with the
launch judge off, and must then explore exactly what the reference does. A broken successor
function is told apart."""

import pytest

from slotwarden.verification.abstract import STEP_PROPERTIES, actions
from slotwarden.verification.abstract.world import RUNNING
from slotwarden.verification.checker import reference, search
from slotwarden.verification.checker.bounds import TEST_BOUNDS
from slotwarden.verification.checker.search import check
from slotwarden.verification.checker.liveness import Graph
from slotwarden.verification.mutants.history import LIVENESS_MUTANTS, MUTANTS


def _seen(r) -> tuple:
    v = r.violation
    verdict = None if v is None else (v.property, v.message, v.trace, v.loop)
    return r.states, r.transitions, r.max_depth, r.complete, r.rules, r.goals, verdict


def _same(bounds, policy=None, live: bool = False) -> bool:
    options = (lambda: {"graph": Graph()}) if live else dict
    ours, theirs = check(bounds, policy, **options()), reference.check(bounds, policy, **options())
    return _seen(ours) == _seen(theirs)


@pytest.mark.parametrize("bounds", [b for b in TEST_BOUNDS if not b.drafts], ids=str)  # it predates windows
def test_the_correct_scheduler_explores_what_the_reference_explores(bounds):
    assert _same(bounds)


def test_speculative_windows_are_what_the_reference_does_not_explore():
    bounds = next(b for b in TEST_BOUNDS if b.drafts)
    assert not _same(bounds) and _same(bounds._replace(drafts=0))


def _rows_only(m) -> bool:
    return set(m.checker_catch) <= set(STEP_PROPERTIES)


@pytest.mark.parametrize(
    "mutant", [m for m in MUTANTS if m.policy is not None and not _rows_only(m)], ids=lambda m: m.name
)
def test_every_history_mutant_gets_the_reference_verdict(mutant):
    assert _same(mutant.bounds, mutant.policy())


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.policy is not None and _rows_only(m)], ids=lambda m: m.name)
def test_every_write_set_mutant_with_the_launch_judge_off_explores_what_the_reference_does(mutant, monkeypatch):
    assert check(mutant.bounds, mutant.policy()).violation.property in mutant.checker_catch
    monkeypatch.setattr(search, "judge_launch", lambda world, policy: None)
    assert _same(mutant.bounds, mutant.policy())


@pytest.mark.parametrize("mutant", LIVENESS_MUTANTS, ids=lambda m: m.name)
def test_every_liveness_mutant_gets_the_reference_lasso(mutant):
    assert _same(mutant.bounds, mutant.policy(), live=True)


def test_a_successor_function_that_drops_an_action_is_told_apart(monkeypatch):
    # the broken variant: a running request can no longer be retracted (in the checker only;
    # the reference keeps its own successor function)
    running = tuple(a for a in actions._BY_PHASE[RUNNING] if a[0] != "retract")
    monkeypatch.setitem(actions._BY_PHASE, RUNNING, running)
    assert not _same(TEST_BOUNDS[1])
