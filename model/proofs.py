"""Contracts that state the safety properties over the model, for CrossHair to confirm.

Each `prove_*` function is a contracted wrapper (PEP 316 docstring contracts) around `step`
or a bounded run of several moves; CrossHair explores every path through it and must report
"confirmed over all paths". The lifecycle a proof runs against is a module global so a test
can point the same proofs at a deliberately wrong declaration and watch them fail.
"""

from __future__ import annotations

from .declaration import Lifecycle
from .errors import IllegalMove
from .lifecycle import LIFECYCLE
from .properties import (  # noqa: F401  the contracts in the docstrings call them
    conserved,
    exclusive,
    fence_respected,
    freed_once,
    group,
    no_orphans,
    quiescent,
    session_kept,
)
from .pool import settle
from .step import step
from .vocabulary import FREE_SLOT, NOBODY, Actor, Event, Group, Slot, State

SUBJECT: list[Lifecycle] = [LIFECYCLE]
"""The lifecycle under proof (a one-element list so tests can swap it)."""


def _step(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """`step`, where an illegal move leaves the slot as it was (as the runtime guarantees)."""
    try:
        return step(slot, event, actor, target, epoch, SUBJECT[0])
    except IllegalMove:
        return slot


def prove_session_kept(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 1, one move: only the owning session's close takes a slot out of its session.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: session_kept(slot, event, actor, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_freed_once(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 2, one move: a slot that is not held is never given back again.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: freed_once(slot, event, __return__, SUBJECT[0])
    """
    return _step(slot, event, actor, target, epoch)


def prove_fence_respected(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 4, one move: a released slot is free only after the fence of its step.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0
    post: fence_respected(slot, actor, __return__)
    """
    return _step(slot, event, actor, target, epoch)


def prove_exclusive(slot: Slot, event: Event, actor: Actor, target: int, epoch: int) -> Slot:
    """Property 5, one move: exclusive ownership is inductive; no holder keeps a handle.

    pre: exclusive(slot, SUBJECT[0])
    pre: epoch >= 0 and actor.id >= 0
    post: exclusive(__return__, SUBJECT[0])
    post: __return__.owner in (NOBODY, slot.owner, actor.id, target)
    """
    return _step(slot, event, actor, target, epoch)


CAST = (Actor.session(7), Actor.session(8), Actor.request(3), Actor.request(4), Actor.fence(1))
"""Who may act in the bounded runs: the owning session 7, another session, the request 3 that
lends target, another request, and the fence."""


def prove_session_kept_over_runs(e1: Event, who1: int, e2: Event, who2: int) -> tuple:
    """Property 1 over every two-move run from a slot parked in session 7 (the path the real
    bug took: the session lends it to request 3, then anything: rollback, abort, finish, ...).
    Returns the slot at the end and whether every move kept the session's slot.

    pre: 0 <= who1 < 5 and 0 <= who2 < 5
    post: __return__[1]
    post: group(__return__[0], SUBJECT[0]) is Group.SESSION_OWNED or Event.CLOSE in (e1, e2)
    """
    slot, kept = Slot(State.PARKED, owner=7), True
    for event, who in ((e1, who1), (e2, who2)):
        after = _step(slot, event, CAST[who], 3, 1)
        kept = kept and session_kept(slot, event, CAST[who], after, SUBJECT[0])
        slot = after
    return slot, kept


ORDERS = ((1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1))


def prove_conserved(was_free: tuple[bool, bool, bool], now_free: tuple[bool, bool, bool], order: int, moved: int) -> tuple:
    """Property 3 on a pool of three slots: whichever slots a move frees or takes, the pool's
    free-list rebuild (`slotwarden.model.pool.settle`) keeps the free list equal to the FREE
    set, without duplicates. `settle` reads only whether a slot is FREE, so each slot is FREE
    or not; the free list before is any order of the FREE slots, the batch any order of ids.
    With the one-move proofs this makes conservation inductive.

    pre: 0 <= order < 6 and 0 <= moved < 6
    post: conserved(tuple(_slot(f) for f in now_free), __return__, SUBJECT[0])
    """
    before = tuple(_slot(f) for f in was_free)
    free = tuple(i for i in ORDERS[order] if was_free[i - 1])
    if not conserved(before, free, SUBJECT[0]):
        raise AssertionError("the pool before the move is not conserved")
    return settle(free, tuple(_slot(f) for f in now_free), ORDERS[moved])


def _slot(free: bool) -> Slot:
    return FREE_SLOT if free else Slot(State.RELEASED)


def _record(state: State, fence: int) -> Slot:
    """A well-formed record in `state`, owned by 7 and lent to 8 where the state has those."""
    spec = SUBJECT[0].spec(state)
    return Slot(state, 7 if spec.owner is not None else NOBODY, 8 if spec.lent else NOBODY, fence if spec.fenced else 0)


def prove_quiescent(st1: State, st2: State, f1: int, f2: int, completed: int) -> tuple:
    """Property 6: once every owner is gone (no live request; session 7, the last one, closes)
    and a fence covers every release, no slot is left behind.

    pre: 0 <= f1 <= completed and 0 <= f2 <= completed and completed >= 1
    pre: no_orphans((_record(st1, f1), _record(st2, f2)), (), (7,), SUBJECT[0])
    post: quiescent(__return__)
    """
    slots = []
    for s in (_record(st1, f1), _record(st2, f2)):
        if group(s, SUBJECT[0]) is Group.SESSION_OWNED:
            s = _step(s, Event.CLOSE, Actor.session(7), NOBODY, completed)
        if s.state is State.RELEASED:
            s = _step(s, Event.FENCE, Actor.fence(completed), NOBODY, completed)
        slots.append(s)
    return tuple(slots)


PROOFS = {
    "session_kept": prove_session_kept,
    "session_kept_over_runs": prove_session_kept_over_runs,
    "freed_once": prove_freed_once,
    "conserved": prove_conserved,
    "fence_respected": prove_fence_respected,
    "exclusive": prove_exclusive,
    "quiescent": prove_quiescent,
}
"""Every contracted function in model/, keyed by the property it proves."""
