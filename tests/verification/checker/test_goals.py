"""The goals' prefilter (`goals.may_reach`): a goal's `kinds` and `events` are only what its own
predicate requires, so judging a goal only where they hold reaches what judging it everywhere
does. Checked on every transition of the tests' bounds; a goal given events its predicate does
not require is caught."""

import functools

from slotwarden.model.vocabulary import Event
from slotwarden.verification.abstract import Policy, initial, successors
from slotwarden.verification.checker.bounds import TEST_BOUNDS
from slotwarden.verification.checker.goals import GOALS, may_reach
from slotwarden.verification.checker.symmetry import Codec


@functools.cache
def _transitions(bounds) -> tuple:
    """Every (world, outcome) the checker judges goals on in `bounds`: the enabled actions of
    one world of each class of renamed worlds."""
    root = initial(bounds)
    codec = Codec(root)
    seen, todo, found = {codec.key(root)}, [root], []
    while todo:
        world = todo.pop()
        for out in successors(world, _POLICY, bounds.overlap):
            if out.world is None:
                continue
            found.append((world, out))
            key = codec.key(out.world)
            if key not in seen:
                seen.add(key)
                todo.append(codec.world(key))
    return tuple(found)


_POLICY = Policy()


def _misses(goals, bounds_list) -> set:
    """The goals some transition reaches that `may_reach` would not judge there."""
    missed = set()
    for bounds in bounds_list:
        for world, out in _transitions(bounds):
            events = frozenset(m.event for m in out.moves)
            for g in goals:
                if g.reached(world, out) and not may_reach(g, out, events):
                    missed.add(g.name)
    return missed


_SMALL = TEST_BOUNDS


def test_every_goal_is_judged_wherever_its_predicate_may_hold():
    reached = {g.name for b in _SMALL for w, out in _transitions(b) for g in GOALS if g.reached(w, out)}
    assert reached == {g.name for g in GOALS}  # every goal is met somewhere: a miss could show
    assert _misses(GOALS, _SMALL) == set()


def test_a_goal_given_an_event_its_predicate_does_not_require_is_caught():
    # the broken variant: "a lent slot is rolled back" declared to need a RETRACT among the moves
    broken = [g._replace(events=frozenset({Event.RETRACT})) if g.name == "lent_rolled_back" else g for g in GOALS]
    assert _misses(broken, _SMALL) == {"lent_rolled_back"}
