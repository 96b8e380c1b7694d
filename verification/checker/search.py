"""A bounded exhaustive model checker: breadth-first over the abstract scheduler (`abstract`).

Every reachable world of a `Bounds` is visited once, up to a renaming of request, session and
slot ids (`symmetry`: the visited set and each level hold compact canonical keys; a world is
decoded only while its level is expanded). In each one every state property holds, every slot
move of every enabled action keeps the per-transition properties and is legal in the declared
lifecycle ("legal": no `IllegalMove` or `BadSlotId`), every launch's rows keep the step's write
set (`judge_launch`), and a world not final has an enabled action (no deadlock). The first
violation stops the search with a shortest trace from the initial world, replayed so that every
line is a real action. Each result records the rules fired and the goals reached (`goals`); its
counts are pinned (`pins`). No partial-order reduction. Where built, the correct policy's
successors and each world's bookkeeping are in C (`successors_compiled`, `_search.Absorb`).
    >>> check(Bounds(slots=1, requests=2, sessions=1)).violation is None
    True
"""

from __future__ import annotations

import gc
import time
from array import array
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, NamedTuple

from slotwarden.model.errors import SlotwardenError
from slotwarden.model.declaration import Lifecycle, relation_of
from slotwarden.model.lifecycle import LIFECYCLE

from slotwarden.verification.abstract import (
    Bounds,
    Move,
    Outcome,
    Policy,
    World,
    describe,
    forget,
    initial,
    is_final,
    judge_launch,
    judge_move,
    show_world,
    judge_world,
    successors,
)
from slotwarden.verification.abstract import actions
from slotwarden.verification.abstract.successors_compiled import compiled_successors
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS
from slotwarden.verification.checker.goals import GOALS, coverage, may_reach
from slotwarden.verification.checker.symmetry import Codec

try:
    from slotwarden.verification.checker._search import Absorb
except ImportError:  # built without a C compiler: the bookkeeping is the Python loop's
    Absorb = None


class CheckerFault(SlotwardenError):
    """The checker contradicts itself: a violation it found does not replay from the initial
    world. A fault of the checker (or of a policy that calls itself symmetric), not of the model."""


class Violation(NamedTuple):
    property: str  # a key of abstract.PROPERTIES
    message: str
    trace: tuple  # tuple[str, ...]: the actions from the initial world, each with its slot moves
    loop: int | None = None  # a liveness lasso: the trace from here on repeats forever (at the end: it stays)

    def __str__(self) -> str:
        steps = [f"  {i + 1:2d}. {a}" for i, a in enumerate(self.trace)]
        if self.loop is not None:
            steps.insert(self.loop, "  -- from here on, forever:" if self.loop < len(steps) else "  -- stays there")
        steps = "\n".join(steps)
        return f"{self.property}: {self.message}\n{steps}" if steps else f"{self.property}: {self.message}"


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
    liveness: object = None  # liveness.Liveness, when the search kept its graph (`liveness.check_live`)

    @property
    def ok(self) -> bool:
        return self.violation is None and self.complete

    def __str__(self) -> str:
        verdict = "ok" if self.ok else ("VIOLATION " + self.violation.property if self.violation else "INCOMPLETE")
        return (
            f"{str(self.bounds):<44} {self.states:>10,} states {self.transitions:>11,} transitions "
            f"depth {self.max_depth:>3} {self.seconds:7.2f} s  {verdict}"
        )


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
    graph=None,
) -> CheckResult:
    """Explore every world reachable under `bounds` with `policy` (default: the correct one),
    breadth-first, one world per class of renamed worlds (`symmetry=False`, or a policy that is
    not `symmetric`: every world); stop at the first violation (a shortest trace) or after
    `max_states` worlds. `lifecycle` names the rules for the coverage record; `on_level(depth,
    states)` is called as each level of the search ends (progress of a long run).

    Memory: the visited set holds one compact key per world (`symmetry.Codec`); each level of
    the search is a list of those keys with the position of each one's parent in the level
    before (4 bytes), enough to rebuild a trace. A world is decoded from its key when its level
    is expanded, so no world object outlives its expansion. A `graph` (`liveness.Graph`) is
    given every world and edge; once the safety properties hold it judges the liveness ones."""
    collecting = gc.isenabled()
    gc.disable()  # the search makes millions of acyclic tuples: the cycle collector only rescans them
    try:
        return _search(bounds, policy, max_states, symmetry, lifecycle, on_level, graph)
    finally:
        if collecting:
            gc.enable()


