"""A bounded exhaustive model checker: breadth-first over the abstract scheduler (`abstract.py`).

Every reachable world of a `Bounds` is visited once, up to a renaming of request, session and
slot ids (`symmetry.py`: worlds are stored as compact canonical keys, never as objects: the visited
set holds the keys, each level of the search a list of them with the position of each one's
parent, and a world is decoded from its key only while its level is expanded). In each one every state property holds (`abstract.state_fault`), every slot
move of every enabled action keeps the per-transition properties and is legal in the declared
lifecycle (`abstract.move_fault`; an `IllegalMove` or `BadSlotId` is the violation "legal"), and
a world that is not final has an enabled action (no deadlock). The first violation stops the
search; because the search is breadth-first, its trace is a shortest one from the initial world
(replayed from the initial world, so every line is a real action).

The search also records which declared rules fired and which `sometimes` goals it reached
(`GOALS`: rare situations the state space must contain, stateright style). `coverage(results)`
fails unless, over a run, every rule fired (but those in `UNREACHABLE`, each with its reason)
and every goal was reached: a state space that never reaches a rule proves nothing about it.
Reachable-state counts are pinned (verification/checker/pins.py), as stateright does; `verify` compares
each bounds' counts with its pin.

No partial-order reduction: an abort or a close is enabled in nearly every world and conflicts
with every other action of its request or session, and nearly every action changes what the
properties read (slots, handles, steps in flight), so sound ample sets would be the whole
enabled set almost everywhere. Large bounds are made affordable by the renaming, the compact
keys, and checking bounds in parallel (`check_all(workers=2)`).

    >>> from slotwarden.verification.checker.search import check
    >>> from slotwarden.verification.abstract import Bounds
    >>> check(Bounds(slots=1, requests=2, sessions=1)).violation is None
    True
"""

from __future__ import annotations

import time
from array import array
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, NamedTuple

from slotwarden.model.declaration import Lifecycle, relation_of
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import MAX_READERS, Event, Relation, State

from slotwarden.verification.abstract import (
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
from slotwarden.verification.checker.symmetry import Codec


class Violation(NamedTuple):
    property: str  # a key of abstract.PROPERTIES
    message: str
    trace: tuple  # tuple[str, ...]: the actions from the initial world, each with its slot moves

    def __str__(self) -> str:
        steps = "\n".join(f"  {i + 1:2d}. {a}" for i, a in enumerate(self.trace))
        return f"{self.property}: {self.message}\n{steps}" if steps else f"{self.property}: {self.message}"


class Goal(NamedTuple):
    """A `sometimes` goal: some transition (the world before, the outcome) must satisfy it.
    `cache`: it speaks of the prefix cache's slots, so only bounds with cache nodes can reach
    it (the others never judge it)."""

    name: str
    text: str
    reached: Callable[[World, Outcome], bool]
    cache: bool = False


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


def _two_readers(world: World, out: Outcome) -> bool:
    return any(s.state is State.CACHED and s.readers >= 2 for s in out.world.pool.slots)


def _evicted_under_pressure(world: World, out: Outcome) -> bool:
    return not world.pool.free and any(m.event is Event.EVICT and m.before.state is State.CACHED for m in out.moves)


def _published_at_fence(world: World, out: Outcome) -> bool:
    return any(m.event is Event.FENCE and m.after.state is State.CACHED for m in out.moves)


def _copy_source_locked(world: World, out: Outcome) -> bool:
    slots = out.world.pool.slots
    return any(slots[i - 1].readers > 0 for st in out.world.steps for _, i in st.copies)


def _aborted_write_dropped(world: World, out: Outcome) -> bool:
    return any(m.event is Event.EVICT and m.before.state is State.CACHING for m in out.moves)


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
    Goal("two_readers", "a cached slot is locked by two readers at once", _two_readers, cache=True),
    Goal(
        "evicted_under_pressure",
        "the cache evicts a published node while no slot is free",
        _evicted_under_pressure,
        cache=True,
    ),
    Goal(
        "published_at_fence",
        "a donated slot is published at the fence of the step that wrote it",
        _published_at_fence,
        cache=True,
    ),
    Goal(
        "copy_source_locked",
        "a copy-on-write's source stays locked while the step performing the copy is in flight",
        _copy_source_locked,
        cache=True,
    ),
    Goal(
        "aborted_write_dropped",
        "a donated slot whose write was never fenced is dropped unread",
        _aborted_write_dropped,
        cache=True,
    ),
)

