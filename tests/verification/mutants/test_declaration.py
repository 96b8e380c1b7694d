"""Every single-rule mutant of the declaration is killed, or listed as equivalent with a reason;
the wrong declarations that once passed every proof are killed by the fast checks, which the
quick run runs too. (The whole stage runs in tests/verification/test_verify_modes.py, through the CLI.)"""

import dataclasses

import pytest

from slotwarden.model.declaration import RETURN, Rule, declare
from slotwarden.model.lifecycle import EVENTS, LIFECYCLE, RULES, STATES
from slotwarden.model.vocabulary import Event, Relation, State
from slotwarden.verification.mutants import declaration as D
from slotwarden.verification.mutants import fast_checks as F
from slotwarden.verification.mutants import search_checks as S
from slotwarden.verification.abstract import Bounds
from slotwarden.verification.checker.search import check

SMALL = (Bounds(slots=1, requests=2, sessions=1),)


def changed(source, event, **change):
    return tuple(dataclasses.replace(r, **change) if (r.source, r.event) == (source, event) else r for r in RULES)


def added(source, event, by, dest, like):
    base = next(r for r in RULES if (r.source, r.event) == like)
    return RULES + (Rule(source, event, by, dest, base.effect),)


WRONG = {
    # a session closes its slot while it is lent to a running turn; the fence then frees it under the turn
    "close while lent": (
        added(State.LENT_RUNNING, Event.CLOSE, Relation.OWNER, State.RELEASED, (State.PARKED, Event.CLOSE)),
        "borrow_safe",
    ),
    # any session lends a parked slot it does not own
    "lend by any session": (changed(State.PARKED, Event.LEND, by=Relation.NONE), "authority"),
    # any request finishes a running slot it does not own
    "finish by any request": (changed(State.RUNNING, Event.FINISH, by=Relation.NONE), "authority"),
    # the request keeps its handle after PARK (the effect does not hand the slot over)
    "handle kept after park": (changed(State.RUNNING, Event.PARK, effect=RETURN), "handles_follow"),
    # the cache evicts a node that readers hold locked (SGLang #27038, LMDeploy #4700)
    "evict while locked": (changed(State.CACHED, Event.EVICT, by=Relation.PINNED), "evict_unlocked"),
    # a request locks a node whose write is not fenced yet (SGLang #30986, vLLM #56525)
    "lock unpublished": (
        added(State.CACHING, Event.LOCK, Relation.NONE, State.CACHING, (State.CACHED, Event.LOCK)),
        "reads_published",
    ),
    # a candidate that never ran donates its slot to the cache
    "insert a candidate": (
        added(State.TAKEN, Event.INSERT, Relation.OWNER, State.CACHING, (State.RUNNING, Event.INSERT)),
        "parks_what_ran",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_declaration_is_killed_by_the_fast_checks(name):
    rules, prop = WRONG[name]
    kill = D.judge(D.Mutant(name, rules), SMALL)
    assert kill.killed_by == "moves", kill
    assert prop in kill.detail.split(":")[0], kill


@pytest.mark.parametrize("name", list(WRONG))
def test_the_stage_fails_when_the_declaration_itself_is_wrong(name):
    rules, prop = WRONG[name]
    found = F.baseline_check(declare(name, STATES, EVENTS, rules))
    assert prop in found.split(":")[0].split(", "), found


def test_the_same_wrong_declarations_are_mutants_of_the_stage():
    made = {m.name for m in D.mutants()}
    for name in (
        "PARKED --CLOSE [OWNER]: also from LENT_RUNNING",
        "PARKED --LEND [OWNER]: by NONE",
        "RUNNING --FINISH [OWNER]: by NONE",
        "RUNNING --PARK [OWNER]: owner from KEEP",
        "CACHED --EVICT [OWNER]: by PINNED",
        "CACHED --LOCK [NONE]: also from CACHING",
        "RUNNING --INSERT [OWNER]: also from TAKEN",
    ):
        assert name in made


def test_the_declaration_as_written_passes_the_fast_checks():
    assert F.move_check(LIFECYCLE) == "" and F.shutdown_check(LIFECYCLE) == ""
    assert F.pool_check(LIFECYCLE, ((State.RUNNING, Event.FINISH),)) == ""


def test_a_dropped_rule_the_scheduler_needs_is_killed_by_the_checker_through_the_mutant():
    rules = tuple(r for r in RULES if (r.source, r.event) != (State.RUNNING, Event.FINISH))
    kill = D.judge(D.Mutant("no finish", rules), SMALL)
    assert kill.killed_by == "checker" and kill.detail.startswith("legal"), kill
    # the hook is undone: the checker sees the declaration again
    assert check(SMALL[0]).violation is None


def test_declared_as_points_the_checker_at_the_mutant_and_back():
    lent_rollback_frees = declare(
        "lent rollback frees", STATES, EVENTS, changed(State.LENT, Event.ROLLBACK, dest=State.FREE)
    )
    with S.declared_as(lent_rollback_frees):
        assert S.checker_check(lent_rollback_frees, (Bounds(slots=1, requests=3, sessions=1),)) != ""
    assert S.checker_check(LIFECYCLE, (Bounds(slots=1, requests=3, sessions=1),)) == ""


def test_an_unlisted_survivor_and_a_wrongly_listed_mutant_fail_the_stage(monkeypatch):
    survivor = "RUNNING --PARK [OWNER]: fence from CLEAR"
    killed = "RUNNING --FINISH [OWNER]: by NONE"
    monkeypatch.setattr(D, "EQUIVALENT", {killed: "claimed equivalent"})
    result = D.run_stage(SMALL, names={survivor, killed})
    assert not result.ok
    assert result.unlisted == (survivor,) and result.wrongly_listed == (killed,)


def test_the_pool_check_flags_a_freed_slot_that_names_its_owner():
    keep_owner = changed(
        State.TAKEN,
        Event.ROLLBACK,
        effect=next(r for r in RULES if (r.source, r.event) == (State.TAKEN, Event.ROLLBACK)).effect._replace(
            owner=RETURN.owner
        ),
    )
    wrong = declare("rollback keeps the owner", STATES, EVENTS, keep_owner)
    assert F.pool_check(wrong, ((State.TAKEN, Event.ROLLBACK),)).startswith("conserved: ROLLBACK")


def test_the_thorough_stage_kills_a_survivor_crosshair_does_not_confirm(monkeypatch):
    # CrossHair itself is shown failing on wrong declarations in tests/model/test_proofs.py; here its
    # verdicts are stood in for, to check how the stage reads them
    from slotwarden.verification import crosshair_proofs as C

    def verdict(name, lifecycle, timeout):
        bad = name == "borrow_safe"
        return C.ProofResult(
            name, "", "POST_FAIL" if bad else "CONFIRMED", 0.0, "false when calling ..." if bad else ""
        )

    monkeypatch.setattr(C, "prove", verdict)
    assert S.crosshair_check(LIFECYCLE, 1.0) == "borrow_safe: POST_FAIL false when calling ..."
    monkeypatch.setattr(C, "prove", lambda name, lifecycle, timeout: C.ProofResult(name, "", "CONFIRMED", 0.0, ""))
    assert S.crosshair_check(LIFECYCLE, 1.0) == ""


CACHE_KILLED_BY_THE_CHECKER = {  # no one-move property can tell them apart; the checker's cache worlds can
    "CACHED --LOCK [NONE]: readers from KEEP": "locks_match",  # a lock the count misses (SGLang #27147)
    "CACHED --LOCK [NONE]: readers from CLEAR": "locks_match",
    "CACHED --LOCK [READER]: readers from KEEP": "locks_match",
    "CACHED --LOCK [NONE]: dropped": "legal",  # nobody may read a cached slot: a match is refused
    "CACHED --LOCK [READER]: dropped": "legal",  # a second reader is refused
}


def test_the_cache_mutants_no_move_property_sees_are_killed_by_the_checker():
    cache_bounds = tuple(b for b in S.CHECKER_BOUNDS if b.nodes)
    result = D.run_stage(cache_bounds, names=set(CACHE_KILLED_BY_THE_CHECKER))
    assert result.ok and not (set(CACHE_KILLED_BY_THE_CHECKER) & set(D.EQUIVALENT))
    for k in result.kills:
        assert k.killed_by == "checker" and k.detail.startswith(CACHE_KILLED_BY_THE_CHECKER[k.mutant]), k
    # without the cache bounds they survive: the checker needs worlds that run the cache
    blind = D.run_stage(SMALL, names=set(CACHE_KILLED_BY_THE_CHECKER))
    assert set(blind.unlisted) == set(CACHE_KILLED_BY_THE_CHECKER)


def test_the_checker_searches_again_only_for_a_mutant_whose_steps_differ(monkeypatch):
    """The checker's search on the declaration records its steps; a mutant that gives each of
    them the same outcome is judged by that search, any other is searched again, and the
    comparison is what kills: with it broken, a mutant only the checker kills survives."""
    cache_bounds = tuple(b for b in S.CHECKER_BOUNDS if b.nodes)
    equivalent, killed = "RUNNING --PARK [OWNER]: fence from CLEAR", "CACHED --LOCK [NONE]: dropped"
    searched = []
    real = S._run_checker
    monkeypatch.setattr(
        S, "_run_checker", lambda lifecycle, bounds: searched.append(lifecycle.name) or real(lifecycle, bounds)
    )
    monkeypatch.setattr(S, "_SEARCHES", {})
    result = D.run_stage(cache_bounds, names={equivalent, killed})
    assert result.ok and {k.mutant: k.killed_by for k in result.kills} == {equivalent: "", killed: "checker"}
    assert searched == [LIFECYCLE.name, killed]  # the declaration once, then only the mutant whose steps differ
    monkeypatch.setattr(S, "_same_steps", lambda lifecycle, steps: True)
    assert D.run_stage(cache_bounds, names={killed}).unlisted == (killed,)
