"""Every bug of the history, injected, is caught: by the exhaustive checker with the right
property and a short trace, and by the Hypothesis scheduler machine, where the runtime raises
at the call that makes the illegal move (or, for a slot never released, at the idle audit).
A bug that makes only legal moves and corrupts the state's numbers (SGLang #40252) is beyond
the checker's model: the continuity machine catches it."""

from dataclasses import replace

import pytest

from slotwarden.verification.machines.speculative import hunter as machine_hunter
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.checker.search import check
from slotwarden.verification.mutants.history import MUTANTS
from slotwarden.verification.machines.continuity import ContinuityMachine, continuation
from slotwarden.verification.machines import machine_for
from slotwarden.model.vocabulary import Actor
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.verification.machines import MODEL

EXPECTED = {  # mutant -> (checker property, where the runtime catches it)
    "lent_rollback_frees": ("legal", "IllegalMove"),
    "rollback_frees_admitted": ("legal", "IllegalMove"),
    "rollback_frees_admitted_turn": ("legal", "IllegalMove"),
    "close_leaks": ("no_orphans", "AuditFailed"),
    "stale_handle_after_park": ("handles_match", "IllegalMove"),
    "sentinel_freed": ("legal", "BadSlotId"),
    "abort_leaks": ("no_orphans", "AuditFailed"),
    "early_fence": ("in_flight_not_free", "FenceError"),
    "queued_turn_abort_bricks": ("deadlock", "AssertionError"),
    "abort_pins_lent_slot": ("no_orphans", "AssertionError"),
    "rejected_turn_clears_live": ("no_orphans", "AuditFailed"),
    "overlength_abort_restores": ("legal", "IllegalCopy"),
    "retract_keeps_partial_turn": (None, "AssertionError"),  # the checker's model holds no state
    # the step's write set (the checker's model holds no index): refused at launch
    "pad_stale_tail": ("pads_to_pad", "IllegalStep"),
    "minus_one_pad": ("pads_to_pad", "IllegalStep"),
    "row_bound_state": ("writes_held", "IllegalStep"),
    "wrong_seed_slot": ("reads_held", "IllegalStep"),
    "stale_row_mapping": ("writes_held", "IllegalStep"),
    "reused_slot_not_zeroed": ("reads_filled", "IllegalStep"),
    # the prefix cache (the checker's halves on bounds with cache nodes)
    "tombstone_lock_skipped": ("locks_match", "IllegalCopy"),
    "cow_unlock_over_decrements": ("evict_unlocked", "IllegalMove"),
    "cow_published_before_copy": ("reads_published", "IllegalMove"),
    "match_leaks_on_queue_abort": ("locks_match", "IllegalMove"),
    "evict_ignores_pin": ("legal", "IllegalMove"),
    "publish_at_schedule": ("reads_published", "FenceError"),
}
CACHE = {name for name in list(EXPECTED)[-6:]}
SCRIPTED = {
    "queued_turn_abort_bricks",
    "abort_pins_lent_slot",
    "rejected_turn_clears_live",
    "overlength_abort_restores",
    "retract_keeps_partial_turn",
}
"""Their paths (an abort of a queued or lent turn at the right moment) are rare in the machine's
random workloads, or their machine costs more than a test should (the continuity machine, which
shrinks slowly: verify's mutant stage runs it): scripted scenarios below show the runtime
catching each."""


def test_every_row_of_the_bug_table_has_a_mutant():
    assert set(EXPECTED) == {m.name for m in MUTANTS}
    assert all(issubclass(m.cls, Scheduler) and m.cls is not Scheduler for m in MUTANTS)
    for m in MUTANTS:  # each names the catch it must get, and the expected one is among them
        assert m.runtime_catch and EXPECTED[m.name][1] in m.runtime_catch, m.name
        if m.name in CACHE:  # hunted with the cache on, checked on bounds with cache nodes
            assert m.needs.get("prefix_cache") and m.bounds.nodes, m.name
        if m.policy is None:  # invisible to the checker: the continuity machine or the launch check catches it
            assert EXPECTED[m.name][0] is None and not m.checker_catch, m.name
            assert m.machine == "continuity" or m.runtime_catch == ("IllegalStep",), m.name
        else:
            assert m.checker_catch and EXPECTED[m.name][0] in m.checker_catch, m.name


