"""Declaration mutants: every single-rule change of the lifecycle, and what notices it.

Each mutant is the declaration of `slotwarden.model.lifecycle` with one rule changed:
dropped; its relation replaced by another, or another relation allowed as well; its
destination changed; one field of its effect taken from another source; or the rule copied to
another source state. Each is judged by fast, complete checks, cheapest first:

1. `declare()` itself (a mutant it refuses is killed by the declaration check);
2. every move property of `slotwarden.model.registry` (and `exclusive` of the record after)
   on every move of the finite domain that the mutation can change: every well-formed record
   of the rule's source state (small owner, borrower and fence values) and every actor, target
   and epoch of small values. The unchanged moves are judged once, on the declaration as
   written. Over that domain this is a bounded proof of the one-move properties;
3. the shutdown of `slotwarden.model.proofs.shut_down` from every record of the domain: it
   must end FREE (`quiescent`);
4. `conserved` over one pool step, two slots, every batch (the pool form of the step);
5. the exhaustive checker on small bounds, with the scheduler's moves going through the
   mutant (for the rules a scheduler needs: a dropped rule makes it stuck or refused).

`--thorough` also runs the CrossHair proofs on any survivor not listed as equivalent. A mutant
no check kills must be listed in `EQUIVALENT` with the reason; the stage fails on an unlisted
survivor and on a listed mutant that is in fact killed.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from itertools import product
from typing import Iterator, NamedTuple

from slotwarden.model import pool as model_pool
from slotwarden.model import proofs
from slotwarden.model.declaration import Effect, Lifecycle, Rule, Source, declare
from slotwarden.model.errors import DeclarationError, LifecycleError
from slotwarden.model.lifecycle import EVENTS, LIFECYCLE, RULES, STATES
from slotwarden.model.pool import Pool
from slotwarden.model.properties import conserved, quiescent
from slotwarden.model.registry import move_faults
from slotwarden.model.step import step
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Actor, Event, Relation, Slot, State


class Mutant(NamedTuple):
    name: str  # e.g. "PARKED --LEND [OWNER]: by NONE"
    rules: tuple  # the mutated rule list


class Kill(NamedTuple):
    mutant: str
    killed_by: str  # "declare", "moves", "shutdown", "pool", "checker", "crosshair", or "" (survived)
    detail: str  # the broken properties and a witness, or why declare refused it
    seconds: float

    @property
    def killed(self) -> bool:
        return bool(self.killed_by)


def _label(r: Rule) -> str:
    return f"{r.source.name} --{r.event.name} [{r.by.name}]"


def mutants(rules: tuple = RULES) -> Iterator[Mutant]:
    """Every single-rule mutation of `rules`, in a fixed order."""
    for k, r in enumerate(rules):
        others = rules[:k] + rules[k + 1 :]
        at = lambda new: rules[:k] + (new,) + rules[k + 1 :]  # noqa: E731
        yield Mutant(f"{_label(r)}: dropped", others)
        for by in Relation:
            if by is not r.by:
                yield Mutant(f"{_label(r)}: by {by.name}", at(dataclasses.replace(r, by=by)))
                yield Mutant(f"{_label(r)}: also by {by.name}", rules + (dataclasses.replace(r, by=by),))
        for dest in State:
            if dest is not r.dest:
                yield Mutant(f"{_label(r)}: to {dest.name}", at(dataclasses.replace(r, dest=dest)))
        for field in Effect._fields:
            for source in Source:
                if source is not getattr(r.effect, field):
                    effect = r.effect._replace(**{field: source})
                    yield Mutant(f"{_label(r)}: {field} from {source.name}", at(dataclasses.replace(r, effect=effect)))
        for src in State:
            if src is not r.source:
                yield Mutant(f"{_label(r)}: also from {src.name}", rules + (dataclasses.replace(r, source=src),))


# -- the finite domain -------------------------------------------------------------------------
IDS = (0, 1)
ACTORS = (
    tuple(Actor.request(i) for i in IDS)
    + tuple(Actor.session(i) for i in IDS)
    + tuple(Actor.cache(i) for i in IDS)
    + tuple(Actor.fence(i) for i in (0, 1, 2))
)
TARGETS = (NOBODY,) + IDS
EPOCHS = (0, 1, 2)
POOL_ACTORS = tuple(k(i) for k in (Actor.request, Actor.session, Actor.cache) for i in (7, 8)) + ACTORS[-3:]
"""Who acts on the pool check's records (`proofs.record`: owned by 7, lent to 8)."""
LOCK_COUNTS = (0, 1, MAX_READERS - 1, MAX_READERS)
"""The lock counts of a cached record in the domain: none, some, one below the bound, the bound."""


