"""A bounded exhaustive model checker: breadth-first over the abstract scheduler (`abstract.py`).

Every reachable world of a `Bounds` is visited once. In each one every state property holds
(`abstract.state_fault`), every slot move of every enabled action keeps the per-transition
properties and is legal in the declared lifecycle (`abstract.move_fault`; an `IllegalMove` or
`BadSlotId` is the violation "legal"), and a world that is not final has an enabled action (no
deadlock). The first violation stops the search; because the search is breadth-first, its
trace is a shortest one from the initial world. Reachable-state counts of small bounds are
pinned in the tests, as stateright does.

    >>> from slotwarden.verification.checker import check
    >>> from slotwarden.verification.abstract import Bounds
    >>> check(Bounds(slots=1, requests=2, sessions=1)).violation is None
    True
"""

from __future__ import annotations

import time
from typing import Iterable, NamedTuple

from .abstract import (
    Bounds,
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


class Violation(NamedTuple):
    property: str  # a key of abstract.PROPERTIES
    message: str
    trace: tuple  # tuple[str, ...]: the actions from the initial world, each with its slot moves

    def __str__(self) -> str:
        steps = "\n".join(f"  {i + 1:2d}. {a}" for i, a in enumerate(self.trace))
        return f"{self.property}: {self.message}\n{steps}" if steps else f"{self.property}: {self.message}"


class CheckResult(NamedTuple):
    bounds: Bounds
    states: int  # reachable worlds visited
    transitions: int  # enabled (world, action) pairs explored
    max_depth: int  # the longest shortest path to a visited world
    seconds: float
    violation: Violation | None
    complete: bool = True  # False: stopped at max_states (or by a violation) before exhausting the space
    policy: str = "correct"

    @property
    def ok(self) -> bool:
        return self.violation is None and self.complete

    def __str__(self) -> str:
        verdict = "ok" if self.ok else ("VIOLATION " + self.violation.property if self.violation else "INCOMPLETE")
        return (
            f"{str(self.bounds):<44} {self.states:>9,} states {self.transitions:>10,} transitions "
            f"depth {self.max_depth:>3} {self.seconds:7.2f} s  {verdict}"
        )


DEFAULT_BOUNDS = (
    # a plain request and a two-turn session (s0 = r0, r1; r2 plain): slots 1..3, overlap off/on
    Bounds(slots=1, requests=3, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=False),
    Bounds(slots=3, requests=3, sessions=1, overlap=False),
    Bounds(slots=1, requests=3, sessions=1, overlap=True),
    Bounds(slots=2, requests=3, sessions=1, overlap=True),
    Bounds(slots=3, requests=3, sessions=1, overlap=True),
    # two sessions competing for slots (s0 = r0, r1; s1 = r2; r3 plain)
    Bounds(slots=1, requests=4, sessions=2, overlap=False),
    Bounds(slots=2, requests=4, sessions=2, overlap=False),
    Bounds(slots=3, requests=4, sessions=2, overlap=False),
    Bounds(slots=1, requests=4, sessions=2, overlap=True),
    Bounds(slots=2, requests=4, sessions=2, overlap=True),
    # two plain requests and a two-turn session on three slots, overlapped (s0 = r0, r1; r2, r3 plain)
    Bounds(slots=3, requests=4, sessions=1, overlap=True),
)
"""The default run: 163,755 reachable worlds in all, about 20 s of CPU (30 s wall on a loaded 2-core machine)."""

TEST_BOUNDS = (
    Bounds(slots=1, requests=2, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=True),
    Bounds(slots=1, requests=4, sessions=2, overlap=False),
)
"""Small bounds for the tests (about a second in all); their state counts are pinned there."""


def check(bounds: Bounds, policy: Policy | None = None, max_states: int | None = None) -> CheckResult:
    """Explore every world reachable under `bounds` with `policy` (default: the correct one),
    breadth-first; stop at the first violation (a shortest trace) or after `max_states` worlds."""
    policy = Policy() if policy is None else policy
    start = time.perf_counter()
    root = initial(bounds)
    parents: dict = {root: None}  # world -> (parent world, Action)
    frontier = [root]
    max_depth = transitions = 0
    name = getattr(policy, "name", type(policy).__name__)

    def done(violation: Violation | None, complete: bool) -> CheckResult:
        forget()
        return CheckResult(
            bounds, len(parents), transitions, max_depth, time.perf_counter() - start, violation, complete, name
        )

    def found(prop: str, message: str, world: World, last: Outcome | None = None) -> CheckResult:
        return done(Violation(prop, message, _trace(parents, world, last, policy, bounds.overlap)), False)

    def shortest(prop: str, message: str, world: World, last: Outcome | None, rest: list) -> CheckResult:
        # every violation met while expanding one level has a trace one action longer than the
        # level, except a deadlock of a world of the level itself: look for one among the rest
        for later in rest:
            if not is_final(later) and next(successors(later, policy, bounds.overlap), None) is None:
                return found("deadlock", _stuck_message(later), later)
        return found(prop, message, world, last)

    fault = state_fault(root)
    if fault:
        return found(*fault, root)
    while frontier:
        level: list = []
        for k, world in enumerate(frontier):
            enabled = False
            for out in successors(world, policy, bounds.overlap):
                enabled = True
                transitions += 1
                if out.error is not None:
                    return shortest("legal", str(out.error), world, out, frontier[k + 1 :])
                for m in out.moves:
                    bad = move_fault(m)
                    if bad:
                        return shortest(bad[0], bad[1], world, out, frontier[k + 1 :])
                nxt = out.world
                entry = (world, out.action)
                if parents.setdefault(nxt, entry) is not entry:  # seen before (one hash, not two)
                    continue
                depth = max_depth + 1
                fault = state_fault(nxt)
                if fault:
                    max_depth = depth
                    return shortest(fault[0], fault[1], nxt, None, frontier[k + 1 :])
                level.append(nxt)
                if max_states is not None and len(parents) >= max_states:
                    max_depth = depth
                    return done(None, False)
            if not enabled and not is_final(world):
                return found("deadlock", _stuck_message(world), world)
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


def _trace(parents: dict, world: World, last: Outcome | None, policy: Policy, overlap: bool) -> tuple:
    """The actions from the initial world to `world` (then `last`), each replayed to say which
    slot moves it made."""
    path = []
    while parents[world] is not None:
        prev, action = parents[world]
        path.append((prev, action, world))
        world = prev
    lines = []
    for prev, action, nxt in reversed(path):
        out = next(o for o in successors(prev, policy, overlap) if o.action == action and o.world == nxt)
        lines.append(describe(out))
    if last is not None:
        lines.append(describe(last))
    return tuple(lines)


def main() -> int:
    """`python -m slotwarden.verification.checker`: the default run, one line per bounds."""
    total = time.perf_counter()
    results = check_all(DEFAULT_BOUNDS, on_result=lambda r: print(r, flush=True))
    states = sum(r.states for r in results)
    print(f"{states:,} states in {time.perf_counter() - total:.1f} s: " + ("PASS" if all(r.ok for r in results) else "FAIL"))
    for r in results:
        if r.violation is not None:
            print(f"{r.bounds}: {r.violation}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
