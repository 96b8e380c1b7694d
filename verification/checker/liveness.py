"""Liveness: `eventually` properties of the abstract scheduler under weak fairness, proved on the
reachable graph the search builds (`Graph`: one int id per world, its successors as int arrays).

Fair (weak fairness, per action and its request): take, admit, finish, launch, complete, commit.
Unfair: the clients' submit, abort and close, the cache's match, donate and evict. Rollback and
retract answer pressure, assumed to pass, and a request drafts and rejects finitely often (each
verify emits a token of its budget): a fair cycle takes none of these. A world may also repeat
(stutter) when no fair action is enabled in it. A violation is a fair cycle, or a stutter, where
the goal never holds (`LIVENESS`), reported as a lasso (`Violation.loop`). Cycles are found among
the strongly connected components of the graph of renamed worlds (iterative Tarjan); a component
no quick test proves unfair is explored again over worlds as they are, judged exactly.
    >>> from slotwarden.verification.abstract import Bounds
    >>> check_live(Bounds(slots=1, requests=2, sessions=1)).liveness.violation is None
    True
"""

from __future__ import annotations

import time
from array import array
from typing import NamedTuple

from slotwarden.model.vocabulary import State

from slotwarden.verification.abstract import (
    CANDIDATE,
    DONE,
    RUNNING,
    WAITING,
    Bounds,
    Policy,
    World,
    describe,
    initial,
    show_world,
    successors,
)
from slotwarden.verification.checker.cycles import components, tarjan
from slotwarden.verification.checker.pins import pin_of
from slotwarden.verification.checker.search import CheckResult, Violation, check

LIVENESS = {
    "admitted_ends": "every admitted request ends (finished, donated or aborted)",
    "released_freed": "every released slot becomes FREE",
    "waiting_admitted": "a waiting request is admitted when a slot is free",
}
"""The liveness properties, in the order they are judged."""

KINDS = ("submit", "take", "match", "admit", "rollback", "finish", "donate", "retract", "abort", "close")
KINDS += ("evict", "launch", "complete", "draft", "commit", "reject")
CODE = {k: i for i, k in enumerate(KINDS)}
FAIR = frozenset(CODE[k] for k in ("take", "admit", "finish", "launch", "complete", "commit"))
FAILURES = frozenset(CODE[k] for k in ("rollback", "retract", "draft", "reject"))  # in no fair cycle
_STEPS = frozenset(CODE[k] for k in ("launch", "complete"))  # fair actions of nobody in particular
_LIFT_LIMIT = 200_000  # worlds as they are, at most, behind one component of renamed worlds


class Liveness(NamedTuple):
    states: int
    sccs: int  # strongly connected components with a cycle (rollback and retract left out)
    cyclic: int  # worlds in those components
    lifted: int  # components explored again with ids as they are (none passed the quick tests)
    stutters: int  # worlds where no fair action is enabled and a goal fails
    seconds: float
    violation: Violation | None

    def __str__(self) -> str:
        verdict = "ok" if self.violation is None else "VIOLATION " + self.violation.property
        return (
            f"liveness: {self.sccs} cyclic components ({self.cyclic} worlds), {self.lifted} explored unrenamed, "
            f"{self.stutters} stutters, {self.seconds:.2f} s: {verdict}"
        )


def _states(w: World) -> set:
    return {s.state for s in w.pool.slots}


def _running(w: World) -> bool:
    return any(r.phase == RUNNING for r in w.requests)


def _released(w: World) -> bool:
    return any(s.state is State.RELEASED for s in w.pool.slots)


def _waiting_with_room(w: World) -> bool:
    return any(r.phase in (WAITING, CANDIDATE) for r in w.requests) and any(s.state is State.FREE for s in w.pool.slots)


_STUCK = {"admitted_ends": _running, "released_freed": _released, "waiting_admitted": _waiting_with_room}