def records(lifecycle: Lifecycle, state: State) -> tuple:
    """Every well-formed record of `state` with small owner, borrower and fence values (and,
    for a cached state, lock counts at and next to both ends)."""
    spec = lifecycle.spec(state)
    owners = IDS if spec.owner is not None else (NOBODY,)
    borrowers = IDS if spec.lent else (NOBODY,)
    fences = (0, 1, 2) if spec.fenced else (0,)
    counts = LOCK_COUNTS if spec.shared else (0,)
    return tuple(Slot(state, o, b, f, n) for o, b, f, n in product(owners, borrowers, fences, counts))


def _move(lifecycle: Lifecycle, slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    try:
        return step(slot, event, actor, target, epoch, lifecycle)
    except LifecycleError:
        return slot


def move_check(lifecycle: Lifecycle, where: tuple | None = None) -> str:
    """The first move of the domain (restricted to `where` = (state, event) pairs) that breaks
    a move property, as 'properties: move', or ''."""
    for state in State:
        for event in Event:
            if where is not None and (state, event) not in where:
                continue
            for slot, actor, target, epoch in product(records(lifecycle, state), ACTORS, TARGETS, EPOCHS):
                after = _move(lifecycle, slot, event, actor, target, epoch)
                bad = move_faults(slot, event, actor, target, epoch, after, lifecycle)
                if bad:
                    return f"{', '.join(bad)}: {event.name} by {actor} (target {target}, epoch {epoch}) on {_show(slot)} -> {_show(after)}"
    return ""


def shutdown_check(lifecycle: Lifecycle) -> str:
    """A record of the domain that the shutdown does not bring back to FREE, or ''."""
    for state in State:
        for slot in records(lifecycle, state):
            end = proofs.shut_down(slot, 2, lifecycle)
            if not quiescent((end,)):
                return f"quiescent: shutting down {_show(slot)} ends {_show(end)}"
    return ""


def pool_check(lifecycle: Lifecycle, where: tuple | None = None) -> str:
    """A step of a two-slot pool that breaks `conserved`, or ''. The first slot is in a state
    of `where` (all states when None), the second in any; every batch, event, actor, target."""
    firsts = {s for s, _ in where} if where is not None else set(State)
    events = {e for _, e in where} if where is not None else set(Event)
    for pool in _pools(tuple(sorted(firsts)), lifecycle):
        for ids, event, actor, target in product(proofs.BATCHES, sorted(events), POOL_ACTORS, (NOBODY, 7, 8)):
            after = proofs.pool_step(pool, event, ids, actor, target, 1, lifecycle)
            if not conserved(after.slots, after.free, lifecycle):
                return f"conserved: {event.name} by {actor} on {ids} of {_show_pool(pool)} -> {_show_pool(after)}"
    return ""


def _pools(firsts: tuple, lifecycle: Lifecycle) -> list:
    """The pools of the pool check, each once: the first slot in a state of `firsts`, the second
    in any, fences 0 or 2 and 0 or 1, the free list in either order. (A state with no fence
    makes the same record of both fences, and a free list of fewer than two ids has one order:
    those pools are judged once.)"""
    seen: dict = {}
    for st1, st2 in product(firsts, State):
        for f1, f2, flip in product((0, 2), (0, 1), (False, True)):
            slots = (proofs.record(st1, f1, lifecycle), proofs.record(st2, f2, lifecycle))
            free = tuple(i for i in ((2, 1) if flip else (1, 2)) if slots[i - 1].state is State.FREE)
            seen.setdefault((slots, free), Pool(slots, free))
    return list(seen.values())


def baseline_check(lifecycle: Lifecycle) -> str:
    """The fast checks over the whole domain: what a wrong declaration itself breaks, or ''.
    The stage runs it on the declaration as written before judging any mutant."""
    return move_check(lifecycle) or shutdown_check(lifecycle) or pool_check(lifecycle)


@contextmanager
def declared_as(lifecycle: Lifecycle):
    """Within the block, the model pool (and so the exhaustive checker, whose every slot move
    goes through `slotwarden.model.pool`) obeys `lifecycle` instead of the declaration."""
    from slotwarden.verification import abstract

    saved = model_pool.apply, model_pool.alloc, model_pool.fence
    apply, alloc, fence = saved
    subject = lifecycle

    def mutant_apply(pool, event, ids, actor, target=NOBODY, epoch=0, lifecycle=None):
        return apply(pool, event, ids, actor, target, epoch, subject)

    model_pool.apply = mutant_apply
    model_pool.alloc = lambda pool, n, actor, lifecycle=None: alloc(pool, n, actor, subject)
    model_pool.fence = lambda pool, completed, lifecycle=None: fence(pool, completed, subject)
    getattr(abstract, "forget", lambda: None)()  # memoised moves of another lifecycle
    try:
        yield
    finally:
        model_pool.apply, model_pool.alloc, model_pool.fence = saved
        getattr(abstract, "forget", lambda: None)()


def _bounds() -> tuple:
    from slotwarden.verification.abstract import Bounds

    # a plain request; then a session with two turns (the lent paths) and a plain request; then
    # the prefix cache: a donor and two readers of its node, and, overlapped, a dropped write
    return (
        Bounds(slots=1, requests=2, sessions=1),
        Bounds(slots=2, requests=3, sessions=1),
        Bounds(slots=3, requests=3, sessions=0, nodes=1),
        Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2),
    )