def test_a_catch_for_another_reason_does_not_count():
    m = {m.name: m for m in MUTANTS}["lent_rollback_frees"]
    assert m.caught_for_the_right_reason("legal", "IllegalMove: LENT --FINISH") == (True, True)
    assert m.caught_for_the_right_reason("no_orphans", "StepFailed: the forward pass raised") == (False, False)
    assert m.caught_for_the_right_reason(None, "") == (False, False)


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.policy is not None], ids=lambda m: m.name)
def test_the_checker_catches_it(mutant):
    result = check(mutant.bounds, mutant.policy())
    assert result.violation is not None
    assert result.violation.property == EXPECTED[mutant.name][0]
    assert 1 <= len(result.violation.trace) <= 11  # a lent turn in the running batch needs two turns


RARE: dict = {}  # caught by verify's default run (its seed), but not at every seed within this budget


def _runtime_case(m):
    mark = pytest.mark.xfail(reason=RARE[m.name], strict=False) if m.name in RARE else ()
    return pytest.param(m, id=m.name, marks=mark)


@pytest.mark.parametrize("mutant", [_runtime_case(m) for m in MUTANTS if m.name not in SCRIPTED | CACHE])
def test_the_runtime_catches_it_under_hypothesis(mutant):
    hunter = machine_hunter(mutant.machine)
    result = run_machine(mutant.name, hunter(mutant.cls, **mutant.needs), Budget(500, 30), seed=0)
    assert not result.passed, f"{mutant.name} escaped {result.examples} examples"
    assert result.error.split(":")[0] in mutant.runtime_catch, result.error  # the expected catch
    assert "state = " in result.trace and (
        "state.submit" in result.trace or "state.turn_burst" in result.trace
    )  # runnable steps


def test_the_unmutated_scheduler_passes_the_same_campaign():
    for overlap in (False, True):
        result = run_machine("clean", machine_for(Scheduler, overlap=overlap), Budget(60, 25))
        assert result.passed, result.error + "\n" + result.trace


def _bricked(sched):  # a session turn waits forever: the abort never ended its session's turn
    sid = sched.open_session()
    first = sched.submit([1], 1, session=sid)
    sched.submit([2], 1, session=sid)
    sched.abort(first)
    sched.run()
    stuck = [r.rid for r in sched.requests.values() if not r.done]
    assert not stuck, f"idle, yet requests {stuck} were never run"


def _pinned(sched):  # an aborted lent turn keeps its slot
    sid = sched.open_session()
    sched.submit([1, 2], 1, session=sid)
    sched.run()  # the first turn parks its slot in the session
    rid = sched.submit([3], 3, session=sid)
    sched.step()  # the second turn runs on the lent slot
    assert sched.requests[rid].lent
    sched.abort(rid)
    held = sched.pool.ledger.held_by(Actor.request(rid)).tolist()
    assert held == [], f"request {rid} is done, yet the pool says it holds {held}"


def _rejected(sched):  # a queued turn aborted while the live turn runs
    sid = sched.open_session()
    sched.submit([1, 2], 2, session=sid)
    sched.step()  # the live turn runs
    queued = sched.submit([3], 1, session=sid)
    sched.abort(queued)
    sched.submit([4], 1, session=sid)
    sched.run()
    sched.close_session(sid)
    sched.run()


def _overlength(sched):  # a waiting turn aborted while its session holds a parked slot
    sid = sched.open_session()
    sched.submit([1, 2], 1, session=sid)
    sched.run()
    rid = sched.submit([3], 1, session=sid)
    sched.abort(rid)
    sched.close_session(sid)
    sched.run()