UNREACHABLE = {  # (source, event, relation) -> why no action of the abstract scheduler fires it
    (State.CACHED, Event.UNLOCK, Relation.FULL): (
        f"an unlock at the lock bound needs {MAX_READERS} readers of one slot, and the checker's worlds hold "
        "a few requests; the one-move proofs (lock_counted, locks_match) judge it"
    ),
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
    # overlapped: four slots under a two-turn session and a plain request (s100 = r0, r1; r2 plain),
    # and the five-request, two-session workload on three slots (s100 = r0; s101 = r1; r2..r4 plain)
    Bounds(slots=4, requests=3, sessions=1, overlap=True),
    Bounds(slots=3, requests=5, sessions=2, overlap=True, turns=1),
    # the prefix cache: plain requests donating, matching (several readers of one node, copies
    # in flight) and evicting on 2-3 slots, overlapped, and beside a two-turn session
    Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2),
    Bounds(slots=3, requests=3, sessions=0, overlap=True, nodes=1),
    Bounds(slots=3, requests=4, sessions=0, overlap=True, nodes=2),
    Bounds(slots=2, requests=4, sessions=1, overlap=True, nodes=1),
    Bounds(slots=3, requests=3, sessions=1, overlap=True, nodes=1),
    Bounds(slots=3, requests=4, sessions=1, overlap=False, nodes=2),  # two donors beside a two-turn session
    # four slots, five requests, two sessions, overlapped: two one-turn sessions and three plain
    # requests (s100 = r0; s101 = r1; r2..r4 plain), and two two-turn sessions and a plain request
    # (s100 = r0, r1; s101 = r2, r3; r4 plain): the largest bounds of the default run
    Bounds(slots=4, requests=5, sessions=2, overlap=True, turns=1),
    Bounds(slots=4, requests=5, sessions=2, overlap=True),
)
"""The default run (the reachable-state counts are pinned in verification/checker/pins.py)."""