def checker_check(lifecycle: Lifecycle, bounds) -> str:
    """The first violation the exhaustive checker finds on `bounds` with the scheduler's
    moves going through `lifecycle`, or ''.

    The lifecycle reaches the checker only through `step` (in `slotwarden.model.pool`), and a
    step's outcome depends only on the rules of its (state, event). So where `lifecycle`
    gives the same outcome as the declaration on every step the checker made on the
    declaration from a (state, event) whose rules differ, its search would repeat the
    declaration's step for step, and find what that found: the checker does not run again.
    (Within another `declared_as` block, whose lifecycle the pool already obeys, it does.)"""
    if model_pool.apply is not _APPLY:
        return _run_checker(lifecycle, bounds)
    recorded = _recorded(tuple(bounds))
    if _same_steps(lifecycle, recorded.steps):
        return recorded.found
    return _run_checker(lifecycle, bounds)


_APPLY = model_pool.apply  # the pool's own apply, which obeys the declaration


def _run_checker(lifecycle: Lifecycle, bounds) -> str:
    from slotwarden.verification.checker.search import check

    with declared_as(lifecycle):
        for b in bounds:
            r = check(b)
            if r.violation is not None:
                return f"{r.violation.property} at {b}: {r.violation.message}"
    return ""


class _Search(NamedTuple):
    found: str  # what the checker finds on the declaration ('' when nothing)
    steps: dict  # (state, event) -> every (slot, event, actor, target, epoch, slot id) it stepped


_SEARCHES: dict = {}  # bounds -> _Search of the declaration


