"""Liveness: the correct scheduler meets every `eventually` property under weak fairness with its
pinned counts unchanged; each liveness bug of the history (a livelock, two hangs) fails the
property it names, with a lasso; the fairness choices are load-bearing; the quick tests that
dismiss components agree with the exact judge; the component finder agrees with brute force."""

import random

import pytest

from slotwarden.verification.abstract import Bounds, Policy
from slotwarden.verification.checker import liveness
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS, TEST_BOUNDS
from slotwarden.verification.checker.cycles import components, tarjan
from slotwarden.verification.checker.liveness import LIVENESS, check_live
from slotwarden.verification.checker.pins import pin_of
from slotwarden.verification.mutants.history import LIVENESS_MUTANTS

EXPECTED = {  # mutant -> the liveness property it breaks
    "requeue_near_ceiling": "admitted_ends",
    "release_awaits_lost_notice": "released_freed",
    "turn_awaits_lost_handoff": "waiting_admitted",
}


@pytest.mark.parametrize("bounds", TEST_BOUNDS, ids=str)
def test_the_correct_scheduler_meets_every_liveness_property(bounds):
    result = check_live(bounds)
    assert result.ok and result.liveness.violation is None
    assert (result.states, result.transitions) == pin_of(bounds)  # keeping the graph changes no count
    assert result.liveness.states == result.states and result.liveness.sccs > 0  # it had cycles to judge


def test_each_property_has_its_mutant():
    assert set(EXPECTED.values()) == set(LIVENESS)
    assert {m.name for m in LIVENESS_MUTANTS} == set(EXPECTED)
    assert all(m.checker_catch == (EXPECTED[m.name],) for m in LIVENESS_MUTANTS)


@pytest.mark.parametrize("mutant", LIVENESS_MUTANTS, ids=lambda m: m.name)
def test_each_liveness_mutant_fails_its_property_with_a_lasso(mutant):
    plain = check_live(mutant.bounds, Policy())
    assert plain.ok  # the same bounds pass with the correct scheduler: the catch is the bug's
    result = check_live(mutant.bounds, mutant.policy())
    v = result.violation
    assert v is not None and v.property == EXPECTED[mutant.name], v
    assert result.complete and v.loop is not None and 1 <= v.loop <= len(v.trace) <= 12
    assert ("from here on, forever" if v.loop < len(v.trace) else "stays there") in str(v)


def test_the_livelock_is_a_real_cycle_of_requeues():
    m = {m.name: m for m in LIVENESS_MUTANTS}["requeue_near_ceiling"]
    v = check_live(m.bounds, m.policy()).violation
    cycle = v.trace[v.loop :]
    kinds = [line.split("(")[0].split(":")[0] for line in cycle]
    assert sorted(kinds) == ["admit", "complete", "launch", "take"], cycle  # from the running request, round
    assert any("RETRACT" in line for line in cycle if line.startswith("complete")), cycle


def test_the_hangs_are_stutters_with_nothing_fair_enabled():
    for name in ("release_awaits_lost_notice", "turn_awaits_lost_handoff"):
        m = {m.name: m for m in LIVENESS_MUTANTS}[name]
        v = check_live(m.bounds, m.policy()).violation
        assert v.loop == len(v.trace) and "stays forever" in v.message, name


def test_preemption_forever_fails_without_the_pressure_assumption(monkeypatch):
    # with retract and rollback allowed in a fair cycle, a request preempted and re-taken forever
    # never ends: the assumption that pressure passes is what the correct scheduler's proof uses
    monkeypatch.setattr(liveness, "FAILURES", frozenset())
    v = check_live(Bounds(slots=1, requests=2, sessions=0)).violation
    assert v is not None and v.property == "admitted_ends" and "retract" in " ".join(v.trace[v.loop :])


def test_a_request_running_forever_fails_without_fair_finish(monkeypatch):
    monkeypatch.setattr(liveness, "FAIR", liveness.FAIR - {liveness.CODE["finish"]})
    v = check_live(Bounds(slots=1, requests=2, sessions=0)).violation
    assert v is not None and v.property == "admitted_ends"


@pytest.mark.parametrize("policy", [Policy] + [m.policy for m in LIVENESS_MUTANTS], ids=lambda p: p.__name__)
def test_the_quick_dismissal_agrees_with_the_exact_judge(policy, monkeypatch):
    bounds = Bounds(slots=2, requests=3, sessions=1, overlap=True)
    quick = check_live(bounds, policy())
    monkeypatch.setattr(liveness, "_surely_unfair", lambda *args: False)  # every component judged exactly
    exact = check_live(bounds, policy())
    assert exact.liveness.lifted > 0 and (exact.violation is not None or exact.liveness.lifted == exact.liveness.sccs)
    prop = lambda r: r.violation and r.violation.property  # noqa: E731
    assert prop(quick) == prop(exact)


def _brute(succ):
    n = len(succ)
    reach = [set() for _ in range(n)]
    for v in range(n):
        todo = list(succ[v])
        while todo:
            w = todo.pop()
            if w not in reach[v]:
                reach[v].add(w)
                todo += succ[w]
    comps = {frozenset(w for w in range(n) if w in reach[v] and v in reach[w]) for v in range(n) if v in reach[v]}
    return sorted(sorted(c) for c in comps)


@pytest.mark.parametrize("seed", range(30))
def test_components_agree_with_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randrange(1, 14)
    succ = [[rng.randrange(n) for _ in range(rng.randrange(3))] for _ in range(n)]
    assert sorted(components(succ)) == _brute(succ)


def test_tarjan_leaves_out_the_skipped_kinds():
    # 0 -> 1 -> 0, the edge back of kind 1 (skipped): no cycle; 2 -> 2 of kind 0: a cycle
    comp, cyclic = tarjan(3, [0, 1, 2, 3], [1, 0, 2], bytes([0, 1, 0]), frozenset({1}))
    assert cyclic == {comp[2]} and comp[0] != comp[1]


def test_an_exhaustive_row_of_verify_judges_liveness(monkeypatch):
    from slotwarden.verification.verify import jobs as verify

    row, result = verify.checker_job(TEST_BOUNDS[0])
    assert row.ok and "liveness:" in row.summary and result.liveness.violation is None
    monkeypatch.setattr(liveness, "FAILURES", frozenset())  # preemption forever counts: the row must fail
    row, _ = verify.checker_job(TEST_BOUNDS[0])
    assert not row.ok and "VIOLATION admitted_ends" in row.summary


def test_the_largest_thorough_bounds_keep_no_graph(monkeypatch):
    from slotwarden.verification.checker.bounds import THOROUGH_BOUNDS

    big = [b for b in THOROUGH_BOUNDS if pin_of(b)[0] > liveness.GRAPH_LIMIT]
    assert big and all(pin_of(b)[0] <= liveness.GRAPH_LIMIT for b in TEST_BOUNDS + DEFAULT_BOUNDS)
    seen = []
    monkeypatch.setattr(liveness, "check", lambda b, p, **o: seen.append(o.get("graph")))
    check_live(big[0]), check_live(TEST_BOUNDS[0])
    assert seen[0] is None and isinstance(seen[1], liveness.Graph)
