"""The checker's model and the runtime's scheduler agree on slot ownership over the same
workloads; a model that decides differently, or a runtime that makes a move the model never
makes, is reported as a divergence naming the operations that led to it."""

import pytest

from slotwarden.verification.abstract import Policy
from slotwarden.verification.differential import Divergence, check_differential, run_workload
from slotwarden.verification.mutants.history import AbstractCloseLeaks, AbstractLentRollbackFrees


def test_the_model_follows_the_runtime():
    report = check_differential(workloads=40, length=30, seed=3)
    assert report.ok, report.divergence
    assert report.workloads == 40 and report.moves > 200  # the workloads do move slots
    assert not report.unexercised and report.events["LEND"] and report.events["RETRACT"]
    assert report.events["pad rows"] and report.events["condensed rows"] and report.events["in-flight row"]


def test_a_run_that_never_pads_is_not_a_pass(monkeypatch):
    """The rows' shapes count too: with padding and overlap never drawn, no step has a pad row
    (nor a row kept for a token in flight); the rows still condense."""
    from slotwarden.verification import differential
    from slotwarden.verification.differential import workloads

    drawn = workloads.config
    monkeypatch.setattr(differential, "config", lambda rng: dict(drawn(rng), pad_to_captured=False, overlap=False))
    report = check_differential(workloads=40, length=30, seed=3)
    assert report.divergence is None and report.unexercised == ("pad rows", "in-flight row") and not report.ok
    assert report.events["condensed rows"]


def test_a_run_that_never_makes_a_move_is_not_a_pass():
    report = check_differential(workloads=1, length=3, seed=3)
    assert report.divergence is None and report.unexercised and not report.ok


@pytest.mark.parametrize("policy", [AbstractLentRollbackFrees, AbstractCloseLeaks], ids=lambda p: p.__name__)
def test_a_model_that_decides_differently_diverges(policy):
    report = check_differential(workloads=200, length=40, seed=0, policy=policy())
    assert not report.ok and "after" in report.divergence and "operations" in report.divergence


class RetractsOnlyPlainRequests(Policy):
    """A model that never retracts a session turn."""

    def can_retract(self, world, r):
        return r.session is None


def test_a_runtime_move_the_model_never_makes_diverges():
    # the runtime retracts a lent session turn to free a seat for a starved plain request
    # (LENT_RUNNING --RETRACT--> PARKED): a model that never retracts a turn cannot follow it
    ops = (("open",), ("turn", 0, 2, 1), ("step", 3), ("turn", 0, 1, 3), ("step", 1), ("submit", 3, 2), ("step", 3))
    cfg = dict(slots=2, overlap=False, token_budget=32, chunk_size=16, max_running=1, retract_after=1)
    with pytest.raises(Divergence, match=r"cannot retract"):
        run_workload(ops, cfg, policy=RetractsOnlyPlainRequests())
    pair = run_workload(ops, cfg)  # the checker's model follows the runtime on the same workload
    assert pair.followed > 0 and pair.events["RETRACT"] and pair.sched.counters.retractions


def test_an_action_s_moves_may_be_split_by_another_s():
    """One FINISH of several requests, then the CLOSE of a closed session's turn among them: the
    model's finish of that turn (its FINISH and CLOSE) is followed across the other's FINISH.
    Taking the runtime's next moves in a row instead diverges here."""
    ops = (("open",), ("submit", 2, 3), ("step", 1), ("step", 1), ("open",), ("submit", 5, 3), ("open",))
    ops += (("turn", 2, 2, 1), ("turn", 2, 4, 3), ("step", 3), ("close", 2), ("step", 3))
    cfg = dict(slots=3, overlap=False, token_budget=4, chunk_size=2, max_running=3, retract_after=None)
    pair = run_workload(ops, dict(cfg, pad_to_captured=True))
    assert pair.events["FINISH"] >= 2 and pair.events["CLOSE"] == 1


# -- the prefix cache ----------------------------------------------------------------------------
from slotwarden.verification.differential import runtime_has_cache  # noqa: E402

needs_cache = pytest.mark.skipif(not runtime_has_cache(), reason="the runtime's scheduler has no prefix cache")


@needs_cache
def test_the_model_follows_the_runtime_with_the_prefix_cache():
    report = check_differential(workloads=30, length=30, seed=3, cache=True)
    assert report.ok, report.divergence
    assert all(report.events.get(e) for e in ("INSERT", "LOCK", "UNLOCK", "EVICT")), report.events


class NeverMatches(Policy):
    """A model whose requests never match a cached prefix."""

    def can_match(self, world, r, slot):
        return False


class NeverEvicts(Policy):
    """A model whose cache never evicts."""

    def can_evict(self, world, slot):
        return False


@needs_cache
@pytest.mark.parametrize("policy, why", [(NeverMatches, "cannot match"), (NeverEvicts, "cannot evict")])
def test_a_model_that_cannot_follow_the_cache_diverges(policy, why):
    report = check_differential(workloads=60, length=30, seed=3, policy=policy(), cache=True)
    assert not report.ok and why in report.divergence, report.divergence


def test_a_cache_run_that_makes_no_cache_move_is_not_a_pass():
    from slotwarden.verification.differential import Report

    plain = Report(1, 3, 5, None, {e: 1 for e in ("ALLOC", "ADMIT", "FINISH")}, cache=True)
    assert {"INSERT", "LOCK", "UNLOCK", "EVICT"} <= set(plain.unexercised) and not plain.ok
