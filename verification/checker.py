"""A bounded exhaustive model checker: breadth-first over the abstract scheduler (`abstract.py`).

Every reachable world of a `Bounds` is visited once, up to a renaming of request and session
ids (`symmetry.py`: worlds are stored as compact canonical keys, never as objects; only the
frontier is kept). In each one every state property holds (`abstract.state_fault`), every slot
move of every enabled action keeps the per-transition properties and is legal in the declared
lifecycle (`abstract.move_fault`; an `IllegalMove` or `BadSlotId` is the violation "legal"), and
a world that is not final has an enabled action (no deadlock). The first violation stops the
search; because the search is breadth-first, its trace is a shortest one from the initial world
(replayed from the initial world, so every line is a real action).

The search also records which declared rules fired and which `sometimes` goals it reached
(`GOALS`: rare situations the state space must contain, stateright style). `coverage(results)`
fails unless, over a run, every rule fired (but those in `UNREACHABLE`, each with its reason)
and every goal was reached: a state space that never reaches a rule proves nothing about it.
Reachable-state counts are pinned in the tests, as stateright does.

    >>> from slotwarden.verification.checker import check
    >>> from slotwarden.verification.abstract import Bounds
    >>> check(Bounds(slots=1, requests=2, sessions=1)).violation is None
    True
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, NamedTuple

from slotwarden.model.declaration import Lifecycle, relation_of
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import Event, Group, State

from .abstract import (
    CLOSING,
    Bounds,
    Move,
    Outcome,
    Policy,
    World,
    describe,
    forget,
    initial,
    is_final,
    move_fault,
    show_world,
    state_fault,
    successors,
)
from .symmetry import key, plain_key, useful


class Violation(NamedTuple):
    property: str  # a key of abstract.PROPERTIES
    message: str
    trace: tuple  # tuple[str, ...]: the actions from the initial world, each with its slot moves

    def __str__(self) -> str:
        steps = "\n".join(f"  {i + 1:2d}. {a}" for i, a in enumerate(self.trace))
        return f"{self.property}: {self.message}\n{steps}" if steps else f"{self.property}: {self.message}"


class Goal(NamedTuple):
    """A `sometimes` goal: some transition (the world before, the outcome) must satisfy it."""

    name: str
    text: str
    reached: Callable[[World, Outcome], bool]


def _lent_rolled_back(world: World, out: Outcome) -> bool:
    return any(m.event is Event.ROLLBACK and m.before.state is State.LENT for m in out.moves)


def _release_waits_under_a_step(world: World, out: Outcome) -> bool:
    nxt = out.world
    return bool(nxt.steps) and any(s.state is State.RELEASED and s.fence > 0 for s in nxt.pool.slots)


def _lent_retracted(world: World, out: Outcome) -> bool:
    return any(m.event is Event.RETRACT and m.before.state is State.LENT_RUNNING for m in out.moves)


def _close_deferred(world: World, out: Outcome) -> bool:
    return out.action.kind == "close" and any(s.status == CLOSING for s in out.world.sessions)


def _deferred_close_runs(world: World, out: Outcome) -> bool:
    return out.action.kind != "close" and any(m.event is Event.CLOSE for m in out.moves)


GOALS = (
    Goal("lent_rolled_back", "a lent slot is rolled back to its session", _lent_rolled_back),
    Goal(
        "lent_retracted", "a running session turn is retracted: its lent slot goes back to its session", _lent_retracted
    ),
    Goal(
        "release_waits_for_fence",
        "a released slot waits for the fence of a step in flight",
        _release_waits_under_a_step,
    ),
    Goal("close_deferred", "a session is closed while its turn is in flight: the close is deferred", _close_deferred),
    Goal(
        "deferred_close_runs", "a deferred close releases the session's slot when its turn ends", _deferred_close_runs
    ),
)

UNREACHABLE = {  # (source, event, relation) -> why no action of the abstract scheduler fires it
    (r.source, r.event, r.by): (
        "the abstract scheduler runs no prefix cache yet: nothing donates, locks, unlocks or evicts "
        "a cached slot; the one-move proofs and the declaration mutants judge these rules until it does"
    )
    for r in LIFECYCLE.rules
    if Group.CACHE_OWNED in (LIFECYCLE.spec(r.source).group, LIFECYCLE.spec(r.dest).group)
}


class CheckResult(NamedTuple):
    bounds: Bounds
    states: int  # reachable worlds visited (one per class of renamed worlds)
    transitions: int  # enabled (world, action) pairs explored
    max_depth: int  # the longest shortest path to a visited world
    seconds: float
    violation: Violation | None
    complete: bool = True  # False: stopped at max_states (or by a violation) before exhausting the space
    policy: str = "correct"
    rules: frozenset = frozenset()  # (source, event, relation) of every declared rule that fired
    goals: frozenset = frozenset()  # names of the `GOALS` reached

    @property
    def ok(self) -> bool:
        return self.violation is None and self.complete

    def __str__(self) -> str:
        verdict = "ok" if self.ok else ("VIOLATION " + self.violation.property if self.violation else "INCOMPLETE")
        return (
            f"{str(self.bounds):<44} {self.states:>10,} states {self.transitions:>11,} transitions "
            f"depth {self.max_depth:>3} {self.seconds:7.2f} s  {verdict}"
        )


class Coverage(NamedTuple):
    """Rules and goals over a run: what was never reached, and what was listed unreachable but fired."""

    missed_rules: tuple  # tuple[str, ...]: rules no bounds fired, not listed in UNREACHABLE
    stale_unreachable: tuple  # rules listed in UNREACHABLE that fired after all
    missed_goals: tuple  # names of the GOALS no bounds reached
    fired: int  # how many declared rules fired
    declared: int

    @property
    def ok(self) -> bool:
        return not (self.missed_rules or self.stale_unreachable or self.missed_goals)

    def __str__(self) -> str:
        text = f"{self.fired}/{self.declared} rules fired, {len(UNREACHABLE)} listed unreachable; "
        text += f"{len(GOALS) - len(self.missed_goals)}/{len(GOALS)} goals reached"
        if self.missed_rules:
            text += "; never fired: " + ", ".join(self.missed_rules)
        if self.stale_unreachable:
            text += "; listed unreachable but fired: " + ", ".join(self.stale_unreachable)
        if self.missed_goals:
            text += "; goals never reached: " + ", ".join(self.missed_goals)
        return text


def coverage(
    results: Iterable[CheckResult], lifecycle: Lifecycle = LIFECYCLE, unreachable: dict = UNREACHABLE
) -> Coverage:
    """Judge the rules fired and goals reached over `results` (the bounds of one run)."""
    results = list(results)
    fired = frozenset().union(*(r.rules for r in results))
    reached = frozenset().union(*(r.goals for r in results))
    keys = [(r.source, r.event, r.by) for r in lifecycle.rules]
    missed = tuple(_show_rule(k) for k in keys if k not in fired and k not in unreachable)
    stale = tuple(_show_rule(k) for k in unreachable if k in fired)
    goals = tuple(g.name for g in GOALS if g.name not in reached)
    return Coverage(missed, stale, goals, sum(k in fired for k in keys), len(keys))


def _show_rule(k: tuple) -> str:
    return f"{k[0].name} --{k[1].name} [{k[2].name}]"


DEFAULT_BOUNDS = (
    # a plain request and a two-turn session (s100 = r0, r1; r2 plain): slots 1..3, overlap off/on
    Bounds(slots=1, requests=3, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=False),
    Bounds(slots=3, requests=3, sessions=1, overlap=False),
    Bounds(slots=1, requests=3, sessions=1, overlap=True),
    Bounds(slots=2, requests=3, sessions=1, overlap=True),
    Bounds(slots=3, requests=3, sessions=1, overlap=True),
    # two sessions competing for slots (s100 = r0, r1; s101 = r2; r3 plain)
    Bounds(slots=1, requests=4, sessions=2, overlap=False),
    Bounds(slots=2, requests=4, sessions=2, overlap=False),
    Bounds(slots=3, requests=4, sessions=2, overlap=False),
    Bounds(slots=1, requests=4, sessions=2, overlap=True),
    Bounds(slots=2, requests=4, sessions=2, overlap=True),
    # two plain requests and a two-turn session on three slots, overlapped (s100 = r0, r1; r2, r3 plain)
    Bounds(slots=3, requests=4, sessions=1, overlap=True),
    # four slots, two one-turn sessions and three plain requests (s100 = r0; s101 = r1; r2..r4 plain):
    # the renaming of sessions and of plain requests makes it one of the cheaper bounds
    Bounds(slots=4, requests=5, sessions=2, overlap=False, turns=1),
)
"""The default run (the reachable-state counts are pinned in tests/test_checker.py)."""

THOROUGH_BOUNDS = DEFAULT_BOUNDS + (
    Bounds(slots=4, requests=5, sessions=2, overlap=False),  # s100 = r0, r1; s101 = r2, r3; r4 plain
    Bounds(slots=3, requests=5, sessions=2, overlap=True, turns=1),
)
"""`verify --thorough`: the default bounds and two larger ones (five requests, two sessions)."""

TEST_BOUNDS = (
    Bounds(slots=1, requests=2, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=True),
    Bounds(slots=1, requests=4, sessions=2, overlap=False),
)
"""Small bounds for the tests (about a second in all); their state counts are pinned there."""


def _rule_of(move: Move, lifecycle: Lifecycle) -> tuple | None:
    """The (source, event, relation) of the declared rule that made `move`, or None."""
    try:
        return _RULES[move]
    except KeyError:
        pass
    b = move.before
    rel = relation_of(lifecycle.spec(b.state), b, move.actor)
    rule = lifecycle.rule(b.state, move.event, rel)
    _RULES[move] = found = None if rule is None else (rule.source, rule.event, rule.by)
    return found


_RULES: dict = {}


def check(
    bounds: Bounds,
    policy: Policy | None = None,
    max_states: int | None = None,
    symmetry: bool = True,
    lifecycle: Lifecycle = LIFECYCLE,
) -> CheckResult:
    """Explore every world reachable under `bounds` with `policy` (default: the correct one),
    breadth-first, one world per class of renamed worlds (`symmetry=False`, or a policy that is
    not `symmetric`: every world); stop at the first violation (a shortest trace) or after
    `max_states` worlds. `lifecycle` names the rules for the coverage record."""
    policy = Policy() if policy is None else policy
    start = time.perf_counter()
    root = initial(bounds)
    keyof = key if symmetry and getattr(policy, "symmetric", True) and useful(root) else plain_key
    root_key = keyof(root)
    parents: dict = {root_key: None}  # key -> the key of the world it was first reached from
    frontier = [(root, root_key)]
    max_depth = transitions = 0
    fired: set = set()
    pending = list(GOALS)
    reached: set = set()
    name = getattr(policy, "name", type(policy).__name__)
    overlap = bounds.overlap

    def done(violation: Violation | None, complete: bool) -> CheckResult:
        forget()
        _RULES.clear()
        return CheckResult(
            bounds, len(parents), transitions, max_depth, time.perf_counter() - start, violation, complete, name,
            frozenset(fired), frozenset(reached),
        )  # fmt: skip

    def found(prop: str, wkey, last: Outcome | None = None) -> CheckResult:
        return done(_violation(prop, parents, wkey, last, policy, bounds, keyof), False)

    def shortest(prop: str, wkey, last: Outcome | None, rest: list) -> CheckResult:
        # every violation met while expanding one level has a trace one action longer than the
        # level, except a deadlock of a world of the level itself: look for one among the rest
        for later, later_key in rest:
            if not is_final(later) and next(successors(later, policy, overlap), None) is None:
                return found("deadlock", later_key)
        return found(prop, wkey, last)

    if state_fault(root):
        return found(state_fault(root)[0], root_key)
    while frontier:
        level: list = []
        for k, (world, wkey) in enumerate(frontier):
            enabled = False
            for out in successors(world, policy, overlap):
                enabled = True
                transitions += 1
                if out.error is not None:
                    return shortest("legal", wkey, out, frontier[k + 1 :])
                for m in out.moves:
                    bad = move_fault(m)
                    if bad:
                        return shortest(bad[0], wkey, out, frontier[k + 1 :])
                    fired.add(_rule_of(m, lifecycle))
                if pending:
                    for goal in [g for g in pending if g.reached(world, out)]:
                        pending.remove(goal)
                        reached.add(goal.name)
                nxt = out.world
                nkey = keyof(nxt)
                if nkey in parents:
                    continue
                parents[nkey] = wkey
                depth = max_depth + 1
                fault = state_fault(nxt)
                if fault:
                    max_depth = depth
                    return shortest(fault[0], nkey, None, frontier[k + 1 :])
                level.append((nxt, nkey))
                if max_states is not None and len(parents) >= max_states:
                    max_depth = depth
                    return done(None, False)
            if not enabled and not is_final(world):
                return found("deadlock", wkey)
        frontier = level
        if level:
            max_depth += 1
    return done(None, True)


def check_all(configs: Iterable[Bounds] = DEFAULT_BOUNDS, policy: Policy | None = None, on_result=None) -> list:
    """`check` each bounds in turn; `on_result(result)` is called as each one ends."""
    results = []
    for bounds in configs:
        result = check(bounds, policy)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def _stuck_message(world: World) -> str:
    return f"no action is enabled in {show_world(world)}"


def _violation(
    prop: str, parents: dict, wkey, last: Outcome | None, policy: Policy, bounds: Bounds, keyof
) -> Violation:
    """The violation `prop` met at the world stored as `wkey` (or by its outcome `last`), with
    its trace: the path of keys back to the initial world, replayed forward from the initial
    world (each step: the first enabled action whose next world has the next key), so every
    line names the ids of the world it really happened in."""
    path = []
    while wkey is not None:
        path.append(wkey)
        wkey = parents[wkey]
    path.reverse()
    world, lines = initial(bounds), []
    for nkey in path[1:]:
        out = next(
            o for o in successors(world, policy, bounds.overlap) if o.world is not None and keyof(o.world) == nkey
        )
        lines.append(describe(out))
        world = out.world
    if last is None:
        message = _stuck_message(world) if prop == "deadlock" else state_fault(world)[1]
        return Violation(prop, message, tuple(lines))
    for out in successors(world, policy, bounds.overlap):  # the same fault, in the replayed world's names
        if prop == "legal" and out.error is not None:
            return Violation(prop, str(out.error), tuple(lines) + (describe(out),))
        for m in out.moves if out.error is None else ():
            bad = move_fault(m)
            if bad and bad[0] == prop:
                return Violation(prop, bad[1], tuple(lines) + (describe(out),))
    raise AssertionError(f"the violation {prop} did not replay: is the policy symmetric?")


def main() -> int:
    """`python -m slotwarden.verification.checker`: the default run, one line per bounds."""
    total = time.perf_counter()
    results = check_all(DEFAULT_BOUNDS, on_result=lambda r: print(r, flush=True))
    states = sum(r.states for r in results)
    cover = coverage(results)
    ok = all(r.ok for r in results) and cover.ok
    print(f"coverage: {cover}")
    print(f"{states:,} states in {time.perf_counter() - total:.1f} s: " + ("PASS" if ok else "FAIL"))
    for r in results:
        if r.violation is not None:
            print(f"{r.bounds}: {r.violation}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
