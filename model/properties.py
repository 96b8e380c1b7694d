"""The safety properties of the lifecycle, as named predicates.

Move predicates judge one move (`before`, the event, the actor and its target, `after`); slot
and pool predicates judge records; world predicates judge a pool against who is alive and what
each holds. Each property's name, words, kind and the proofs and checks that establish it are
registered once, in `slotwarden.model.registry`; the proofs, the model checker, the Hypothesis
machines, the declaration mutants, the docs and the verify report all read it from there.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from slotwarden.model.declaration import Lifecycle, relation_of
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import (
    MAX_READERS,
    NOBODY,
    PAD_SLOT,
    Actor,
    ActorKind,
    Event,
    Group,
    Relation,
    Slot,
    State,
)
from slotwarden.model.write_set import Fill, RowKind


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
    """Every slot is in exactly one place of five groups (free, batch-, session-, cache-owned,
    released), counted from independent sources: the length of the free list, the records that
    name an owner and the ownerless records waiting for a fence add up to the capacity; the
    free list names exactly the FREE records, each once, and only real slot ids. `slots[i]` is
    the record of slot id i + 1.

    A record that names an owner while FREE or RELEASED is counted twice, a held record that
    names nobody is not counted, and a free list with a duplicate or a gap is too long or too
    short: each breaks the sum."""
    capacity = len(slots)
    owned = sum(1 for s in slots if s.owner != NOBODY)
    waiting = sum(1 for s in slots if lifecycle.spec(s.state).fenced and lifecycle.spec(s.state).owner is None)
    free_ids = {i + 1 for i, s in enumerate(slots) if s.state is State.FREE}
    return (
        len(free) + owned + waiting == capacity
        and len(free) == len(set(free))
        and set(free) == free_ids
        and only_real_slots(free, capacity)
    )


# -- 4. a released slot is free only after the fence of the step that may use it -------------
IN_BATCH = (State.RUNNING, State.LENT_RUNNING)
"""The states of a slot in the running batch: a step in flight may read and write it."""
IN_FLIGHT = IN_BATCH + (State.VERIFYING,)
"""The states of a slot a step in flight may use: the running batch's, and a window being verified."""


def fence_respected(before: Slot, actor: Actor, after: Slot) -> bool:
    """A RELEASED slot becomes FREE only by the scheduler's fence of a step at or past the
    one it waits for, and a slot a step in flight may use (the running batch's, a window being
    verified) is never freed at once (it is released, to wait for that fence, or stays in its
    session)."""
    if after.state is State.FREE and before.state in IN_FLIGHT:
        return False
    if before.state is State.RELEASED and after.state is State.FREE:
        return actor.kind is ActorKind.SCHEDULER and actor.id >= before.fence
    return True


