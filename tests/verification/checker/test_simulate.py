"""Simulation: seeded random walks over bounds too large to search (8 slots, 16 requests, 4
sessions, the prefix cache) pass with the correct scheduler, report walks, states and depth,
repeat with their seed, and catch a safety bug of the history within a small budget."""

from slotwarden.verification.abstract import Bounds, Policy
from slotwarden.verification.checker.simulate import SIMULATION_BOUNDS, simulate
from slotwarden.verification.mutants.history import MUTANTS
from slotwarden.verification.verify import jobs as verify

BIG = SIMULATION_BOUNDS[0]


def test_the_simulated_bounds_are_beyond_the_search():
    assert BIG.slots >= 8 and BIG.requests >= 16 and BIG.sessions >= 4 and BIG.nodes > 0 and BIG.overlap


def test_the_correct_scheduler_walks_clean_and_the_counts_are_reported():
    r = simulate(BIG, seconds=60, walks=4, seed=1)
    assert r.ok and r.walks == 4 and r.steps >= r.max_depth > 16 and r.states > r.max_depth
    assert "4 walks" in str(r) and "states seen" in str(r) and str(r).endswith("ok")


def test_a_seed_repeats_its_walks():
    a, b = simulate(BIG, seconds=60, walks=3, seed=7), simulate(BIG, seconds=60, walks=3, seed=7)
    assert (a.steps, a.states, a.max_depth) == (b.steps, b.states, b.max_depth)


def test_the_time_budget_ends_the_run():
    r = simulate(Bounds(slots=2, requests=3, sessions=1), seconds=0.05)
    assert r.ok and r.walks >= 1 and r.seconds < 5


def test_it_catches_a_safety_bug_of_the_history_on_the_big_bounds():
    early = {m.name: m for m in MUTANTS}["early_fence"]  # overlap: a release freed before its step's fence
    r = simulate(BIG, early.policy(), seconds=60, walks=40, seed=0)
    assert r.violation is not None and r.violation.property in early.checker_catch, r
    assert len(r.violation.trace) >= 1 and not r.ok
    clean = simulate(BIG, Policy(), seconds=60, walks=r.walks, seed=0)  # the same walks' budget, no bug: clean
    assert clean.ok


def test_verify_runs_it_in_thorough_and_on_request():
    names = lambda level, walks=None: [n for s, n, _ in verify.jobs(level, 1.0, 0, None, walks) if s == "simulation"]  # noqa: E731
    assert names(verify.LEVELS["thorough"]) == [str(BIG)]
    assert names(verify.LEVELS["default"]) == [] and names(verify.LEVELS["quick"], 2.0) == [str(BIG)]
    row = verify._simulation(Bounds(slots=2, requests=3, sessions=1), 0.2, None)
    assert row.ok and row.stage == "simulation" and row.detail["walks"] >= 1 and row.detail["violation"] is None


def test_the_cli_takes_a_simulation_budget():
    import pytest

    from slotwarden.cli.commands import build_parser
    from slotwarden.verification.usage import UsageError

    assert build_parser().parse_args(["verify", "--simulate", "2.5"]).simulate == 2.5
    assert build_parser().parse_args(["verify"]).simulate is None
    with pytest.raises(UsageError, match="--simulate: want a positive number of seconds"):
        build_parser().parse_args(["verify", "--simulate", "0"])
