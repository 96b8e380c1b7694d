"""The safety properties of the lifecycle, as named predicates (BRIEF section 3, rules 1-6).

Slot-level predicates judge one move (`before`, the event and actor, `after`); pool-level
predicates judge a whole pool (`slotwarden.model.pool.Pool`). The proofs, the model checker,
the Hypothesis machines and the runtime's audit all call these same functions.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from .declaration import Lifecycle
from .lifecycle import LIFECYCLE
from .vocabulary import NOBODY, Actor, ActorKind, Event, Group, Slot, State


def group(slot: Slot, lifecycle: Lifecycle = LIFECYCLE) -> Group:
    return lifecycle.spec(slot.state).group


# -- 1. a session-owned slot leaves its session only by that session's close ------------------
def session_kept(before: Slot, event: Event, actor: Actor, after: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """No event but the owning session's close moves a session-owned slot out of the session
    (and none hands it to another session)."""
    if group(before, lifecycle) is not Group.SESSION_OWNED:
        return True
    stays = group(after, lifecycle) is Group.SESSION_OWNED and after.owner == before.owner
    return stays or (event is Event.CLOSE and actor == Actor.session(before.owner))


# -- 2. nothing is freed twice; only real slot ids are ever freed -----------------------------
def freed_once(before: Slot, event: Event, after: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """A slot that is not held (FREE or RELEASED) is never given back again: from RELEASED
    only its fence leads on (to FREE), and FREE is left only by being taken."""
    was = group(before, lifecycle)
    now = group(after, lifecycle)
    if was is Group.FREE:
        return now is not Group.RELEASED and (now is not Group.FREE or after == before)
    if was is Group.RELEASED:
        return now is Group.RELEASED and after == before or (now is Group.FREE and event is Event.FENCE)
    return True


def only_real_slots(ids: Iterable[int], capacity: int) -> bool:
    """Every id is a real slot, 1..capacity: never the pad slot 0, never a sentinel like -1."""
    return all(isinstance(i, int) and 1 <= i <= capacity for i in ids)


# -- 3. conservation -------------------------------------------------------------------------
def conserved(slots: tuple, free: tuple, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """free + batch + session + released = capacity, the free list is exactly the set of FREE
    slots, and it holds no id twice. `slots[i]` is the record of slot id i + 1."""
    capacity = len(slots)
    free_ids = {i + 1 for i, s in enumerate(slots) if s.state is State.FREE}
    counted = sum(1 for s in slots if group(s, lifecycle) in tuple(Group))
    return (
        counted == capacity
        and len(free) == len(set(free))
        and set(free) == free_ids
        and only_real_slots(free, capacity)
    )


# -- 4. a released slot is free only after the fence of the step that may use it -------------
def fence_respected(before: Slot, actor: Actor, after: Slot) -> bool:
    """A RELEASED slot becomes FREE only by the scheduler's fence of a step at or past the
    one it waits for."""
    if before.state is State.RELEASED and after.state is State.FREE:
        return actor.kind is ActorKind.SCHEDULER and actor.id >= before.fence
    return True


# -- 5. exclusive ownership; the previous holder keeps no handle ------------------------------
def exclusive(slot: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """A held slot has exactly one owner (and a borrower exactly when lent); a free or released
    slot has neither, so nobody keeps a handle on it."""
    spec = lifecycle.spec(slot.state)
    owner_ok = slot.owner >= 0 if spec.owner is not None else slot.owner == NOBODY
    borrower_ok = slot.borrower >= 0 if spec.lent else slot.borrower == NOBODY
    fence_ok = slot.fence >= 0 if spec.fenced else slot.fence == 0
    return owner_ok and borrower_ok and fence_ok


def holdings(slots: tuple, actor: Actor, lifecycle: Lifecycle = LIFECYCLE) -> frozenset:
    """The slot ids `actor` has a claim on: those it owns, and those lent to it."""
    found = set()
    for i, s in enumerate(slots):
        spec = lifecycle.spec(s.state)
        if spec.owner is actor.kind and s.owner == actor.id:
            found.add(i + 1)
        if spec.lent and actor.kind is ActorKind.REQUEST and s.borrower == actor.id:
            found.add(i + 1)
    return frozenset(found)


def handles_match(slots: tuple, handles: Mapping[Actor, Iterable[int]], lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """Every actor's handles are exactly the slots it has a claim on: no stale handle after a
    hand-over, no claim its holder forgot."""
    claimed = set()
    for actor, ids in handles.items():
        mine = holdings(slots, actor, lifecycle)
        if frozenset(ids) != mine:
            return False
        claimed |= {(actor, i) for i in mine}
    held = {i + 1 for i, s in enumerate(slots) if group(s, lifecycle) in (Group.BATCH_OWNED, Group.SESSION_OWNED)}
    return held <= {i for _, i in claimed}


# -- 6. quiescence ---------------------------------------------------------------------------
def no_orphans(slots: tuple, requests: Iterable[int], sessions: Iterable[int], lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """Every held slot's owner (and borrower) is still alive: nothing leaks past its holder."""
    requests, sessions = set(requests), set(sessions)
    for s in slots:
        spec = lifecycle.spec(s.state)
        live = requests if spec.owner is ActorKind.REQUEST else sessions
        if spec.owner is not None and s.owner not in live:
            return False
        if spec.lent and s.borrower not in requests:
            return False
    return True


def quiescent(slots: tuple) -> bool:
    """With no requests, no sessions and after a fence, every slot is FREE."""
    return all(s.state is State.FREE for s in slots)


SLOT_PROPERTIES = {
    "session_kept": "1. only the owning session's close moves a session-owned slot out of its session",
    "freed_once": "2. no slot is freed twice; only real slot ids are ever freed",
    "conserved": "3. free + batch + session + released = capacity; the free list is the FREE set, no duplicates",
    "fence_respected": "4. no slot used by an in-flight step becomes FREE before that step's fence",
    "exclusive": "5. every held slot has exactly one owner; the previous holder keeps no handle",
    "quiescent": "6. with no requests, no sessions and after a fence, every slot is FREE",
}
