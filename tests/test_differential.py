"""The checker's model and the runtime's scheduler agree on slot ownership over the same
workloads; a model that decides differently, or a runtime that makes a move the model never
makes, is reported as a divergence naming the operations that led to it."""

import pytest

from slotwarden.runtime import admission
from slotwarden.verification.differential import Divergence, check_differential, run_workload
from slotwarden.verification.mutants import AbstractCloseLeaks, AbstractLentRollbackFrees


def test_the_model_follows_the_runtime():
    report = check_differential(workloads=40, length=30, seed=3)
    assert report.ok, report.divergence
    assert report.workloads == 40 and report.moves > 200  # the workloads do move slots
    assert not report.unexercised and report.events["LEND"] and report.events["RETRACT"]


def test_a_run_that_never_makes_a_move_is_not_a_pass():
    report = check_differential(workloads=1, length=3, seed=3)
    assert report.divergence is None and report.unexercised and not report.ok


@pytest.mark.parametrize("policy", [AbstractLentRollbackFrees, AbstractCloseLeaks], ids=lambda p: p.__name__)
def test_a_model_that_decides_differently_diverges(policy):
    report = check_differential(workloads=200, length=40, seed=0, policy=policy())
    assert not report.ok and "after" in report.divergence and "operations" in report.divergence


def test_a_runtime_move_the_model_never_makes_diverges(monkeypatch):
    # the runtime retracts a lent session turn (LENT_RUNNING --RETRACT--> PARKED): legal in the
    # lifecycle, never done by the model, so the checker would explore a different scheduler
    def any_victim(sched, exclude):
        lent = [r for r in sched.running if r.lent and r.rid not in exclude]
        return lent[0] if lent else None

    monkeypatch.setattr(admission, "pick_victim", any_victim)
    ops = (("open",), ("turn", 0, 2, 1), ("step", 3), ("turn", 0, 1, 3), ("step", 1), ("submit", 3, 2), ("step", 3))
    cfg = dict(slots=1, overlap=False, token_budget=32, chunk_size=16, max_running=4, retract_after=1)
    with pytest.raises(Divergence, match=r"cannot retract"):
        run_workload(ops, cfg)
    monkeypatch.undo()
    assert run_workload(ops, cfg).followed > 0  # the real scheduler on the same workload agrees