def release_waits(before: Slot, after: Slot, epoch: int, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """A slot released while step `epoch` is in flight waits for that step's fence (or a
    later one): the step may still read and write it."""
    if lifecycle.spec(after.state).fenced and not lifecycle.spec(before.state).fenced:
        return after.fence >= epoch
    return True


# -- 5. exclusive ownership; the previous holder keeps no handle ------------------------------
def exclusive(slot: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """A held slot has exactly one owner (and a borrower exactly when lent); a free or released
    slot has neither, so nobody keeps a handle on it. Only a shared (cached) slot counts locks,
    within 0..MAX_READERS: the lock count never goes negative nor past its bound."""
    spec = lifecycle.spec(slot.state)
    owner_ok = slot.owner >= 0 if spec.owner is not None else slot.owner == NOBODY
    borrower_ok = slot.borrower >= 0 if spec.lent else slot.borrower == NOBODY
    fence_ok = slot.fence >= 0 if spec.fenced else slot.fence == 0
    readers_ok = 0 <= slot.readers <= MAX_READERS if spec.shared else slot.readers == 0
    return owner_ok and borrower_ok and fence_ok and readers_ok


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


# -- 7. who may act ---------------------------------------------------------------------------
def authority(
    before: Slot, event: Event, actor: Actor, target: int, after: Slot, lifecycle: Lifecycle = LIFECYCLE
) -> bool:
    """Only a held slot's owner, or the request it is lent to (or, for a held slot waiting for a
    fence, the fence of its step), moves it; readers change only its lock count; a slot becomes lent
    (or lent to another request) only by its owning session, and only to the request the
    lend names."""
    if after._replace(readers=before.readers) == before:
        return True  # a lock or unlock changes only the count: readers claim no ownership
    was = lifecycle.spec(before.state)
    if was.owner is not None and relation_of(was, before, actor) not in (
        Relation.OWNER,
        Relation.BORROWER,
        Relation.DUE,
    ):
        return False
    if lifecycle.spec(after.state).lent and after.borrower != before.borrower:
        return (
            was.owner is ActorKind.SESSION
            and actor.kind is ActorKind.SESSION
            and actor.id == before.owner
            and lifecycle.event(event).target is ActorKind.REQUEST
            and after.borrower == target
        )
    return True


def borrow_safe(before: Slot, actor: Actor, after: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """A lent slot stays in its session, with the same owner, while it is lent (no close, no
    release, no hand-over), and only the request it is lent to ends the loan, by giving it
    back to the session."""
    if not lifecycle.spec(before.state).lent:
        return True
    if group(after, lifecycle) is not Group.SESSION_OWNED or after.owner != before.owner:
        return False
    if after.borrower == before.borrower:
        return True
    return actor.kind is ActorKind.REQUEST and actor.id == before.borrower and after.borrower == NOBODY


def handles_follow(
    before: Slot, event: Event, actor: Actor, target: int, after: Slot, lifecycle: Lifecycle = LIFECYCLE
) -> bool:
    """Whoever a move takes a slot from keeps no handle on it: afterwards the record names as
    owner only the owner it had, the actor that took it or the party it was handed to, and as
    borrower only the borrower it had or the request it was lent to, each of the kind the new
    state is held by (a session never inherits a request's id, nor a request a session's)."""
    was, now, spec = lifecycle.spec(before.state), lifecycle.spec(after.state), lifecycle.event(event)
    if now.owner is None:
        owner_ok = after.owner == NOBODY
    else:
        owner_ok = (
            (was.owner is now.owner and after.owner == before.owner)
            or (actor.kind is now.owner and after.owner == actor.id)
            or (spec.target is now.owner and after.owner == target)
        )
    if now.lent:
        borrower_ok = (was.lent and after.borrower == before.borrower) or (
            spec.target is ActorKind.REQUEST and after.borrower == target
        )
    else:
        borrower_ok = after.borrower == NOBODY
    return owner_ok and borrower_ok


def parks_what_ran(before: Slot, after: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """A session (or the prefix cache) takes over only a slot of the running batch: the state
    it keeps was computed by a step, never a candidate's state that no step has run
    (SGLang #31765/#31767: a turn that never ran committed to the session)."""
    now, was = group(after, lifecycle), group(before, lifecycle)
    if now in (Group.SESSION_OWNED, Group.CACHE_OWNED) and was is not now:
        return before.state in IN_BATCH
    return True


# -- 11. the prefix cache ----------------------------------------------------------------------
def cache_read_only(before: Slot, actor: Actor, after: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """A cached slot is never written by a request: a request's move on a cache-owned slot
    changes at most its lock count, by one, and leaves it with its node."""
    if group(before, lifecycle) is not Group.CACHE_OWNED or actor.kind is not ActorKind.REQUEST:
        return True
    return after._replace(readers=before.readers) == before and abs(after.readers - before.readers) <= 1


def evict_unlocked(before: Slot, after: Slot, epoch: int, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """A cache-owned slot leaves its node only while no lock is held on it (none held for a
    copy in flight either: a copy holds its lock until its step is fenced), and only to be
    released, free at the fence of the step in flight; a published slot leaves only that way."""
    if group(before, lifecycle) is not Group.CACHE_OWNED:
        return True
    if group(after, lifecycle) is Group.CACHE_OWNED and after.owner == before.owner:
        return True
    return before.readers == 0 and after.state is State.RELEASED and after.fence >= epoch


def lock_counted(before: Slot, event: Event, after: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """The lock count moves by one at a time, up only by a lock and down only by an unlock, and
    never below zero; a slot joins or leaves the cache with none."""
    if after.readers < 0:
        return False
    if lifecycle.spec(before.state).shared and lifecycle.spec(after.state).shared:
        delta = after.readers - before.readers
        return delta == 0 or (delta == 1 and event is Event.LOCK) or (delta == -1 and event is Event.UNLOCK)
    return after.readers == 0 or before.readers == after.readers


def reads_published(before: Slot, actor: Actor, after: Slot, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """No request reads unpublished state: a lock is taken only on a published (unfenced)
    cached slot, and a slot is published only by the fence of the step that wrote it, so a
    write aborted before its fence is dropped (evicted) unread."""
    was, now = lifecycle.spec(before.state), lifecycle.spec(after.state)
    if after.readers > before.readers and not (was.shared and not was.fenced and now.shared):
        return False
    if was.group is Group.CACHE_OWNED and was.fenced and now.shared:
        return actor.kind is ActorKind.SCHEDULER and actor.id >= before.fence
    if now.shared and not was.shared:
        return was.group is Group.CACHE_OWNED and was.fenced
    return True


def locks_match(slots: tuple, locks: Mapping[int, Iterable[int]], lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """Every cached slot's lock count is the number of live requests holding a lock on it
    (`locks` maps a request id to the slot ids it locked): every unlock matched a lock by the
    same request, and nobody holds a lock on a slot that counts none."""
    held: dict = {}
    for ids in locks.values():
        for i in ids:
            held[i] = held.get(i, 0) + 1
    for i, s in enumerate(slots):
        count = s.readers if lifecycle.spec(s.state).shared else 0
        if held.get(i + 1, 0) != count:
            return False
    return all(1 <= i <= len(slots) for i in held)


# -- 6. quiescence ---------------------------------------------------------------------------
def no_orphans(
    slots: tuple, requests: Iterable[int], sessions: Iterable[int], lifecycle: Lifecycle = LIFECYCLE, nodes=None
) -> bool:
    """Every held slot's owner (and borrower) is still alive: nothing leaks past its holder.
    Cache-owned slots are judged only when the live tree `nodes` is given."""
    requests, sessions = set(requests), set(sessions)
    for s in slots:
        spec = lifecycle.spec(s.state)
        if spec.owner is ActorKind.CACHE and nodes is None:
            continue
        live = {ActorKind.REQUEST: requests, ActorKind.SESSION: sessions, ActorKind.CACHE: set(nodes or ())}.get(
            spec.owner
        )
        if spec.owner is not None and s.owner not in live:
            return False
        if spec.lent and s.borrower not in requests:
            return False
    return True


def quiescent(slots: tuple) -> bool:
    """With no requests, no sessions, an empty prefix cache and after a fence, every slot is FREE."""
    return all(s.state is State.FREE for s in slots)


# -- 15. the step's write set ------------------------------------------------------------------
def _holds(slot: Slot, request: int, lifecycle: Lifecycle) -> bool:
    """Whether request `request` holds `slot`: it owns it, or the slot is lent to it."""
    spec = lifecycle.spec(slot.state)
    owns = spec.owner is ActorKind.REQUEST and slot.owner == request
    return owns or (spec.lent and slot.borrower == request)


def writes_held(rows: tuple, slots: tuple, lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """Every slot a request's row writes is a real slot that request holds: its own, or its
    session's lent to it (never another's, a free one, a cached one, the pad slot)."""
    for r in rows:
        if r.kind is not RowKind.PAD:
            if not 1 <= r.write <= len(slots) or not _holds(slots[r.write - 1], r.actor, lifecycle):
                return False
    return True


def writes_disjoint(rows: tuple) -> bool:
    """No slot but the pad slot is written by two rows of one step."""
    written = [r.write for r in rows if r.write != PAD_SLOT]
    return len(written) == len(set(written))


def pads_to_pad(rows: tuple) -> bool:
    """A padding row reads and writes only the pad slot (never a parked or live request's)."""
    return all(r.write == PAD_SLOT and r.source == PAD_SLOT for r in rows if r.kind is RowKind.PAD)


def ids_in_pool(rows: tuple, capacity: int) -> bool:
    """Every id a step addresses is the pad slot or a real slot 1..capacity: never -1, never
    an id past the pool (an index that wraps or runs off the state tensor)."""
    return all(i == PAD_SLOT or 1 <= i <= capacity for r in rows for i in (r.write, r.source))


def reads_held(rows: tuple, slots: tuple, locks: Mapping[int, Iterable[int]], lifecycle: Lifecycle = LIFECYCLE) -> bool:
    """Every slot a request's row reads is a real slot the request holds, or a published cached
    slot on which it holds a lock (`locks`: slot id -> the requests holding a lock on it)."""
    for r in rows:
        if r.kind is RowKind.PAD:
            continue
        for i in (r.write, r.source):
            if not 1 <= i <= len(slots):
                return False
            slot = slots[i - 1]
            spec = lifecycle.spec(slot.state)
            published = spec.shared and not spec.fenced and r.actor in locks.get(i, ())
            if not (_holds(slot, r.actor, lifecycle) or published):
                return False
    return True


def reads_filled(rows: tuple, fills: tuple) -> bool:
    """No row reads a slot whose state is a previous tenant's: every real slot a request's row
    reads was zeroed, copied into or written by a step since it was taken (`fills[i]`: slot i + 1)."""
    for r in rows:
        if r.kind is not RowKind.PAD:
            for i in (r.write, r.source):
                if 1 <= i <= len(fills) and fills[i - 1] is Fill.STALE:
                    return False
    return True


# -- 16. speculative windows -------------------------------------------------------------------
WINDOW = (State.DRAFT, State.VERIFYING, State.VERIFIED)
"""The states of a slot of a speculative window: it never holds committed state."""
VERIFIED_STATE = (State.VERIFYING, State.VERIFIED)
"""A window slot a verify step has written: uncommitted state no later step may read."""


def publishes_committed(before: Slot, after: Slot) -> bool:
    """Only committed state is published to the prefix cache, parked with a session or shared,
    and committed state never joins a window: a window slot stays in the window until it goes
    back (FREE, or RELEASED to wait for the fence of a step that may still use it), and a slot
    joins a window only fresh, taken for it (vLLM #48375; llama.cpp #26695)."""
    if before.state not in WINDOW:
        return after.state not in WINDOW or before.state is State.TAKEN
    return after.state in WINDOW or after.state in (State.FREE, State.RELEASED)


def commit_fenced(before: Slot, event: Event, actor: Actor, after: Slot) -> bool:
    """The accepted count is read only after the fence of the step that produced it: a written
    window slot is verified only by a fence at or past its step, and committed only once
    verified (vLLM #50021)."""
    if before.state is State.VERIFYING and after.state is State.VERIFIED:
        return actor.kind is ActorKind.SCHEDULER and actor.id >= before.fence
    if event is Event.COMMIT and before.state in WINDOW and after != before:
        return before.state is State.VERIFIED
    return True


def reads_committed(rows: tuple, slots: tuple) -> bool:
    """The next step reads only committed state: no row reads or writes a window slot a verify
    has written and nobody has committed or given back (vLLM #56531)."""
    for r in rows:
        if r.kind is not RowKind.PAD:
            for i in (r.write, r.source):
                if 1 <= i <= len(slots) and slots[i - 1].state in VERIFIED_STATE:
                    return False
    return True


def rollback_restores(rows: tuple, slots: tuple) -> bool:
    """A rollback restores the committed state by never having lost it: a request whose rows
    write its window writes nothing else, so the verify step leaves its committed slot as it
    was (llama.cpp #26695)."""
    verifying = {r.actor for r in rows if r.kind is not RowKind.PAD and _in(slots, r.write, State.DRAFT)}
    return not any(r.actor in verifying and not _in(slots, r.write, State.DRAFT) for r in rows)


def _in(slots: tuple, i: int, state: State) -> bool:
    return 1 <= i <= len(slots) and slots[i - 1].state is state