def _retracted(sched):  # a session turn on its lent slot retracted for a seat, then recomputed
    sched.config = replace(sched.config, max_running=1, retract_after=1, token_budget=4, chunk_size=2)
    sid = sched.open_session()
    first = sched.submit([1, 2], 2, session=sid)
    done = sched.run(50)
    turn = sched.submit([4, 5, 9, 30], 6, session=sid)
    sched.step()  # the turn runs on the lent slot
    sched.submit([3, 7], 3)  # starves for the one seat, and retracts the turn
    done.update(sched.run(100))
    assert sched.counters.retractions
    context = [1, 2] + list(done[first].output) + [4, 5, 9, 30]
    want = continuation(context, list(done[turn].output))
    assert list(done[turn].output) == want, f"the turn generated {done[turn].output}, its transcript gives {want}"


SCRIPTS = {
    "queued_turn_abort_bricks": _bricked,
    "abort_pins_lent_slot": _pinned,
    "rejected_turn_clears_live": _rejected,
    "overlength_abort_restores": _overlength,
    "retract_keeps_partial_turn": _retracted,
}


@pytest.mark.parametrize("name", sorted(SCRIPTED))
def test_the_runtime_catches_it_in_a_scripted_scenario(name):
    mutant = {m.name: m for m in MUTANTS}[name]
    SCRIPTS[name](build(MODEL, slots=2))  # the correct scheduler: no error
    with pytest.raises(Exception) as caught:
        SCRIPTS[name](build(MODEL, slots=2, cls=mutant.cls))
    assert caught.type.__name__ in mutant.runtime_catch, f"{caught.type.__name__}: {caught.value}"


def test_verify_flags_a_catch_for_the_wrong_reason(monkeypatch):
    from slotwarden.verification.verify import jobs as main
    from slotwarden.verification.machines.campaign import Budget, CampaignResult

    mutant = {m.name: m for m in MUTANTS}["sentinel_freed"]
    crash = CampaignResult("x", False, 0.1, 3, "StepFailed: the forward pass raised", "invariant", "state.step()")
    monkeypatch.setattr(main, "run_machine", lambda *a, **k: crash)
    row = main._mutant(mutant, Budget(1, 1), 0)
    assert not row.ok and "WRONG REASON StepFailed" in row.summary and "checker: legal" in row.summary
    right = crash._replace(error="BadSlotId: slot -1")
    monkeypatch.setattr(main, "run_machine", lambda *a, **k: right)
    assert main._mutant(mutant, Budget(1, 1), 0).ok


def test_verify_hunts_a_state_bug_with_the_continuity_machine(monkeypatch):
    from slotwarden.verification.verify import jobs as main
    from slotwarden.verification.machines.campaign import CampaignResult

    mutant = {m.name: m for m in MUTANTS}["retract_keeps_partial_turn"]
    hunted = []
    found = CampaignResult("x", False, 0.1, 3, "AssertionError: request 1 generated", "invariant", "state.step()")

    def fake_run(name, machine, *a, **k):
        hunted.append(machine)
        return found

    monkeypatch.setattr(main, "run_machine", fake_run)
    row = main._mutant(mutant, Budget(1, 1), 0)
    assert issubclass(hunted[0], ContinuityMachine) and row.ok
    assert "checker: n/a" in row.summary and "continuity invariant" in row.summary
    monkeypatch.setattr(main, "run_machine", lambda *a, **k: found._replace(passed=True, error="", caught_by=""))
    assert not main._mutant(mutant, Budget(1, 1), 0).ok  # escaped: not caught


def _cached(cls, **settings):
    return build(MODEL, cls=cls, prefix_cache=True, **{"slots": 3, **settings})


def _donated(sched, prompt=(1, 2, 3), new=2):
    """Run `prompt` to its end (its slot is donated); the follow-up prompt that matches it."""
    rid = sched.submit(list(prompt), new)
    out = {}
    while rid not in out:
        out.update((r.rid, r) for r in sched.step().finished)
    return list(prompt) + list(out[rid].output) + [4]


def _follow_up(cls):  # a follow-up copies the donated prefix, and its step is fenced
    sched = _cached(cls)
    sched.submit(_donated(sched), 2)
    sched.run()


