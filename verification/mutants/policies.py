"""The same bugs in the checker's twin: each a `Policy` subclass (verification/abstract/policy.py)
that overrides one decision, for the exhaustive checker. The session bugs first, then the
prefix cache's, then the step's write set.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY, Actor, Event, State
from slotwarden.model.write_set import RowKind
from slotwarden.verification import abstract as A
from slotwarden.verification.abstract import Alloc, Fire, Policy, req_actor, session_of


class AbstractLentRollbackFrees(Policy):
    """PR 21404: after the rollback, the request releases the lent slot as if it were done."""

    def rollback_events(self, world, r):
        plan = super().rollback_events(world, r)
        return plan + ((Fire(Event.FINISH, req_actor(r), (r.handle,)),) if r.lent else ())


class AbstractRollbackFreesAdmitted(Policy):
    """PR 16067: the rollback also frees the slot of a request already in the running batch
    (the one with the lowest id: a choice by number, so the checker explores it unreduced)."""

    symmetric = False

    def rollback_events(self, world, r):
        plan = super().rollback_events(world, r)
        admitted = [q for q in world.requests if q.phase == A.RUNNING and q.handle is not None]
        return plan + ((Fire(Event.ROLLBACK, req_actor(admitted[0]), (admitted[0].handle,)),) if admitted else ())


class AbstractRollbackFreesAdmittedTurn(Policy):
    """PR 16067 in a session: the rollback also gives back the slot of a turn already in the
    running batch, as if it had never run (the lent turn with the lowest id)."""

    symmetric = False

    def rollback_events(self, world, r):
        plan = super().rollback_events(world, r)
        turns = [q for q in world.requests if q.phase == A.RUNNING and q.handle is not None and q.lent]
        return plan + ((Fire(Event.ROLLBACK, req_actor(turns[0]), (turns[0].handle,)),) if turns else ())


class AbstractCloseLeaks(Policy):
    """PR 23496: closing a session never frees its slot."""

    def close_events(self, world, s):
        return ()


class AbstractStaleHandleAfterPark(Policy):
    """PR 26941: the request keeps its handle after its state is saved to the session."""

    def handle_after_park(self, world, r, slot):
        return slot


class AbstractSentinelFreed(Policy):
    """PRs 40044 / 40250: a waiting request, which has no slot, frees the `-1` sentinel."""

    def abort_events(self, world, r):
        if r.phase == A.WAITING:
            return (Fire(Event.ABORT, req_actor(r), (-1,)),)
        return super().abort_events(world, r)


class AbstractAbortLeaks(Policy):
    """PR 12693: a candidate aborted before it joins the batch forgets its slot."""

    def abort_events(self, world, r):
        return () if r.phase == A.CANDIDATE else super().abort_events(world, r)


class AbstractEarlyFence(Policy):
    """Overlap: a release waits for the last completed step, not the one in flight."""

    def release_epoch(self, world):
        return world.completed


class AbstractQueuedTurnAbortBricks(Policy):
    """SGLang #31765 / #31767: an aborted turn still waiting in the queue stays its session's
    turn in flight."""

    def turn_after_abort(self, world, s, r):
        return s.turn if r.phase == A.WAITING else super().turn_after_abort(world, s, r)


class AbstractAbortPinsLentSlot(Policy):
    """SGLang #40251: an aborted lent turn never gives its slot back."""

    def abort_events(self, world, r):
        return () if r.lent else super().abort_events(world, r)


class AbstractRejectedTurnClearsLive(Policy):
    """SGLang #36503: an aborted queued turn clears its session's turn in flight."""

    def turn_after_abort(self, world, s, r):
        return None


class AbstractOverlengthAbortRestores(Policy):
    """SGLang #22273: a waiting turn's abort acts on its session's parked slot."""

    def abort_events(self, world, r):
        if r.phase == A.WAITING and r.session is not None and session_of(world, r.session).handle is not None:
            return (Fire(Event.ABORT, req_actor(r), (session_of(world, r.session).handle,)),)
        return super().abort_events(world, r)


