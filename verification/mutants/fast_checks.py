"""The declaration mutants' fast checks: complete over a finite domain of small records
(owner, borrower, fence and lock counts at and next to the ends), every actor, target and epoch.

- `move_check`: every move property of the registry (and `exclusive` after) on every move;
- `shutdown_check`: the shutdown of `proofs.shut_down` ends FREE from every record;
- `pool_check`: `conserved` over one step of a two-slot pool, every batch;
- `baseline_check`: all three over the whole domain (the declaration as written must pass).
Each returns '' or the first failure with its witness; `where` restricts a check to the
(state, event) pairs a mutant changed (`changed`).
"""

from __future__ import annotations

from itertools import product

from slotwarden.model import proofs
from slotwarden.model.declaration import Lifecycle
from slotwarden.model.errors import LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.pool import Pool
from slotwarden.model.properties import conserved, quiescent
from slotwarden.model.registry import move_faults
from slotwarden.model.step import step
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Actor, Event, Slot, State

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
                    move = f"{event.name} by {actor} (target {target}, epoch {epoch})"
                    return f"{', '.join(bad)}: {move} on {_show(slot)} -> {_show(after)}"
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


def changed(lifecycle: Lifecycle) -> tuple:
    """The (state, event) pairs whose rules differ from the declaration's."""
    mine = {(r.source, r.event, r.by): r for r in lifecycle.rules}
    theirs = {(r.source, r.event, r.by): r for r in LIFECYCLE.rules}
    return tuple({(k[0], k[1]) for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)})


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