class Graph:
    """The reachable graph, built by `search.check` (`open` as each world is expanded, in id
    order; `edge` for each enabled action): per world its first edge, per edge its target id
    and its action's kind (compact int arrays), each world's parent on a shortest path."""

    def __init__(self):
        self.ids: dict = {}  # key -> id, in the order the search met them
        self.starts = array("I")
        self.targets = array("I")
        self.kinds = array("B")
        self.parent = array("I")
        self.stutters: list = []  # ids of worlds with no fair action enabled where a goal fails
        self._world: World | None = None
        self._fair = True

    def start(self, key) -> None:
        self.ids[key] = 0
        self.parent.append(0)

    def open(self, world: World) -> None:
        self._close()
        self.starts.append(len(self.targets))
        self._world, self._fair = world, False

    def edge(self, kind: str, key) -> None:
        code = CODE[kind]
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.ids)
            self.parent.append(len(self.starts) - 1)
        self.targets.append(i)
        self.kinds.append(code)
        if code in FAIR:
            self._fair = True

    def absorbed(self) -> tuple | None:
        """What `_search.Absorb` needs to add this graph's edges as `edge` does (the graph, each
        action kind's code, the fair codes), or None where `edge` is not the one it restates."""
        return (self, dict(CODE), frozenset(FAIR)) if type(self).edge is EDGE else None

    def _extend(self, targets: list, kinds: list, parents: list) -> None:
        """The edges of one world at once (`_search.Absorb`, which does what `edge` does)."""
        self.targets.extend(targets)
        self.kinds.extend(kinds)
        self.parent.extend(parents)

    def _close(self) -> None:
        w = self._world
        if w is not None and not self._fair and any(stuck(w) for stuck in _STUCK.values()):
            self.stutters.append(len(self.starts) - 1)

    def judge(self, codec, keyof, policy: Policy, bounds: Bounds) -> Liveness:
        self._close()
        self._world = None
        self.starts.append(len(self.targets))
        return _judge(self, codec, keyof, policy, bounds)


EDGE = Graph.edge
"""`Graph.edge` as `_search.Absorb` restates it: a graph whose `edge` is another gets its edges in Python."""

GRAPH_LIMIT = 2_000_000
"""A bounds whose pinned state count is larger is searched without its graph, for the safety
properties only (`--thorough`'s largest: their graphs would cost gigabytes). Every bounds of the
default run keeps its graph (its largest, about 650 MB)."""


def check_live(bounds: Bounds, policy: Policy | None = None, **options) -> CheckResult:
    """`search.check` with the liveness properties judged on its graph once the safety ones
    hold: the result's `liveness`, its violation the result's. A bounds pinned at more than
    `GRAPH_LIMIT` states is searched for the safety properties only (`liveness` None)."""
    pin = pin_of(bounds)
    if pin is not None and pin[0] > GRAPH_LIMIT:
        return check(bounds, policy, **options)
    return check(bounds, policy, graph=Graph(), **options)


def _judge(g: Graph, codec, keyof, policy: Policy, bounds: Bounds) -> Liveness:
    start = time.perf_counter()
    n = len(g.ids)
    comp, cyclic = tarjan(n, g.starts, g.targets, g.kinds, FAILURES)
    keys = list(g.ids)
    members: dict = {c: [] for c in cyclic}
    for v in range(n):
        if comp[v] in members:
            members[comp[v]].append(v)
    suspects = [ms for ms in members.values() if not _surely_unfair(g, ms, comp, keys, codec)]
    lifts: list = [None] * len(suspects)
    found = None
    for prop, stuck in _STUCK.items():
        for v in g.stutters:
            w, lines = _replay(g, v, keys, keyof, policy, bounds)
            if stuck(w):
                found = Violation(prop, f"{LIVENESS[prop]}: stays forever in {show_world(w)}", tuple(lines), len(lines))
                break
        for k, ms in enumerate(suspects if found is None else ()):
            if lifts[k] is None:
                lifts[k] = _Lift(g, ms[0], set(keys[v] for v in ms), keys, keyof, policy, bounds)
            found = lifts[k].violation(prop)
            if found is not None:
                break
        if found is not None:
            break
    sizes = sum(len(ms) for ms in members.values())
    lifted = sum(1 for lift in lifts if lift is not None)
    return Liveness(n, len(members), sizes, lifted, len(g.stutters), time.perf_counter() - start, found)


def _surely_unfair(g: Graph, ms: list, comp, keys: list, codec) -> bool:
    """Whether every cycle through the component `ms` of renamed worlds is unfair, or meets no
    goal's negation, by tests that need no ids: a launch or a complete enabled in every world
    of it and taken in none; or only launches and completes inside it, the requests' phases the
    same everywhere (so each request's record stays put) and a request that may finish in every
    world (it may finish throughout: finish is fair, and taken in no cycle)."""
    c = comp[ms[0]]
    inside: set = set()
    enabled = None
    for v in ms:
        here = set()
        for e in range(g.starts[v], g.starts[v + 1]):
            k = g.kinds[e]
            here.add(k)
            if comp[g.targets[e]] == c and k not in FAILURES:
                inside.add(k)
        enabled = here if enabled is None else enabled & here
    if (enabled & _STEPS & FAIR) - inside:
        return True
    worlds = [codec.world(keys[v]) for v in ms]
    if not any(stuck(w) for w in worlds for stuck in _STUCK.values()):
        return True
    if not inside <= _STEPS or CODE["finish"] not in FAIR:
        return False
    phases = {tuple(sorted(r.phase for r in w.requests)) for w in worlds}
    return len(phases) == 1 and all(any(r.phase == RUNNING and r.ran for r in w.requests) for w in worlds)