# -- the prefix cache's bugs (2025-2026), in the abstract scheduler ------------------------------
class AbstractTombstoneLockSkipped(Policy):
    """SGLang #27147: the match's lock on a tombstoned node is skipped (the inc does nothing),
    yet the request copies from the node and its copy's fence lets go of a lock never taken."""

    def match_events(self, world, r, slot):
        return tuple(d for d in super().match_events(world, r, slot) if not isinstance(d, Fire))


class AbstractCowUnlockOverDecrements(Policy):
    """SGLang #27038: the copy-on-write temp lock is released when the copy's step is launched,
    and again at its fence: the count runs ahead of the locks taken, and the source can be
    evicted while the copy from it is in flight."""

    def launch_events(self, world, copies):
        return tuple(Fire(Event.UNLOCK, Actor.request(rid), (i,)) for rid, i in sorted(copies))


class AbstractCowPublishedBeforeCopy(Policy):
    """SGLang #30986: a donated slot is published at once, before the step still writing it
    (its copy or load) has landed: a reader can match state that is not there yet."""

    def donate_events(self, world, r):
        return tuple(d._replace(epoch=world.completed) for d in super().donate_events(world, r))


class AbstractMatchLeaksOnQueueAbort(Policy):
    """SGLang #20182: a candidate aborted before it runs gives back its fresh slot but not the
    lock its prefix match took: the matched node stays pinned by a request that is gone."""

    def abort_events(self, world, r):
        plan = super().abort_events(world, r)
        if r.phase == A.CANDIDATE:
            return tuple(d for d in plan if d.event is not Event.UNLOCK)
        return plan


class AbstractEvictIgnoresPin(Policy):
    """LMDeploy #4700: eviction goes by another count (the KV blocks' references) and drops a
    node whose state is still locked by a reader."""

    def can_evict(self, world, slot):
        return True


class AbstractPublishAtSchedule(Policy):
    """vLLM #56525: donated state is committed when the next step is scheduled, not at the fence
    of the step writing it: if that write is aborted, a retry loads what was never written."""

    def launch_events(self, world, copies):
        caching = tuple(i + 1 for i, s in enumerate(world.pool.slots) if s.state is State.CACHING)
        return (Fire(Event.FENCE, Actor.fence(world.launched), caching),) if caching else ()


# -- the liveness bugs: every move legal, yet a request or a slot never gets where it must ------
class AbstractRequeueNearCeiling(Policy):
    """vLLM #52520: a request admitted with no free slot left (near the ceiling) is prefilled,
    and at its prefill's fence requeued (its slot given back) to be prefilled again, forever."""

    symmetric = False  # several requeued at one fence give back their slots in id order

    def requeued_at_fence(self, world, r):
        return not r.ran and not world.pool.free


class AbstractReleaseAwaitsLostNotice(Policy):
    """vLLM #50754: a request finishing while nothing is in flight and another waits has its
    slot fenced by a step not yet launched, a notice that never comes while nothing runs: the
    slot is held and the waiter hangs until a lease expires (an abort fences the slot back)."""

    def finish_events(self, world, r):
        plan = super().finish_events(world, r)
        if world.steps or not any(q.phase == A.WAITING for q in world.requests):
            return plan
        return tuple(d._replace(epoch=world.launched + 1) if d.event is Event.FINISH else d for d in plan)

    def abort_events(self, world, r):
        plan = super().abort_events(world, r)
        held = tuple(i + 1 for i, s in enumerate(world.pool.slots) if s.state is State.RELEASED)
        if not held or world.steps:  # nothing in flight: a slot still RELEASED waits for a lost notice
            return plan
        return plan + (Fire(Event.FENCE, Actor.fence(world.launched + 1), held),)


