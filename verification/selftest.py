"""verify tests its own checks: each must flag a case built to break it.

- Every property the checker judges flags a minimal bad world, move, policy or launched step
  built for it, and is the first one that case breaks (`judge_world`, `judge_move`, `check`,
  `judge_launch`).
- Every MOVE property of the registry is among the faults `move_faults` finds in a bad move
  built for it (the declaration mutants' fast checks judge moves with it).
- Every property the registry says a stage establishes is evaluated by that stage: the checker
  judges it, its proofs exist, or (the Hypothesis machines) a machine or audit names it.
- Every pin is compared: an exhaustive row with the pinned counts passes; one state more fails.
A failure names the property or pin whose check no longer fires.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Callable, NamedTuple

from slotwarden.model import proofs as model_proofs
from slotwarden.model import registry
from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import NOBODY, Actor, Event, Slot, State
from slotwarden.model.write_set import Fill, Row, RowKind
from slotwarden.verification import abstract as A
from slotwarden.verification.abstract import Bounds, Fire, Policy
from slotwarden.verification.abstract.actions import Move
from slotwarden.verification.abstract.judged import PROPERTIES, STEP_PROPERTIES, judge_launch, judge_move, judge_world
from slotwarden.verification.abstract.world import NODE_BASE
from slotwarden.verification.checker import pins
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS  # noqa: F401  (the pins it compares)
from slotwarden.verification.checker.search import check

R, S, F = Actor.request, Actor.session, Actor.fence
NODE = NODE_BASE


def _slot(state: State, owner: int = NOBODY, borrower: int = NOBODY, fence: int = 0, readers: int = 0) -> Slot:
    return Slot(state, owner, borrower, fence, readers)


def _world(slots, free=(), requests=(), sessions=(), steps=(), locks=None) -> A.World:
    return A.World(
        Pool(tuple(slots), tuple(free), locks), tuple(requests), tuple(sessions), len(steps), 0, tuple(steps)
    )


def _step(slots=(), copies=()) -> A.Step:
    return A.Step(1, frozenset(slots), frozenset(), frozenset(copies))


RUNNING_1 = _slot(State.RUNNING, 0)
CACHED = _slot(State.CACHED, NODE)

BAD_WORLDS = {  # property -> a world that breaks it first
    "conserved": _world([_slot(State.FREE)]),  # a FREE slot missing from the free list
    "exclusive": _world([_slot(State.RUNNING, 0, borrower=3)]),  # a borrower on a slot nobody lent
    "no_orphans": _world([RUNNING_1], requests=[A.Request(0, None, A.DONE)]),
    "handles_match": _world([RUNNING_1], requests=[A.Request(0, None, A.RUNNING)]),  # it forgot its slot
    "in_flight_not_free": _world([_slot(State.FREE)], free=(1,), steps=[_step(slots=(1,))]),
    "evict_unlocked": _world([CACHED], steps=[_step(copies=((0, 1),))], locks=()),  # a copy holding no lock
    "reads_published": _world([CACHED], steps=[_step(slots=(1,))], locks=()),  # written while matchable
    "locks_match": _world([_slot(State.CACHED, NODE, readers=1)], locks=()),  # a lock nobody holds
    "quiescent": _world([_slot(State.RELEASED, fence=1)]),  # all done and fenced, a slot not FREE
}

_MOVES = {  # property -> (before, event, actor, target, epoch, after): a move that breaks it
    "session_kept": (_slot(State.PARKED, 100), Event.FINISH, R(1), NOBODY, 1, _slot(State.RELEASED, fence=1)),
    "freed_once": (_slot(State.FREE), Event.FINISH, R(1), NOBODY, 1, _slot(State.RELEASED, fence=1)),
    "fence_respected": (_slot(State.RUNNING, 1), Event.FINISH, R(1), NOBODY, 1, _slot(State.FREE)),
    "release_waits": (_slot(State.RUNNING, 1), Event.FINISH, R(1), NOBODY, 1, _slot(State.RELEASED)),
    "handles_follow": (_slot(State.RUNNING, 1), Event.PARK, R(1), 100, 1, _slot(State.PARKED, 1)),
    "authority": (_slot(State.RUNNING, 1), Event.FINISH, R(2), NOBODY, 1, _slot(State.RELEASED, fence=1)),
    "borrow_safe": (_slot(State.LENT, 100, 1), Event.CLOSE, S(100), NOBODY, 1, _slot(State.RELEASED, fence=1)),
    "parks_what_ran": (_slot(State.TAKEN, 1), Event.PARK, R(1), 100, 1, _slot(State.PARKED, 100)),
    "cache_read_only": (CACHED, Event.UNLOCK, R(1), NOBODY, 1, _slot(State.CACHED, NODE + 1)),
    "evict_unlocked": (
        _slot(State.CACHED, NODE, readers=1),
        Event.EVICT,
        Actor.cache(NODE),
        NOBODY,
        1,
        _slot(State.RELEASED, fence=1),
    ),  # fmt: skip
    "lock_counted": (CACHED, Event.LOCK, F(0), NOBODY, 1, _slot(State.CACHED, NODE, readers=2)),
    "reads_published": (_slot(State.CACHING, NODE, fence=1), Event.FENCE, F(0), NOBODY, 1, CACHED),
    "publishes_committed": (_slot(State.VERIFIED, 1), Event.INSERT, R(1), NODE, 1, _slot(State.CACHING, NODE, fence=1)),
    "commit_fenced": (
        _slot(State.VERIFYING, 1, fence=1),
        Event.COMMIT,
        R(1),
        NOBODY,
        1,
        _slot(State.RELEASED, fence=1),
    ),
}
CHECKER_MOVES = ("session_kept", "freed_once", "fence_respected", "cache_read_only", "lock_counted", "reads_published")
CHECKER_MOVES += ("publishes_committed", "commit_fenced")


def _row(rid: int, write: int, source: int | None = None) -> Row:
    return Row(RowKind.REQUEST, rid, write, write if source is None else source)


STEP_WORLD = A.World(  # two running requests, each on its own slot, each already run in a completed step
    Pool((_slot(State.RUNNING, 0), _slot(State.RUNNING, 1)), (), None),
    (A.Request(0, None, A.RUNNING, 1, ran=True), A.Request(1, None, A.RUNNING, 2, ran=True)),
    (),
    0,
    0,
    (),
)
BAD_ROWS = {  # property -> rows over STEP_WORLD that break it first
    "pads_to_pad": (_row(0, 1), _row(1, 2), Row(RowKind.PAD, NOBODY, 2, 2)),  # a pad row on a live slot
    "ids_in_pool": (_row(0, 1), _row(1, 3)),  # past the pool
    "writes_held": (_row(0, 2), _row(1, 1)),  # each writes the other's slot
    "writes_disjoint": (_row(0, 1), _row(0, 1)),  # one slot written by two rows
    "reads_held": (_row(0, 1, source=2), _row(1, 2)),  # r0 reads r1's slot
}


class Rows(Policy):
    """The twin launching `rows` instead of its own."""

    def __init__(self, rows):
        self.rows = rows

    def step_rows(self, world, running):
        return self.rows


class Stale(Policy):
    """Every slot still holds its previous tenant's state (no zeroing, no copy)."""

    def fills(self, world):
        return (Fill.STALE,) * len(world.pool.slots)


