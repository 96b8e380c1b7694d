"""The search's bookkeeping in C (`_search.Absorb`) against its Python loop: the same states,
transitions, depth, verdict, rules and goals on the tests' bounds and on default ones, with the
liveness graph the same liveness verdict, and the same result, trace included, under
declaration mutants (each broken property met both ways).
Where the Python has anything to say, `Absorb.world` leaves every table as it found it."""

from array import array

import pytest

from slotwarden.verification.abstract import Bounds, Policy, initial, judge_launch
from slotwarden.verification.abstract.successors_compiled import compiled_successors
from slotwarden.verification.checker import liveness, search
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS, TEST_BOUNDS
from slotwarden.verification.checker.liveness import check_live
from slotwarden.verification.checker.symmetry import Codec
from slotwarden.verification.mutants import search_checks
from worlds import mutant_lifecycles

pytest.importorskip("slotwarden.verification.checker._search")
pytest.importorskip("slotwarden.verification.abstract._successors")

Absorb = search.Absorb


def _result(r) -> tuple:
    return r.states, r.transitions, r.max_depth, r.violation, r.complete, r.rules, r.goals


def _python(monkeypatch) -> None:
    monkeypatch.setattr(search, "Absorb", None)
    monkeypatch.setattr(search, "compiled_successors", lambda *a: None)


@pytest.mark.parametrize("bounds", TEST_BOUNDS + DEFAULT_BOUNDS[10:21], ids=str)
def test_the_search_in_c_finds_what_the_python_finds(bounds, monkeypatch):
    ours = search.check(bounds)
    _python(monkeypatch)
    assert _result(ours) == _result(search.check(bounds))


@pytest.mark.parametrize("bounds", TEST_BOUNDS + DEFAULT_BOUNDS[12:15] + DEFAULT_BOUNDS[16:21], ids=str)
def test_with_the_liveness_graph_the_search_in_c_finds_what_the_python_finds(bounds, monkeypatch):
    ours = check_live(bounds)
    _python(monkeypatch)
    python = check_live(bounds)
    assert _result(ours) == _result(python) and _live(ours) == _live(python)


def _live(r):
    return r.liveness._replace(seconds=0)


def test_a_graph_whose_edge_changed_gets_its_edges_in_python(monkeypatch):
    bounds = TEST_BOUNDS[2]
    ours = check_live(bounds)
    monkeypatch.setattr(liveness.Graph, "edge", lambda self, kind, key: liveness.EDGE(self, "submit", key))
    assert liveness.Graph().absorbed() is None
    assert _live(check_live(bounds)) != _live(ours)  # every edge a submit: the Python added them


def _results(lifecycles) -> list:
    out = []
    for lifecycle in lifecycles:
        with search_checks.declared_as(lifecycle):
            for b in search_checks._bounds():
                try:
                    r = search.check(b)
                except search.CheckerFault:  # a mutant the symmetry reduction cannot replay (either way)
                    out.append("no replay")
                    break
                out.append(_result(r))
                if r.violation is not None:
                    break
    return out


def test_under_declaration_mutants_the_search_in_c_reports_what_the_python_reports(monkeypatch):
    lifecycles = mutant_lifecycles()
    ours = _results(lifecycles)
    broken = {r[3].property for r in ours if r != "no replay" and r[3] is not None}
    assert {"conserved", "exclusive", "legal", "session_kept"} <= broken  # worlds, moves, refusals
    _python(monkeypatch)
    assert ours == _results(lifecycles)


def _bound(bounds: Bounds, breaking=lambda world: ()):
    """An Absorb over a fresh search's tables (judging worlds with `breaking`), and the root's outcomes."""
    root = initial(bounds)
    codec = Codec(root)
    seen, judged, fired = {codec.key(root)}, {}, set()
    outcomes = compiled_successors(root, Policy(), bounds.overlap)(root)
    for out in outcomes:
        for m in out.moves:
            judged[m] = (), ("rule", m.event)
    absorb = Absorb(seen, judged, fired, codec.key, codec._compiled, breaking, judge_launch, Policy())
    return absorb, root, outcomes, (seen, judged, fired)


def test_a_world_with_nothing_to_say_is_absorbed_whole():
    absorb, root, outcomes, (seen, _, fired) = _bound(TEST_BOUNDS[3])
    level, parents = [], array("I")
    assert absorb.world(outcomes, root, 0, level, parents) == len(outcomes) > 1
    assert len(level) == len(parents) == len(seen) - 1 > 1 and fired


@pytest.mark.parametrize("case", ["a world breaks", "a move not judged", "a move judged bad", "no outcome"])
def test_where_the_python_has_something_to_say_every_table_is_left_as_it_was(case):
    calls = []

    def breaking(world):  # the second new world breaks a property
        calls.append(world)
        return ("conserved", "broken") if len(calls) == 2 and case == "a world breaks" else ()

    absorb, root, outcomes, (seen, judged, fired) = _bound(TEST_BOUNDS[3], breaking)
    last = next(o for o in reversed(outcomes) if o.moves).moves[0]
    if case == "a move not judged":
        judged.pop(last)
    if case == "a move judged bad":
        judged[last] = ("exclusive", "bad"), None
    if case == "no outcome":
        outcomes = []
    before = set(seen), dict(judged), set(fired)
    level, parents = [b"x"], array("I", [7])
    assert absorb.world(outcomes, root, 0, level, parents) is None
    assert (set(seen), dict(judged), set(fired)) == before
    assert level == [b"x"] and list(parents) == [7]
    assert len(calls) == (2 if case == "a world breaks" else 0)
