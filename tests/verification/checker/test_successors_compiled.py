"""The successors in C against the Python's: on every reachable world of the codec's bounds and
of two default bounds, the outcomes are the Python's, of the same types part by part, its sets
in the same order; under declaration mutants a world whose move the model refuses is left to
the Python, and every other world still gets the Python's outcomes; a policy that changes a
decision the C restates, a changed action, action table or policy method, or a build without
the extension keeps the Python. A binding handed its facts wrongly is caught."""

import pytest

from slotwarden.model.vocabulary import State
from slotwarden.verification.abstract import Bounds, Policy, actions, initial, successors
from slotwarden.verification.abstract.actions import perform
from slotwarden.verification.abstract import successors_compiled as compiled
from slotwarden.verification.abstract.world import RUNNING
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS
from slotwarden.verification.checker.search import check
from slotwarden.verification.mutants import search_checks
from slotwarden.verification.mutants.history import MUTANTS
from worlds import CODEC_BOUNDS, SPECULATIVE_BOUNDS, mutant_lifecycle, mutant_lifecycles, reachable, same

pytest.importorskip("slotwarden.verification.abstract._successors")

BOUNDS = CODEC_BOUNDS + (DEFAULT_BOUNDS[10], DEFAULT_BOUNDS[14])  # two sessions overlapped; five requests


def mismatches(bounds, worlds, policy=None) -> list:
    """The worlds whose C outcomes are not the Python's (other values, other types, or None)."""
    policy = Policy() if policy is None else policy
    expand = compiled.compiled_successors(initial(bounds), policy, bounds.overlap)
    assert expand is not None
    return [w for w in worlds if not same(expand(w), list(successors(w, policy, bounds.overlap)))]


@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_the_c_outcomes_are_the_pythons_on_every_reachable_world(bounds):
    worlds = reachable(bounds, limit=3000)
    assert len(worlds) > 50 and mismatches(bounds, worlds) == []


def test_a_world_of_speculative_decoding_is_left_to_the_python():
    bounds = SPECULATIVE_BOUNDS[0]
    expand = compiled.compiled_successors(initial(bounds._replace(drafts=0)), Policy(), bounds.overlap)
    worlds = reachable(bounds, limit=400)
    assert any(w.windows for w in worlds)
    assert all(expand(w) is None for w in worlds)  # drafts > 0: none is expanded in C
    plain = [w._replace(drafts=0) for w in worlds if not w.windows and not w.behind]
    assert plain and all(expand(w) is not None for w in plain if not any(r.src for r in w.requests))


def test_under_declaration_mutants_a_refused_move_is_left_to_the_python_and_the_rest_agree():
    refused = agreed = 0
    policy = Policy()
    for lifecycle in mutant_lifecycles():
        with search_checks.declared_as(lifecycle):
            for bounds in (Bounds(slots=2, requests=3, sessions=1), Bounds(slots=2, requests=3, nodes=1, sessions=0)):
                expand = compiled.compiled_successors(initial(bounds), policy, bounds.overlap)
                for w in reachable(bounds, limit=300):
                    ours, python = expand(w), list(successors(w, policy, bounds.overlap))
                    if ours is None:
                        assert any(o.error is not None for o in python)
                        refused += 1
                    else:
                        assert same(ours, python)
                        agreed += 1
    assert refused > 10 and agreed > 1000


def test_a_policy_that_changes_a_restated_decision_keeps_the_python():
    root = initial(DEFAULT_BOUNDS[0])
    kept = [m.name for m in MUTANTS if m.policy and compiled.compiled_successors(root, m.policy(), False) is not None]
    overriding = [m.name for m in MUTANTS if m.policy and any(n in vars(m.policy) for n in compiled.POLICY)]
    assert overriding and not set(kept) & set(overriding)
    assert set(kept) | set(overriding) == {m.name for m in MUTANTS if m.policy}