# No partial-order reduction: nearly every action conflicts with an abort or a close and changes
# what the properties read, so sound ample sets would be almost all.
def _search(bounds, policy, max_states, symmetry, lifecycle, on_level, graph) -> CheckResult:
    policy = Policy() if policy is None else policy
    start = time.perf_counter()
    root = initial(bounds)
    codec = Codec(root)
    keyof = codec.key if symmetry and getattr(policy, "symmetric", True) else codec.plain_key
    root_key = keyof(root)
    restated = successors is actions.successors  # the successors the C restates (not a variant put here)
    in_c = restated and not bounds.drafts  # speculative windows are expanded in Python
    expand = compiled_successors(root, policy, bounds.overlap) if in_c else None  # None: all in Python
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

    absorb = None  # the bookkeeping of a world in C, where nothing stops the search early or watches it
    edges = () if graph is None else getattr(graph, "absorbed", lambda: None)()  # None: edges one by one
    if Absorb is not None and expand is not None and max_states is None and edges is not None:
        compiled = codec._compiled if keyof == codec.key else None  # the key in C, with `keyof` behind it
        absorb = Absorb(seen, judged, fired, keyof, compiled, judge_world, judge_launch, policy, *edges)
    if judge_world(root):
        return found(judge_world(root)[0], 0, 0)
    if graph is not None:
        graph.start(root_key)
    depth = 0
    while levels[depth][0]:
        level_keys: list = []
        parents = array("I")
        levels.append((level_keys, parents))
        for k, wkey in enumerate(levels[depth][0]):
            world = codec.world(wkey)
            if graph is not None:
                graph.open(world)
            enabled = False
            outcomes = None if expand is None else expand(world)  # None: the Python's to expand
            if outcomes is not None and absorb is not None and not pending:
                count = absorb.world(outcomes, world, k, level_keys, parents)  # None: the Python's to do
                if count is not None:
                    transitions += count
                    continue
            for out in successors(world, policy, overlap) if outcomes is None else outcomes:
                enabled = True
                transitions += 1
                if out.error is not None:
                    return shortest("legal", depth, k, out, k)
                if out.action.kind == "launch":
                    bad = judge_launch(world, policy)
                    if bad:
                        return shortest(bad[0], depth, k, out, k)
                for m in out.moves:
                    try:
                        bad, rule = judged[m]
                    except KeyError:
                        bad = judge_move(m)
                        rule = None if bad else _rule_of(m, lifecycle)
                        judged[m] = bad, rule
                    if bad:
                        return shortest(bad[0], depth, k, out, k)
                    fired.add(rule)
                if pending:
                    events = frozenset([m.event for m in out.moves])
                    for goal in [g for g in pending if may_reach(g, out, events) and g.reached(world, out)]:
                        pending.remove(goal)
                        reached.add(goal.name)
                nxt = out.world
                nkey = keyof(nxt)
                if graph is not None:
                    graph.edge(out.action.kind, nkey)
                if nkey in seen:
                    continue
                seen.add(nkey)
                level_keys.append(nkey)
                parents.append(k)
                broken = judge_world(nxt)
                if broken:
                    return shortest(broken[0], depth + 1, len(level_keys) - 1, None, k)
                if max_states is not None and len(seen) >= max_states:
                    return done(None, False)
            if not enabled and not is_final(world):
                return found("deadlock", depth, k)
        depth += 1
        if on_level is not None:
            on_level(depth, len(seen))
    if graph is not None:
        live = graph.judge(codec, keyof, policy, bounds)
        return done(live.violation, True)._replace(liveness=live)
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
        outs = successors(world, policy, bounds.overlap)
        out = next((o for o in outs if o.world is not None and keyof(o.world) == nkey), None)
        if out is None:
            raise CheckerFault(
                f"checker fault: the trace to the violation {prop} did not replay (is the policy symmetric?)"
            )
        lines.append(describe(out))
        world = out.world
    if last is None:
        message = _stuck_message(world) if prop == "deadlock" else judge_world(world)[1]
        return Violation(prop, message, tuple(lines))
    for out in successors(world, policy, bounds.overlap):  # the same broken property, in the replayed world's names
        bad = judge_launch(world, policy) if out.action.kind == "launch" and out.error is None else None
        if bad and bad[0] == prop:
            return Violation(prop, bad[1], tuple(lines) + (describe(out),))
        if prop == "legal" and out.error is not None:
            return Violation(prop, str(out.error), tuple(lines) + (describe(out),))
        for m in out.moves if out.error is None else ():
            bad = judge_move(m)
            if bad and bad[0] == prop:
                return Violation(prop, bad[1], tuple(lines) + (describe(out),))
    raise CheckerFault(f"checker fault: the violation {prop} did not replay (is the policy symmetric?)")


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
