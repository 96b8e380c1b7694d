"""Simulation: seeded random walks through the abstract scheduler's worlds, for bounds too large
to search breadth-first (as TLC's simulate mode). Each walk starts at the initial world and
takes one enabled action at a time, chosen uniformly by a seeded generator, until the world is
final or the walk is `depth` long; walks run until the time budget is spent. Every world met is
judged as the search judges it: its state properties, every slot move of every enabled action
(the per-transition properties and "legal"), and no deadlock. The first violation ends the run
with the walk that met it (a trace, not a shortest one). The result counts the walks, the
distinct worlds seen (up to renaming) and the deepest walk.
    >>> from slotwarden.verification.abstract import Bounds
    >>> simulate(Bounds(slots=2, requests=3, sessions=1), seconds=0.2, walks=5).violation is None
    True
"""

from __future__ import annotations

import random
import time
from typing import NamedTuple

from slotwarden.verification.abstract import (
    Bounds,
    Policy,
    describe,
    initial,
    is_final,
    judge_launch,
    judge_move,
    judge_world,
    show_world,
    successors,
)
from slotwarden.verification.checker.search import Violation
from slotwarden.verification.checker.symmetry import Codec

SIMULATION_BOUNDS = (Bounds(slots=8, requests=16, sessions=4, overlap=True, nodes=2),)
"""`verify --thorough`'s simulated bounds: eight slots, four two-turn sessions and eight plain
requests, overlapped, with the prefix cache on (s100 = r0, r1; ...; s103 = r6, r7; r8..r15 plain)."""

_SEEN_KEPT = 2_000_000  # distinct worlds counted, at most (memory); more are walked, not counted


class SimulationResult(NamedTuple):
    bounds: Bounds
    walks: int
    steps: int  # actions taken, over all walks
    states: int  # distinct worlds seen (one per class of renamed worlds)
    max_depth: int  # the longest walk
    finals: int  # walks that reached a final world
    seconds: float
    seed: int
    violation: Violation | None
    policy: str = "correct"

    @property
    def ok(self) -> bool:
        return self.violation is None and self.walks > 0

    def __str__(self) -> str:
        verdict = "ok" if self.ok else ("VIOLATION " + self.violation.property if self.violation else "NO WALK")
        return (
            f"{self.walks:,} walks, {self.steps:,} steps, {self.states:,} states seen, depth {self.max_depth} "
            f"({self.finals:,} walks ended), seed {self.seed}, {self.seconds:.1f} s: {verdict}"
        )


def simulate(
    bounds: Bounds,
    policy: Policy | None = None,
    seconds: float = 10.0,
    seed: int = 0,
    depth: int = 500,
    walks: int | None = None,
) -> SimulationResult:
    """Random walks under `bounds` with `policy` (default: the correct one) for `seconds` (or
    `walks` walks, whichever ends first), each at most `depth` actions long, seeded by `seed`."""
    policy = Policy() if policy is None else policy
    rng = random.Random(seed)
    start = time.perf_counter()
    root = initial(bounds)
    codec = Codec(root)
    keyof = codec.key if getattr(policy, "symmetric", True) else codec.plain_key
    seen: set = set()
    n = steps = deepest = finals = 0
    found = None
    name = getattr(policy, "name", type(policy).__name__)
    while found is None and time.perf_counter() - start < seconds and (walks is None or n < walks):
        n += 1
        world, lines = root, []
        found = _judge_world(world, lines)
        while found is None and len(lines) < depth:
            if len(seen) < _SEEN_KEPT:
                seen.add(keyof(world))
            outs = list(successors(world, policy, bounds.overlap))
            found = _judge_outcomes(outs, lines, world, policy)
            if found is not None:
                break
            if not outs:
                if not is_final(world):
                    found = Violation("deadlock", f"no action is enabled in {show_world(world)}", tuple(lines))
                else:
                    finals += 1
                break
            out = outs[rng.randrange(len(outs))]
            lines.append(describe(out))
            world = out.world
            steps += 1
            found = _judge_world(world, lines)
        deepest = max(deepest, len(lines))
    return SimulationResult(
        bounds, n, steps, len(seen), deepest, finals, time.perf_counter() - start, seed, found, name
    )


def _judge_world(world, lines: list) -> Violation | None:
    broken = judge_world(world)
    return None if broken is None else Violation(broken[0], broken[1], tuple(lines))


def _judge_outcomes(outs: list, lines: list, world, policy) -> Violation | None:
    """The first violation among the enabled actions `outs` of `world` (a refused move, a
    launch's rows off the write set, a broken per-transition property), with the walk so far
    and that action as its trace."""
    for out in outs:
        if out.error is not None:
            return Violation("legal", str(out.error), tuple(lines) + (describe(out),))
        bad = judge_launch(world, policy) if out.action.kind == "launch" else None
        if bad:
            return Violation(bad[0], bad[1], tuple(lines) + (describe(out),))
        for m in out.moves:
            bad = judge_move(m)
            if bad:
                return Violation(bad[0], bad[1], tuple(lines) + (describe(out),))
    return None