def _recorded(bounds: tuple) -> _Search:
    """The checker's search of `bounds` on the declaration, with every step it made (once)."""
    if bounds not in _SEARCHES:
        steps: dict = {}
        inner = model_pool.step

        def recording(slot, event, actor, target=NOBODY, epoch=0, lifecycle=LIFECYCLE, slot_id=None):
            steps.setdefault((slot.state, event), set()).add((slot, event, actor, target, epoch, slot_id))
            return inner(slot, event, actor, target, epoch, lifecycle, slot_id)

        model_pool.step = recording
        try:
            found = _run_checker(LIFECYCLE, bounds)
        finally:
            model_pool.step = inner
        _SEARCHES[bounds] = _Search(found, steps)
    return _SEARCHES[bounds]


def _same_steps(lifecycle: Lifecycle, steps: dict) -> bool:
    """Whether `lifecycle` gives each recorded step from a (state, event) whose rules differ
    from the declaration's the same outcome: the same record, or the same refusal."""
    for key in _changed(lifecycle):
        for slot, event, actor, target, epoch, slot_id in steps.get(key, ()):
            if _outcome(slot, event, actor, target, epoch, slot_id, lifecycle) != _outcome(
                slot, event, actor, target, epoch, slot_id, LIFECYCLE
            ):
                return False
    return True


def _outcome(slot, event, actor, target, epoch, slot_id, lifecycle: Lifecycle):
    try:
        return step(slot, event, actor, target, epoch, lifecycle, slot_id)
    except LifecycleError as e:
        return type(e), str(e)


def crosshair_check(lifecycle: Lifecycle, timeout: float) -> str:
    """The first CrossHair proof that does not confirm on `lifecycle`, or ''."""
    from slotwarden.verification.crosshair_proofs import prove

    for name in proofs.PROOFS:
        r = prove(name, lifecycle, timeout)
        if not r.confirmed:
            return f"{name}: {r.verdict} {r.message.splitlines()[0] if r.message else ''}"
    return ""


def judge(mutant: Mutant, bounds: tuple, crosshair_timeout: float | None = None) -> Kill:
    """Run the checks on `mutant`, cheapest first; the first that fails kills it."""
    start = time.perf_counter()

    def kill(by: str, detail: str) -> Kill:
        return Kill(mutant.name, by, detail, time.perf_counter() - start)

    try:
        lifecycle = declare(mutant.name, STATES, EVENTS, mutant.rules)
    except DeclarationError as e:
        return kill("declare", str(e))
    where = _changed(lifecycle)
    for by, run in (
        ("moves", lambda: move_check(lifecycle, where)),
        ("shutdown", lambda: shutdown_check(lifecycle)),
        ("pool", lambda: pool_check(lifecycle, where)),
        ("checker", lambda: checker_check(lifecycle, bounds)),
    ):
        found = run()
        if found:
            return kill(by, found)
    if crosshair_timeout:
        found = crosshair_check(lifecycle, crosshair_timeout)
        if found:
            return kill("crosshair", found)
    return kill("", "")


def _changed(lifecycle: Lifecycle) -> tuple:
    """The (state, event) pairs whose rules differ from the declaration's."""
    mine = {(r.source, r.event, r.by): r for r in lifecycle.rules}
    theirs = {(r.source, r.event, r.by): r for r in LIFECYCLE.rules}
    return tuple({(k[0], k[1]) for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)})


# -- the stage ---------------------------------------------------------------------------------
CHECKER_BOUNDS = _bounds()
"""The checker's bounds for the mutants the fast checks leave: small, and enough to reach
every rule a scheduler fires (a session with two turns lends its slot)."""