WINDOW_WORLD = STEP_WORLD._replace(  # STEP_WORLD, and r0 holds slot 3 for its window (DRAFT)
    pool=Pool(STEP_WORLD.pool.slots + (_slot(State.DRAFT, 0),), (), None)
)
VERIFIED_WORLD = STEP_WORLD._replace(  # STEP_WORLD, and r0's window slot 3 is verified, not committed
    pool=Pool(STEP_WORLD.pool.slots + (_slot(State.VERIFIED, 0),), (), None)
)
BEHIND_WORLD = STEP_WORLD._replace(behind=frozenset({0}))  # r0's verified state is not copied in
BAD_STEPS = {  # property -> (world, rows over it that break it first)
    "reads_committed": (VERIFIED_WORLD, (_row(0, 1, source=3), _row(1, 2))),  # r0 reads its verified window
    "rollback_restores": (WINDOW_WORLD, (_row(0, 3, source=1), _row(0, 1), _row(1, 2))),  # verify writes slot 1
    "reads_current": (BEHIND_WORLD, (_row(0, 1), _row(1, 2))),  # r0 runs on its stale committed slot
}


def bad_step(name: str) -> Policy:
    """The policy whose launch in `STEP_WORLD` (`step_world(name)`) breaks step property `name` first."""
    if name in BAD_STEPS:
        return Rows(BAD_STEPS[name][1])
    return Stale() if name == "reads_filled" else Rows(BAD_ROWS[name])


def step_world(name: str) -> A.World:
    """The world `bad_step(name)` launches in."""
    return BAD_STEPS[name][0] if name in BAD_STEPS else STEP_WORLD


class _IllegalAdmit(Policy):
    """Admits a candidate by finishing it: a move the declaration refuses (`legal`)."""

    def admit_events(self, world, r):
        return (Fire(Event.FINISH, A.req_actor(r), (r.handle,)),)


class _NeverEvicts(Policy):
    """The cache keeps its slots for good: with every request done nothing can move (`deadlock`)."""

    def can_evict(self, world, slot):
        return False