def _published_early(cls):  # a follow-up scheduled while the donation's step is in flight
    sched = _cached(cls, overlap=True)
    sched.submit([5], 12)  # keeps a step in flight while the donation waits for its fence
    sched.submit(_donated(sched), 2)
    sched.run()


def _rolled_back(cls):  # a matched candidate rolled back, then matching again
    sched = _cached(cls, token_budget=4, chunk_size=4)
    follow = _donated(sched) + [4, 4]
    sched.submit([5, 6, 7], 1)  # takes 3 of the step's 4 tokens: the follow-up does not fit
    sched.submit(follow, 1)
    sched.run()


def _evicted_under_copy(cls):  # a candidate short of a slot while the follow-up copies
    sched = _cached(cls)
    sched.submit([5], 30)  # runs throughout, on its own slot
    follow = _donated(sched)
    sched.submit(follow, 1)
    sched.submit([6], 1)  # no slot free: the cache must make room, but not from the locked node
    sched.run()


def _scheduled_after_donation(cls):  # a step launched while the donation waits for its fence
    sched = _cached(cls, overlap=True)
    sched.submit([5], 4)
    sched.submit([1, 2, 3], 1)
    sched.run()


CACHE_SCRIPTS = {
    "tombstone_lock_skipped": _follow_up,
    "cow_unlock_over_decrements": _follow_up,
    "cow_published_before_copy": _published_early,
    "match_leaks_on_queue_abort": _rolled_back,
    "evict_ignores_pin": _evicted_under_copy,
    "publish_at_schedule": _scheduled_after_donation,
}


@pytest.mark.parametrize("name", sorted(CACHE_SCRIPTS))
def test_the_runtime_catches_each_cache_mutant_in_a_scripted_scenario(name):
    mutant = {m.name: m for m in MUTANTS}[name]
    CACHE_SCRIPTS[name](Scheduler)  # the correct scheduler: no error
    with pytest.raises(Exception) as caught:
        CACHE_SCRIPTS[name](mutant.cls)
    assert caught.type.__name__ == EXPECTED[name][1], f"{caught.type.__name__}: {caught.value}"


def test_the_cache_mutants_are_caught_by_verify_for_the_right_reason():
    """verify's mutant row for each prefix-cache mutant (no shrinking here): hunted by the
    cached scheduler machine, whose follow-ups share donated prefixes, and caught with an
    expected error."""
    from slotwarden.verification.verify import jobs as main

    assert CACHE == set(CACHE_SCRIPTS)
    for name in sorted(CACHE):
        mutant = {m.name: m for m in MUTANTS}[name]
        row = main._mutant(mutant, main.LEVELS["default"]["mutant"], 0, shrink=False)  # verify's budget
        assert row.ok, row.summary
        assert "hypothesis: " + EXPECTED[name][1] in row.summary, row.summary


def test_the_cached_machine_passes_the_correct_scheduler():
    """The hunt of the cache mutants, on the correct scheduler, finds nothing."""
    for overlap in (False, True):
        m = machine_for(Scheduler, prefix_cache=True, overlap=overlap)
        result = run_machine("clean", m, Budget(30, 25), seed=0)
        assert result.passed, result.error + "\n" + result.trace


def test_the_cache_mutants_bounds_are_clean_under_the_correct_policy():
    # the checker's catch comes from the bug: the same bounds pass with the correct scheduler
    cache = [m for m in MUTANTS if m.name in CACHE]
    assert len(cache) == 6 and all(m.bounds.nodes for m in cache)
    for bounds in {m.bounds for m in cache}:
        assert check(bounds).ok, bounds


def test_verify_judges_a_mutant_without_a_runtime_variant_by_the_checker():
    from slotwarden.verification.verify import jobs as main
    from slotwarden.verification.abstract import Policy

    mutant = {m.name: m for m in MUTANTS}["evict_ignores_pin"]._replace(cls=None, runtime_catch=())
    row = main._mutant(mutant, Budget(1, 1), 0)
    assert row.ok and "checker: legal" in row.summary and "hypothesis: n/a" in row.summary
    assert not main._mutant(mutant._replace(policy=Policy), Budget(1, 1), 0).ok  # a checker miss fails it