_NO_BORROWER = "the source state has no borrower (`exclusive`, proved inductive): KEEP and CLEAR both give NOBODY"
_NO_FENCE = "the source state has no fence (`exclusive`, proved inductive): KEEP and CLEAR both give 0"
_NO_OWNER = "a RELEASED record names no owner (`exclusive`, proved inductive): KEEP and CLEAR both give NOBODY"
_ACTOR_IS_OWNER = "only the owner fires the rule (relation OWNER): ACTOR and KEEP give the same owner"
_ACTOR_IS_BORROWER = "only the borrower fires the rule (relation BORROWER): ACTOR and KEEP give the same borrower"
_NO_OP = "a self-loop that rewrites nothing: the move leaves the record as it was"
_SAME_MOVE = "the same move as a declared rule of that state (the turn gives its session back the slot) under another event's name"
_LATER = "a candidate's slot, which no step used, waits for a fence instead of being free at once: later, never unsafe"

_NO_COUNT = "the source state counts no locks (`exclusive`, proved inductive): KEEP and CLEAR both give 0"
_UNLOCKED = "only an unlocked node is evicted (relation OWNER, not PINNED): KEEP and CLEAR both give 0 locks"
_CACHE = {
    **{
        f"{r}: readers from {src}": _NO_COUNT
        for r, src in (
            ("FREE --ALLOC [NONE]", "KEEP"),
            ("TAKEN --ADMIT [OWNER]", "CLEAR"),
            ("TAKEN --ROLLBACK [OWNER]", "KEEP"),
            ("TAKEN --ABORT [OWNER]", "KEEP"),
            ("RUNNING --FINISH [OWNER]", "KEEP"),
            ("RUNNING --RETRACT [OWNER]", "KEEP"),
            ("RUNNING --ABORT [OWNER]", "KEEP"),
            ("RUNNING --PARK [OWNER]", "CLEAR"),
            ("PARKED --LEND [OWNER]", "CLEAR"),
            ("LENT --ADMIT [BORROWER]", "CLEAR"),
            ("LENT --ROLLBACK [BORROWER]", "CLEAR"),
            ("LENT --ABORT [BORROWER]", "CLEAR"),
            ("LENT_RUNNING --FINISH [BORROWER]", "CLEAR"),
            ("LENT_RUNNING --RETRACT [BORROWER]", "CLEAR"),
            ("LENT_RUNNING --ABORT [BORROWER]", "CLEAR"),
            ("PARKED --CLOSE [OWNER]", "KEEP"),
            ("RELEASED --FENCE [DUE]", "KEEP"),
            ("RUNNING --INSERT [OWNER]", "KEEP"),
            ("CACHING --FENCE [DUE]", "KEEP"),
            ("CACHING --EVICT [OWNER]", "KEEP"),
        )
    },
    "CACHED --EVICT [OWNER]: readers from KEEP": _UNLOCKED,
    **{
        f"{r}: borrower from {src}": _NO_BORROWER
        for r, src in (
            ("RUNNING --INSERT [OWNER]", "KEEP"),
            ("CACHING --FENCE [DUE]", "KEEP"),
            ("CACHING --EVICT [OWNER]", "KEEP"),
            ("CACHED --EVICT [OWNER]", "KEEP"),
            ("CACHED --LOCK [NONE]", "CLEAR"),
            ("CACHED --LOCK [READER]", "CLEAR"),
            ("CACHED --UNLOCK [READER]", "CLEAR"),
            ("CACHED --UNLOCK [FULL]", "CLEAR"),
        )
    },
    **{
        f"CACHED --{e}: fence from CLEAR": _NO_FENCE
        for e in (
            "LOCK [NONE]",
            "LOCK [READER]",
            "UNLOCK [READER]",
            "UNLOCK [FULL]",
        )
    },
}
"""The prefix cache's equivalent mutants (and the other rules' mutants of the lock count)."""