BAD_POLICIES = {  # property -> (policy, bounds): the search's own properties
    "legal": (_IllegalAdmit, Bounds(slots=1, requests=1, sessions=0)),
    "deadlock": (_NeverEvicts, Bounds(slots=2, requests=1, sessions=0, nodes=1)),
}


class Finding(NamedTuple):
    check: str  # what was tested, e.g. "checker property conserved"
    ok: bool
    got: str  # what the check said


def _first(found) -> str:
    return found[0] if found else "nothing"


def checker_properties() -> list[Finding]:
    """Each property the checker judges, on its bad case: it must be the one flagged."""
    out = []
    for name in PROPERTIES:
        if name in BAD_WORLDS:
            got = _first(judge_world(BAD_WORLDS[name]))
        elif name in CHECKER_MOVES:
            b, e, a, _, _, x = _MOVES[name]
            got = _first(judge_move(Move(1, b, e, a, x)))
        elif name in STEP_PROPERTIES or name in BAD_STEPS:
            found = judge_launch(step_world(name), bad_step(name))
            got = found[0] if found else "nothing"
        elif name in BAD_POLICIES:
            policy, bounds = BAD_POLICIES[name]
            v = check(bounds, policy()).violation
            got = v.property if v else "nothing"
        else:
            got = "no bad case built for it"
        out.append(Finding(f"checker property {name}", got == name, got))
    return out


def registry_moves() -> list[Finding]:
    """Each MOVE property of the registry among `move_faults` of its bad move."""
    out = []
    for p in registry.MOVE_PROPERTIES:
        case = _MOVES.get(p.name)
        faults = registry.move_faults(*case) if case else ("no bad move built for it",)
        out.append(Finding(f"registry move property {p.name}", p.name in faults, ", ".join(faults) or "nothing"))
    return out


def _names_in(folder: Path) -> set:
    names: set = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
    return names


def registry_claims() -> list[Finding]:
    """Each stage a registry entry names evaluates it."""
    here = Path(__file__).resolve().parent
    machines = _names_in(here / "machines") | _names_in(here.parent / "runtime" / "ledger")
    out = []
    for p in registry.PROPERTIES.values():
        missing = [proof for proof in p.proofs if proof not in model_proofs.PROOFS]
        if registry.CHECKER in p.checks and p.name not in PROPERTIES:
            missing.append("the checker does not judge it")
        if registry.MUTANTS in p.checks and p.kind is registry.Kind.MOVE and p.on_move is None:
            missing.append("no on_move for the mutants' fast checks")
        if registry.MACHINES in p.checks and (p.predicate is None or p.predicate.__name__ not in machines):
            missing.append("no machine or audit calls it")
        if not p.proofs and not p.checks:
            missing.append("nothing establishes it")
        out.append(Finding(f"registry entry {p.name}", not missing, "; ".join(missing) or "evaluated"))
    return out


def pin_comparison(row_of: Callable) -> list[Finding]:
    """`row_of(result)` (verify's exhaustive row) passes each default bounds' pinned counts and
    fails them off by one state."""
    base = check(Bounds(slots=1, requests=1, sessions=0))
    out = []
    for b in DEFAULT_BOUNDS:
        states, transitions = pins.pin_of(b)
        right = row_of(base._replace(bounds=b, states=states, transitions=transitions))
        wrong = row_of(base._replace(bounds=b, states=states + 1, transitions=transitions))
        ok = right.ok and not wrong.ok
        out.append(Finding(f"pin {b}", ok, f"pinned counts {'pass' if right.ok else 'FAIL'}, "
                                            f"one state more {'fails' if not wrong.ok else 'PASSES'}"))  # fmt: skip
    return out


def run(row_of: Callable) -> list[Finding]:
    """Every self-test finding, in a fixed order."""
    return checker_properties() + registry_moves() + registry_claims() + pin_comparison(row_of)


def verdict(row_of: Callable) -> tuple:
    """(ok, seconds, summary, detail) of `run(row_of)`, for verify's row."""
    start = time.perf_counter()
    found = run(row_of)
    bad = [f for f in found if not f.ok]
    kinds: dict = {}
    for f in found:
        kind = "pin" if f.check.startswith("pin ") else f.check.rsplit(" ", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    text = f"{len(found) - len(bad)}/{len(found)} checks fire on their bad case ("
    text += ", ".join(f"{n} {k}" for k, n in kinds.items()) + ")" + "".join(f"; {f.check}: {f.got}" for f in bad[:3])
    detail = {"checks": len(found), "failed": [f._asdict() for f in bad]}
    return not bad, time.perf_counter() - start, text, detail