@pytest.mark.parametrize(
    "change",
    [
        lambda mp: mp.setitem(actions._BY_PHASE, RUNNING, actions._BY_PHASE[RUNNING][:-1]),
        lambda mp: mp.setattr(actions, "_take", lambda world, rid, policy: None),
        lambda mp: mp.setattr(actions._Txn, "leave_steps", lambda self, rid: None),
        lambda mp: mp.setattr(Policy, "can_retract", lambda self, world, r: False),
        lambda mp: mp.setattr(actions, "apply", lambda *a: None),
    ],
    ids=["action table", "action", "transaction", "policy method", "memo"],
)
def test_a_changed_part_of_the_python_keeps_the_python(change, monkeypatch):
    bounds = DEFAULT_BOUNDS[0]
    assert compiled.compiled_successors(initial(bounds), Policy(), bounds.overlap) is not None
    change(monkeypatch)
    assert compiled.compiled_successors(initial(bounds), Policy(), bounds.overlap) is None


def test_without_the_extension_the_search_is_the_pythons_and_finds_the_same(monkeypatch):
    bounds = DEFAULT_BOUNDS[10]
    ours = check(bounds)
    monkeypatch.setattr(compiled, "Successors", None)
    assert compiled.compiled_successors(initial(bounds), Policy(), bounds.overlap) is None
    python = check(bounds)
    assert (ours.states, ours.transitions, ours.max_depth, ours.rules, ours.goals) == (
        python.states, python.transitions, python.max_depth, python.rules, python.goals,
    )  # fmt: skip


@pytest.mark.parametrize(
    "wrong",
    [
        ("EVENTS", ("LEND", "ALLOC") + compiled.EVENTS[2:]),
        ("KINDS", ("take", "submit") + compiled.KINDS[2:]),
    ],
    ids=["events", "kinds"],
)
def test_a_binding_handed_its_facts_wrongly_is_caught(wrong, monkeypatch):
    monkeypatch.setattr(compiled, *wrong)
    bounds = BOUNDS[1]
    assert mismatches(bounds, reachable(bounds, limit=500))


@pytest.mark.parametrize("refilled", [False, True], ids=["asked first", "after the Python refilled the memo"])
def test_answers_remembered_before_the_memo_forgot_them_are_not_given_again(refilled):
    # bound and warmed on the declaration, then asked under a mutant (declared_as forgets the memo),
    # perhaps after the Python has filled the memo tables past their old sizes
    bounds = Bounds(slots=2, requests=3, sessions=1)
    worlds = reachable(bounds, limit=300)
    expand = compiled.compiled_successors(initial(bounds), Policy(), bounds.overlap)
    for w in worlds[:40]:
        expand(w)
    with search_checks.declared_as(mutant_lifecycle("FREE --ALLOC [NONE]: owner from KEEP")):
        if refilled:
            python = [list(successors(w, Policy(), False)) for w in worlds]
        ours = [expand(w) for w in worlds]
        if not refilled:
            python = [list(successors(w, Policy(), False)) for w in worlds]
    assert [w for w, o, p in zip(worlds, ours, python) if o is not None and not same(o, p)] == []


def test_a_launch_of_many_copies_builds_its_sets_in_the_pythons_order():
    # r0..r4 read the node r5 donated on slot 6, launched together: the step's sets hold five items
    # (the default bounds never hold more than four), where a set's order depends on how it was built
    bounds = Bounds(slots=6, requests=6, sessions=0, overlap=True, nodes=1)
    policy, w = Policy(), initial(bounds)
    steps = [("take", rid) for rid in range(5)] + [("take", 5), ("admit", 5), ("launch", None), ("complete", None)]
    steps += [("donate", 5)] + [("rollback", rid) for rid in range(5)]
    for kind, who in steps:
        w = perform(w, policy, kind, who, overlap=True).world
    assert w.pool.slots[5].state is State.CACHED
    for rid in range(5):
        w = perform(w, policy, "match", rid, overlap=True, slot=6).world
        w = perform(w, policy, "admit", rid, overlap=True).world
    expand = compiled.compiled_successors(initial(bounds), policy, True)
    launched = perform(w, policy, "launch", overlap=True).world
    assert len(launched.steps[-1].copies) == 5
    assert same(expand(w), list(successors(w, policy, True)))
    assert same(expand(launched), list(successors(launched, policy, True)))