EQUIVALENT: dict[str, str] = {
    **_CACHE,
    "FREE --ALLOC [NONE]: borrower from KEEP": "a FREE record has no borrower (`exclusive`): KEEP and CLEAR both give NOBODY",
    "FREE --ALLOC [NONE]: fence from KEEP": "a FREE record has no fence (`exclusive`): KEEP and CLEAR both give 0",
    "TAKEN --ADMIT [OWNER]: owner from ACTOR": _ACTOR_IS_OWNER,
    "TAKEN --ADMIT [OWNER]: borrower from CLEAR": _NO_BORROWER,
    "TAKEN --ADMIT [OWNER]: fence from CLEAR": _NO_FENCE,
    "TAKEN --ADMIT [OWNER]: also from RUNNING": _NO_OP,
    "TAKEN --ROLLBACK [OWNER]: borrower from KEEP": _NO_BORROWER,
    "TAKEN --ROLLBACK [OWNER]: fence from KEEP": _NO_FENCE,
    "TAKEN --ABORT [OWNER]: borrower from KEEP": _NO_BORROWER,
    "TAKEN --ABORT [OWNER]: fence from KEEP": _NO_FENCE,
    "RUNNING --FINISH [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RUNNING --FINISH [OWNER]: also from TAKEN": _LATER,
    "RUNNING --RETRACT [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RUNNING --RETRACT [OWNER]: also from TAKEN": _LATER,
    "RUNNING --ABORT [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RUNNING --PARK [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RUNNING --PARK [OWNER]: fence from CLEAR": _NO_FENCE,
    "PARKED --LEND [OWNER]: owner from ACTOR": _ACTOR_IS_OWNER,
    "PARKED --LEND [OWNER]: fence from CLEAR": _NO_FENCE,
    "LENT --ADMIT [BORROWER]: borrower from ACTOR": _ACTOR_IS_BORROWER,
    "LENT --ADMIT [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT --ADMIT [BORROWER]: also from LENT_RUNNING": _NO_OP,
    "LENT --ROLLBACK [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT --ROLLBACK [BORROWER]: also from LENT_RUNNING": _SAME_MOVE,
    "LENT --ABORT [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT_RUNNING --FINISH [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT_RUNNING --FINISH [BORROWER]: also from LENT": _SAME_MOVE,
    "LENT_RUNNING --RETRACT [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT_RUNNING --RETRACT [BORROWER]: also from LENT": _SAME_MOVE,
    "LENT_RUNNING --ABORT [BORROWER]: fence from CLEAR": _NO_FENCE,
    "PARKED --CLOSE [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RELEASED --FENCE [DUE]: owner from KEEP": _NO_OWNER,
    "RELEASED --FENCE [DUE]: borrower from KEEP": "a RELEASED record has no borrower (`exclusive`): KEEP and CLEAR both give NOBODY",
}
"""Mutants no check kills, each with the reason it changes nothing the properties protect.
The stage fails on a survivor missing here, and on an entry here that some check kills."""


class StageResult(NamedTuple):
    kills: tuple  # tuple[Kill, ...]
    baseline: str  # '' when the declaration as written passes the fast checks
    unlisted: tuple  # survivors not in EQUIVALENT
    wrongly_listed: tuple  # listed in EQUIVALENT, yet killed (or no longer a mutant)
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.baseline and not self.unlisted and not self.wrongly_listed


def run_stage(
    bounds: tuple | None = None, crosshair_timeout: float | None = None, on_kill=None, names=None
) -> StageResult:
    """Judge every mutant (or those named); the declaration as written must pass the same fast
    checks first. `crosshair_timeout`: also run the CrossHair proofs, with that per-condition
    timeout, on each survivor not listed in `EQUIVALENT` (`--thorough`)."""
    bounds = CHECKER_BOUNDS if bounds is None else bounds
    start = time.perf_counter()
    baseline = baseline_check(LIFECYCLE) if names is None else ""  # a partial run judges only its mutants
    kills = []
    for m in mutants():
        if names is not None and m.name not in names:
            continue
        k = judge(m, bounds, crosshair_timeout if m.name not in EQUIVALENT else None)
        kills.append(k)
        if on_kill:
            on_kill(k)
    judged = {k.mutant for k in kills}
    unlisted = tuple(k.mutant for k in kills if not k.killed and k.mutant not in EQUIVALENT)
    listed = EQUIVALENT if names is None else {n: EQUIVALENT[n] for n in EQUIVALENT if n in names}
    wrongly = tuple(n for n in listed if n not in judged or any(k.killed for k in kills if k.mutant == n))
    return StageResult(tuple(kills), baseline, unlisted, wrongly, time.perf_counter() - start)