THOROUGH_BOUNDS = DEFAULT_BOUNDS + (
    Bounds(slots=4, requests=5, sessions=2, overlap=False),  # s100 = r0, r1; s101 = r2, r3; r4 plain
    Bounds(slots=3, requests=4, sessions=1, overlap=True, nodes=2),  # two plain donors beside a session
    Bounds(slots=4, requests=6, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4, r5 plain
    Bounds(slots=5, requests=5, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4 plain
    Bounds(slots=4, requests=6, sessions=2, overlap=True, turns=1),  # s100 = r0; s101 = r1; r2..r5 plain
    Bounds(slots=5, requests=6, sessions=2, overlap=True, turns=1),  # s100 = r0; s101 = r1; r2..r5 plain
    Bounds(slots=5, requests=6, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4, r5 plain
    Bounds(slots=4, requests=7, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4..r6 plain
    Bounds(slots=4, requests=5, sessions=1, overlap=True, nodes=2),  # three plain donors beside a session
    Bounds(slots=4, requests=6, sessions=1, overlap=True, nodes=2),  # four plain donors beside a session
    Bounds(slots=5, requests=5, sessions=1, overlap=True, nodes=2),  # three plain donors, five slots
    Bounds(slots=5, requests=7, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4..r6 plain
    Bounds(slots=4, requests=6, sessions=2, overlap=True, nodes=2),  # two plain donors beside two sessions
)
"""`verify --thorough`: the default bounds and larger ones (four and five slots, up to seven
requests: two sessions of one or two turns and up to four plain requests, overlap off and on;
the prefix cache on three to five slots beside one or two sessions with two to four plain
donors)."""

TEST_BOUNDS = (
    Bounds(slots=1, requests=2, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=True),
    Bounds(slots=1, requests=4, sessions=2, overlap=False),
    Bounds(slots=3, requests=3, sessions=0, overlap=False, nodes=1),  # two readers of one node
    Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2),  # an unfenced write dropped
)
"""Small bounds for the tests (about a second in all); their state counts are pinned in verification/checker/pins.py."""


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
    on_level: Callable[[int, int], None] | None = None,
) -> CheckResult:
    """Explore every world reachable under `bounds` with `policy` (default: the correct one),
    breadth-first, one world per class of renamed worlds (`symmetry=False`, or a policy that is
    not `symmetric`: every world); stop at the first violation (a shortest trace) or after
    `max_states` worlds. `lifecycle` names the rules for the coverage record; `on_level(depth,
    states)` is called as each level of the search ends (progress of a long run).

    Memory: the visited set holds one compact key per world (`symmetry.Codec`); each level of
    the search is a list of those keys with the position of each one's parent in the level
    before (4 bytes), enough to rebuild a trace. A world is decoded from its key when its level
    is expanded, so no world object outlives its expansion."""
    policy = Policy() if policy is None else policy
    start = time.perf_counter()
    root = initial(bounds)
    codec = Codec(root)
    keyof = codec.key if symmetry and getattr(policy, "symmetric", True) else codec.plain_key
    root_key = keyof(root)
    seen = {root_key}
    levels: list = [([root_key], array("I", [0]))]  # per depth: the keys, each one's parent's position
    transitions = 0
    judged: dict = {}  # a slot move -> (the property it breaks or None, the rule that made it)
    fired: set = set()
    pending = [g for g in GOALS if bounds.nodes or not g.cache]
    reached: set = set()
    name = getattr(policy, "name", type(policy).__name__)
    overlap = bounds.overlap

    def done(violation: Violation | None, complete: bool) -> CheckResult:
        forget()
        _RULES.clear()
        depth = len(levels) - 1 if levels[-1][0] else len(levels) - 2
        return CheckResult(
            bounds, len(seen), transitions, depth, time.perf_counter() - start, violation, complete, name,
            frozenset(fired), frozenset(reached),
        )  # fmt: skip

    def found(prop: str, depth: int, pos: int, last: Outcome | None = None) -> CheckResult:
        return done(_violation(prop, _path(levels, depth, pos), last, policy, bounds, keyof), False)

    def shortest(prop: str, depth: int, pos: int, last: Outcome | None, k: int) -> CheckResult:
        # every violation met while expanding one level has a trace one action longer than the
        # level, except a deadlock of a world of the level itself: look for one among the rest
        keys = levels[depth - 1][0] if last is None else levels[depth][0]
        base = depth - 1 if last is None else depth
        for later in range(k + 1, len(keys)):
            world = codec.world(keys[later])
            if not is_final(world) and next(successors(world, policy, overlap), None) is None:
                return found("deadlock", base, later)
        return found(prop, depth, pos, last)

    if state_fault(root):
        return found(state_fault(root)[0], 0, 0)
    depth = 0
    while levels[depth][0]:
        level_keys: list = []
        parents = array("I")
        levels.append((level_keys, parents))
        for k, wkey in enumerate(levels[depth][0]):
            world = codec.world(wkey)
            enabled = False
            for out in successors(world, policy, overlap):
                enabled = True
                transitions += 1
                if out.error is not None:
                    return shortest("legal", depth, k, out, k)
                for m in out.moves:
                    try:
                        bad, rule = judged[m]
                    except KeyError:
                        bad = move_fault(m)
                        rule = None if bad else _rule_of(m, lifecycle)
                        judged[m] = bad, rule
                    if bad:
                        return shortest(bad[0], depth, k, out, k)
                    fired.add(rule)
                if pending:
                    for goal in [g for g in pending if g.reached(world, out)]:
                        pending.remove(goal)
                        reached.add(goal.name)
                nxt = out.world
                nkey = keyof(nxt)
                if nkey in seen:
                    continue
                seen.add(nkey)
                level_keys.append(nkey)
                parents.append(k)
                fault = state_fault(nxt)
                if fault:
                    return shortest(fault[0], depth + 1, len(level_keys) - 1, None, k)
                if max_states is not None and len(seen) >= max_states:
                    return done(None, False)
            if not enabled and not is_final(world):
                return found("deadlock", depth, k)
        depth += 1
        if on_level is not None:
            on_level(depth, len(seen))
    return done(None, True)


def _path(levels: list, depth: int, pos: int) -> list:
    """The keys from the initial world to the world at `pos` of level `depth`."""
    path = []
    while depth >= 0:
        keys, parents = levels[depth]
        path.append(keys[pos])
        pos = parents[pos]
        depth -= 1
    path.reverse()
    return path


def check_all(
    configs: Iterable[Bounds] = DEFAULT_BOUNDS, policy: Policy | None = None, on_result=None, workers: int = 1
) -> list:
    """`check` each bounds; `on_result(result)` is called as each one ends, in the order of
    `configs`. With `workers` > 1 the bounds are checked in that many processes at once (each
    bounds is one search in one process; the last bounds, usually the largest, start first)."""
    configs = list(configs)
    if workers <= 1 or len(configs) <= 1:
        results = []
        for bounds in configs:
            results.append(check(bounds, policy))
            if on_result is not None:
                on_result(results[-1])
        return results
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(check, b, policy) for b in reversed(configs)][::-1]
        results = []
        for future in futures:
            results.append(future.result())
            if on_result is not None:
                on_result(results[-1])
    return results


def _stuck_message(world: World) -> str:
    return f"no action is enabled in {show_world(world)}"


def _violation(prop: str, path: list, last: Outcome | None, policy: Policy, bounds: Bounds, keyof) -> Violation:
    """The violation `prop` met at the world stored as `path[-1]` (or by its outcome `last`),
    with its trace: `path` (the keys from the initial world) replayed forward from the initial
    world (each step: the first enabled action whose next world has the next key), so every
    line names the ids of the world it really happened in."""
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
    """`python -m slotwarden.verification.checker.search`: the default run, one line per bounds."""
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