class AbstractTurnAwaitsLostHandoff(Policy):
    """vLLM #50754 (a consumer counting notifications that never come): a session's later turn
    waits for the state its turn before parks; when that turn was aborted nothing is parked,
    and the turn waits with slots free until its lease expires (its abort)."""

    def take_events(self, world, r):
        if r.session is not None:
            s = session_of(world, r.session)
            if s.handle is None and s.turns.index(r.id) > 0:
                return (Alloc(req_actor(r), len(world.pool.slots) + 1),)  # never that many free: it waits
        return super().take_events(world, r)


# -- the step's write set: every move legal, the rows of a launch wrong (`abstract.rows`) --------
# The rows are in the persistent batch's order (by slot), so the rows of the step before, still
# in flight with overlap, are its slots in order: a policy reading them, or any slot by number,
# decides by number, and the checker explores it unreduced.
def _rows_before(world) -> list:
    """The slots of the rows of the step launched before, still in flight (none: [])."""
    return sorted(world.steps[-1].slots) if world.steps else []


def _stale(rows: tuple, world, kind: RowKind) -> tuple:
    """`rows` with each row of `kind` at a row the step in flight had taking that row's slot."""
    before = _rows_before(world)
    return tuple(
        row._replace(write=before[i], source=before[i]) if row.kind is kind and i < len(before) else row
        for i, row in enumerate(rows)
    )


class AbstractPadStaleTail(Policy):
    """TensorRT-LLM #13151: under overlap the padded index buffer is kept from the step before
    and only the batch's own rows are rewritten: a pad row keeps the index the step in flight
    had in that row, a request's that may since have left the batch. Whether a pad row gets a
    stale index (the step before had a row there) does not depend on the slots' numbers, only
    which one it gets: the checker may explore it reduced."""

    def step_rows(self, world, running):
        return _stale(super().step_rows(world, running), world, RowKind.PAD)


class AbstractMinusOnePad(Policy):
    """vLLM #43810: the pad rows use PADDING_SLOT_ID = -1 as a real index."""

    def step_rows(self, world, running):
        rows = super().step_rows(world, running)
        return tuple(row._replace(write=NOBODY, source=NOBODY) if row.kind is RowKind.PAD else row for row in rows)


class AbstractRowBoundState(Policy):
    """tenstorrent/vllm #454: the state is bound to the persistent batch's row, not to the
    request: row i reads and writes the pool's i-th slot, so once a request leaves and the rows
    condense, a request moved up a row runs on a state that is not its own."""

    symmetric = False

    def step_rows(self, world, running):
        rows = super().step_rows(world, running)
        own = RowKind.REQUEST
        return tuple(row._replace(write=i + 1, source=i + 1) if row.kind is own else row for i, row in enumerate(rows))


class AbstractWrongSeedSlot(Policy):
    """vLLM #53142 (#55600): a request's running state index is seeded from the wrong group's
    size: in its first step its row restores the state of the next slot, an unrelated one."""

    symmetric = False

    def step_rows(self, world, running):
        first = _first_steps(world)
        n = len(world.pool.slots)
        return tuple(
            row._replace(source=row.write % n + 1) if row.kind is RowKind.REQUEST and row.actor in first else row
            for row in super().step_rows(world, running)
        )


def _first_steps(world) -> frozenset:
    """The running requests no step has yet run (none launched since they were admitted)."""
    launched = frozenset().union(*(st.requests for st in world.steps)) if world.steps else frozenset()
    return frozenset(r.id for r in world.requests if r.phase == A.RUNNING and not r.ran and r.id not in launched)


class AbstractStaleRowMapping(Policy):
    """vLLM #55951: with the step before still in flight (pipeline parallelism), the state
    update indexes by that step's rows: each request's row takes the slot its row had then (a
    neighbour's, or one freed since)."""

    symmetric = False

    def step_rows(self, world, running):
        return _stale(super().step_rows(world, running), world, RowKind.REQUEST)


class AbstractReusedSlotNotZeroed(Policy):
    """vLLM #56524 (SGLang #39862: a load-back setting the slot index past the alloc that
    zeroes): a taken slot is never zeroed, so its first read is the last tenant's state."""

    def fills(self, world):
        return A.rows.fills(world, zeroes=False)