KILLERS = ("declare", "moves", "shutdown", "pool", "checker", "crosshair")


def summary(r: StageResult) -> str:
    """One line: how many mutants, how each was killed, and what is wrong."""
    counts = {by: sum(k.killed_by == by for k in r.kills) for by in KILLERS}
    text = f"{len(r.kills)} mutants: " + ", ".join(f"{n} {by}" for by, n in counts.items() if n)
    text += f", {sum(not k.killed for k in r.kills)} equivalent (listed)"
    if r.baseline:
        text += f"; THE DECLARATION FAILS: {r.baseline}"
    if r.unlisted:
        text += f"; {len(r.unlisted)} UNLISTED SURVIVORS: {', '.join(r.unlisted[:3])}"
    if r.wrongly_listed:
        text += f"; {len(r.wrongly_listed)} LISTED AS EQUIVALENT BUT KILLED: {', '.join(r.wrongly_listed[:3])}"
    return text


def detail(r: StageResult) -> dict:
    return {
        "kills": [k._asdict() for k in r.kills],
        "baseline": r.baseline,
        "unlisted": list(r.unlisted),
        "wrongly_listed": list(r.wrongly_listed),
        "equivalent": {k.mutant: EQUIVALENT[k.mutant] for k in r.kills if k.mutant in EQUIVALENT},
    }


def matrix_lines(detail: dict) -> list:
    """The kill matrix as a markdown table: one row per declared rule, one column per check."""
    lines = [
        "| rule | mutants | " + " | ".join(KILLERS) + " | equivalent | survived, unlisted |",
        "|---|" + "---:|" * (len(KILLERS) + 3),
    ]
    for rule in RULES:
        mine = [k for k in detail["kills"] if k["mutant"].startswith(_label(rule) + ":")]
        cells = [sum(k["killed_by"] == by for k in mine) for by in KILLERS]
        equivalent = sum(not k["killed_by"] and k["mutant"] in detail["equivalent"] for k in mine)
        unlisted = sum(not k["killed_by"] and k["mutant"] not in detail["equivalent"] for k in mine)
        lines.append(
            f"| {_label(rule)} | {len(mine)} | " + " | ".join(map(str, cells)) + f" | {equivalent} | {unlisted} |"
        )
    return lines


def _show(s: Slot) -> str:
    parts = [s.state.name]
    if s.owner != NOBODY:
        parts.append(f"owner {s.owner}")
    if s.borrower != NOBODY:
        parts.append(f"lent to {s.borrower}")
    if s.fence:
        parts.append(f"fence {s.fence}")
    if s.readers:
        parts.append(f"{s.readers} locks")
    return parts[0] + (f"({', '.join(parts[1:])})" if len(parts) > 1 else "")


def _show_pool(p: Pool) -> str:
    return "[" + ", ".join(_show(s) for s in p.slots) + f"] free {p.free}"


def main() -> int:
    """`python -m slotwarden.verification.mutants.declaration`: the kill matrix."""
    r = run_stage(
        on_kill=lambda k: print(
            f"{k.killed_by or 'SURVIVED':<9} {k.seconds:6.2f} s  {k.mutant}  {k.detail[:110]}", flush=True
        )
    )
    by: dict = {}
    for k in r.kills:
        by[k.killed_by or "survived"] = by.get(k.killed_by or "survived", 0) + 1
    print(
        f"{len(r.kills)} mutants in {r.seconds:.1f} s: {by}; unlisted survivors {len(r.unlisted)}, wrongly listed {len(r.wrongly_listed)}"
    )
    if r.baseline:
        print("the declaration as written fails:", r.baseline)
    return 0 if r.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