def _replay(g: Graph, v: int, keys: list, keyof, policy: Policy, bounds: Bounds) -> tuple:
    """The world of id `v` replayed from the initial world along a shortest path, with its lines."""
    path = [v]
    while path[-1] != 0:
        path.append(g.parent[path[-1]])
    world, lines = initial(bounds), []
    for u in reversed(path[:-1]):
        out = next(
            o for o in successors(world, policy, bounds.overlap) if o.world is not None and keyof(o.world) == keys[u]
        )
        lines.append(describe(out))
        world = out.world
    return world, lines


class _Lift:
    """The worlds, as they are (no renaming), whose renamed keys are in one component, reached
    from a world of it without rollback or retract: the exact judge of fairness and goals."""

    def __init__(self, g: Graph, entry: int, inside: set, keys: list, keyof, policy: Policy, bounds: Bounds):
        root, self.prefix = _replay(g, entry, keys, keyof, policy, bounds)
        self.worlds = [root]
        self.succ: list = []  # per world: [(target, outcome)] inside the component
        self.enabled: list = []  # per world: the fair actions enabled in it
        index = {root: 0}
        for w in self.worlds:
            outs, fair = [], set()
            for out in successors(w, policy, bounds.overlap):
                code = CODE[out.action.kind]
                if code in FAIR:
                    fair.add(out.action)
                if code in FAILURES or out.world is None or keyof(out.world) not in inside:
                    continue
                j = index.setdefault(out.world, len(self.worlds))
                if j == len(self.worlds):
                    if j >= _LIFT_LIMIT:
                        raise RuntimeError(f"liveness: more than {_LIFT_LIMIT} worlds behind one component")
                    self.worlds.append(out.world)
                outs.append((j, out))
            self.succ.append(outs)
            self.enabled.append(fair)

    def violation(self, prop: str) -> Violation | None:
        ws = self.worlds
        if prop == "released_freed":
            subjects = range(len(ws[0].pool.slots))
            keep = lambda w, i: w.pool.slots[i].state is State.RELEASED  # noqa: E731
            meets = lambda d, i: d[0]  # noqa: E731
        else:
            subjects = range(len(ws[0].requests))
            if prop == "admitted_ends":
                keep = lambda w, i: w.requests[i].phase != DONE  # noqa: E731
                meets = lambda d, i: next((v for v in d if ws[v].requests[i].phase == RUNNING), None)  # noqa: E731
            else:
                keep = lambda w, i: w.requests[i].phase in (WAITING, CANDIDATE)  # noqa: E731
                meets = lambda d, i: next((v for v in d if State.FREE in _states(ws[v])), None)  # noqa: E731
        for i in subjects:
            alive = [keep(w, i) for w in ws]
            succ = [[j for j, _ in outs if alive[j]] if alive[v] else [] for v, outs in enumerate(self.succ)]
            for d in components(succ):
                at = meets(d, i)  # a world of the cycle where the goal's premise holds
                cycle = None if at is None else self._fair_cycle(d, at)
                if cycle is not None:
                    return self._lasso(prop, i, at, cycle)
        return None

    def _fair_cycle(self, d: list, at: int) -> list | None:
        """A cycle from world `at` of `d` back to it that takes each fair action enabled in all
        of `d` (as edges (world, outcome, target)), or None when one of them is taken nowhere in `d`."""
        inside = set(d)
        edges = [(v, out, j) for v in d for j, out in self.succ[v] if j in inside]
        need = set.intersection(*(self.enabled[v] for v in d))
        chosen = []
        for a in need:
            e = next((e for e in edges if e[1].action == a), None)
            if e is None:
                return None
            chosen.append(e)
        chosen = chosen or edges[:1]
        cycle, here = [], at
        for v, out, j in chosen:
            cycle += self._path(here, v, inside) + [(v, out, j)]
            here = j
        return cycle + self._path(here, at, inside)

    def _path(self, a: int, b: int, inside: set | None) -> list:
        """A shortest list of edges from world `a` to world `b` (within `inside`, if given)."""
        back, todo = {a: None}, [a]
        for v in todo:
            if v == b:
                break
            for j, out in self.succ[v]:
                if j not in back and (inside is None or j in inside):
                    back[j] = (v, out, j)
                    todo.append(j)
        path = []
        while b != a:
            path.append(back[b])
            b = back[b][0]
        return path[::-1]

    def _lasso(self, prop: str, i: int, at: int, cycle: list) -> Violation:
        lead = self._path(0, at, None)
        lines = self.prefix + [describe(out) for _, out, _ in lead]
        who = f"slot {i + 1}" if prop == "released_freed" else f"r{self.worlds[0].requests[i].id}"
        message = f"{LIVENESS[prop]}: not for {who}, in a fair cycle (the last {len(cycle)} actions, forever)"
        return Violation(prop, message, tuple(lines + [describe(out) for _, out, _ in cycle]), len(lines))
