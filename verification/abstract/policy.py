"""The abstract scheduler's decisions: which events it fires at each decision point.

Every "which event does the scheduler fire here" decision is a method of `Policy`; the default
`Policy` is the correct scheduler. A mutant (a bug of the SGLang history) subclasses `Policy` and
overrides one method; the checker runs it unchanged.

The checker's symmetry reduction treats request ids, session ids and slot ids as interchangeable
names (`symmetry.py`); a policy whose decisions depend on the numbers themselves (e.g. "the
lowest id first", "slot 1 is special") sets `symmetric = False`, and the checker then explores
it without the reduction.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Actor, Event, State

from slotwarden.verification.abstract import rows as _rows
from slotwarden.verification.abstract.world import (
    PENDING,
    RUNNING,
    WAITING,
    Request,
    Session,
    World,
    node_of,
    session_of,
    window_of,
)


class Fire(NamedTuple):
    """A decision: fire `event` by `actor` on slots `ids` (with `target` for LEND, PARK and
    INSERT); `epoch`: the step a released or donated slot waits for (None: the policy's
    `release_epoch`)."""

    event: Event
    actor: Actor
    ids: tuple
    target: int = NOBODY
    epoch: int | None = None


class Alloc(NamedTuple):
    """A decision: `actor` takes `n` slots from the head of the free list (no free slot: the
    action is not enabled)."""

    actor: Actor
    n: int = 1


def req_actor(r: Request) -> Actor:
    try:
        return _REQUESTS[r.id]  # made once per id: a policy names its actor at every decision
    except KeyError:
        found = _REQUESTS[r.id] = Actor.request(r.id)
        return found


def ses_actor(s: Session) -> Actor:
    try:
        return _SESSIONS[s.id]
    except KeyError:
        found = _SESSIONS[s.id] = Actor.session(s.id)
        return found


_REQUESTS: dict = {}  # id -> its actor
_SESSIONS: dict = {}


class Policy:
    """What the scheduler fires at each decision point. The default is the correct scheduler.

    Each `*_events` method returns a tuple of `Fire` / `Alloc` decisions, applied in order;
    `world` is the world before the action, `r`/`s` the current record of the request or
    session concerned. The bookkeeping of phases and handles is the abstract scheduler's;
    the places where a handle or a session's turn is a decision (`handle_after_park`,
    `turn_after_abort`) are here too. A mutant subclasses this and overrides one method.
    """

    name = "correct"
    symmetric = True  # decisions never depend on the numeric value of an id (a request's, a session's, a slot's)

    def release_epoch(self, world: World) -> int:
        """The step whose fence frees a slot released now: the newest launched one, which may
        still use it. Must be pure and must not raise: an action asks it only when one of its
        decisions leaves `Fire.epoch` unset."""
        return world.launched

    def take_events(self, world: World, r: Request) -> tuple:
        """A WAITING request becomes a candidate: a turn borrows its session's parked slot,
        anything else takes a free one."""
        if r.session is not None:
            s = session_of(world, r.session)
            if s.handle is not None:
                return (Fire(Event.LEND, ses_actor(s), (s.handle,), target=r.id),)
        return (Alloc(req_actor(r), 1),)

    def admit_events(self, world: World, r: Request) -> tuple:
        return (Fire(Event.ADMIT, req_actor(r), (r.handle,)),)

    def can_rollback(self, world: World, r: Request) -> bool:
        """Any candidate may turn out not to fit."""
        return True

    def rollback_events(self, world: World, r: Request) -> tuple:
        """The candidate did not fit: ROLLBACK gives back what it took, to where it came from
        (a lent slot to its session)."""
        return (Fire(Event.ROLLBACK, req_actor(r), (r.handle,)),) + self.unmatch_events(world, r)

    def finish_events(self, world: World, r: Request) -> tuple:
        """A plain request or a lent turn finishes (a lent slot goes back to its session); a
        session's fresh turn parks its state in the session."""
        if r.session is not None and not r.lent:
            return (Fire(Event.PARK, req_actor(r), (r.handle,), target=r.session),)
        return (Fire(Event.FINISH, req_actor(r), (r.handle,)),)

    def handle_after_park(self, world: World, r: Request, slot: int) -> int | None:
        """The handle a request keeps after parking `slot` in its session: none."""
        return None

    def requeued_at_fence(self, world: World, r: Request) -> bool:
        """Whether the fence of a step the request ran in sends it back to wait (its slot given
        back as by `retract_events`) instead of letting it go on: never."""
        return False

    def can_retract(self, world: World, r: Request) -> bool:
        """Any running request may be retracted: one on its own slot frees that slot, a session
        turn on its lent slot frees a seat in the running batch (the slot stays with the
        session)."""
        return True

    def retract_events(self, world: World, r: Request) -> tuple:
        """RETRACT gives back what the request holds, to where it came from (a lent slot to its
        session)."""
        own = (Fire(Event.RETRACT, req_actor(r), (r.handle,)),) + self.unmatch_events(world, r)
        return self.reject_events(world, r) + own if world.windows else own

    def abort_events(self, world: World, r: Request) -> tuple:
        """A queued or waiting request holds nothing; anything else gives back what it holds
        (its speculative window first)."""
        if r.phase in (PENDING, WAITING) or r.handle is None:
            return ()
        own = (Fire(Event.ABORT, req_actor(r), (r.handle,)),) + self.unmatch_events(world, r)
        return self.reject_events(world, r) + own if world.windows else own

    def turn_after_abort(self, world: World, s: Session, r: Request) -> int | None:
        """The session's turn in flight once its turn `r` is aborted: none if `r` was it, else
        unchanged (an aborted queued turn leaves the live one alone)."""
        return None if s.turn == r.id else s.turn

    def close_events(self, world: World, s: Session) -> tuple:
        """A session closes: it releases exactly the slot it owns, if any."""
        if s.handle is None:
            return ()
        return (Fire(Event.CLOSE, ses_actor(s), (s.handle,)),)

    # -- the prefix cache (worlds with `Bounds.nodes` > 0) ---------------------------------
    def can_match(self, world: World, r: Request, slot: int) -> bool:
        """A request taking a fresh slot may match a published node with room for one more lock,
        unless it still holds a lock there: a request retracted while its copy from that node
        is in flight keeps the copy's lock until the step's fence, and one request holds at
        most one lock per slot."""
        rec = world.pool.slots[slot - 1]
        return rec.state is State.CACHED and rec.readers < MAX_READERS and (r.id, slot) not in world.pool.locks

    def match_events(self, world: World, r: Request, slot: int) -> tuple:
        """A request matches the node holding cached `slot`: it locks the cached slot and takes a
        fresh one (the runtime's order), to copy from the cached one in its first step
        (copy-on-write); with no free slot the match is not made."""
        return (Fire(Event.LOCK, req_actor(r), (slot,)), Alloc(req_actor(r), 1))

    def unmatch_events(self, world: World, r: Request) -> tuple:
        """A request leaving before its copy step was launched lets go of its match's lock
        (after giving back its slot, as the runtime does)."""
        return () if r.src is None else (Fire(Event.UNLOCK, req_actor(r), (r.src,)),)

    def step_rows(self, world: World, running) -> tuple:
        """The rows of the step launched now over the `running` requests (`rows.step_rows`:
        each request's row on its slot, in the persistent batch's order, padded with pad rows
        on the pad slot to the next captured size)."""
        return _rows.step_rows(world, running)

    def fills(self, world: World) -> tuple:
        """What each slot holds (`rows.fills`): an alloc zeroes the slot it takes."""
        return _rows.fills(world)

    def launch_events(self, world: World, copies: frozenset) -> tuple:
        """At a launch: nothing fires (the copies' locks are held until the step's fence)."""
        return ()

    def copy_done_events(self, world: World, rid: int, slot: int) -> tuple:
        """The fence of the step that copied from cached `slot` for request `rid`: the lock goes."""
        return (Fire(Event.UNLOCK, Actor.request(rid), (slot,)),)

    def can_donate(self, world: World, r: Request) -> bool:
        """A plain request on its own slot may donate its state instead of finishing."""
        return r.session is None and not r.lent

    def donate_events(self, world: World, r: Request) -> tuple:
        """The finishing request donates its slot to a new node, published at the fence of the
        step in flight (which may still write it)."""
        return (Fire(Event.INSERT, req_actor(r), (r.handle,), target=node_of(r.handle)),)

    def can_evict(self, world: World, slot: int) -> bool:
        """The cache may drop any node nobody holds a lock on, at any time (pressure or not:
        a real cache's LRU choice is one of these)."""
        return world.pool.slots[slot - 1].readers == 0

    def evict_events(self, world: World, slot: int) -> tuple:
        """The node drops its slot: released, free at the fence (an unpublished write is
        dropped unread)."""
        return (Fire(Event.EVICT, Actor.cache(world.pool.slots[slot - 1].owner), (slot,)),)

    # -- speculative decoding (worlds with `Bounds.drafts` > 0) ----------------------------
    def can_draft(self, world: World, r: Request) -> bool:
        """A running request that has run, copies from no cached slot and holds no window may
        open one: its next step verifies drafts instead of decoding one token."""
        return r.ran and r.src is None

    def draft_take(self, world: World, r: Request) -> tuple:
        """The window's slots: one per verified position, drafts + 1 (none free: no window)."""
        return (Alloc(req_actor(r), world.drafts + 1),)

    def draft_events(self, world: World, r: Request, ids: tuple) -> tuple:
        """The slots taken become the request's window."""
        return (Fire(Event.DRAFT, req_actor(r), ids),)

    def runs_in_step(self, world: World, r: Request) -> bool:
        """A running request runs in the next step unless its window was verified and waits for
        its commit or rollback: the step reads only committed state."""
        return r.phase == RUNNING and not any(
            world.pool.slots[i - 1].state in _VERIFIED_OR_VERIFYING for i in window_of(world, r.id)
        )

    def verify_events(self, world: World, r: Request) -> tuple:
        """At a launch, a request with a window verifies: the step launched now writes every
        window slot, which waits for that step's fence (not the one before)."""
        window = window_of(world, r.id)
        return (Fire(Event.VERIFY, req_actor(r), window, epoch=world.launched + 1),) if window else ()

    def can_commit(self, world: World, r: Request) -> bool:
        """The accepted count is read, and the window committed, only once the verify step is
        fenced: every window slot is VERIFIED."""
        return all(world.pool.slots[i - 1].state is State.VERIFIED for i in window_of(world, r.id))

    def commit_events(self, world: World, r: Request) -> tuple:
        """The accepted position's state is copied into the committed slot (COMMIT on it), then
        the window goes back (COMMIT on its slots: released, free at the fence)."""
        actor = req_actor(r)
        return (Fire(Event.COMMIT, actor, (r.handle,)), Fire(Event.COMMIT, actor, window_of(world, r.id)))

    def reject_events(self, world: World, r: Request) -> tuple:
        """A verify that fails or is abandoned: ROLLBACK gives the window back; the committed
        slot is untouched."""
        window = window_of(world, r.id)
        return (Fire(Event.ROLLBACK, req_actor(r), window),) if window else ()


_VERIFIED_OR_VERIFYING = (State.VERIFYING, State.VERIFIED)
