"""The speculative-decoding bugs in the checker's twin: each a `Policy` subclass that overrides
one decision about a request's window (verification/abstract/policy.py). Their runtime variants
are in `windows.py`.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY, Event, State
from slotwarden.model.write_set import Row, RowKind
from slotwarden.verification import abstract as A
from slotwarden.verification.abstract import Alloc, Fire, Policy, req_actor
from slotwarden.verification.abstract.world import cached_ids, node_of, window_of


class AbstractLookaheadCached(Policy):
    """vLLM #48375: the lookahead position's state, no valid checkpoint, is kept as a prefix-cache
    hit: at the commit the window's last slot is donated to a node instead of given back."""

    def commit_events(self, world, r):
        window, actor = window_of(world, r.id), req_actor(r)
        if len(cached_ids(world)) >= world.nodes:
            return super().commit_events(world, r)
        last = window[-1]
        rest = (Fire(Event.COMMIT, actor, window[:-1]),) if len(window) > 1 else ()
        return (
            (Fire(Event.COMMIT, actor, (r.handle,)),)
            + rest
            + (Fire(Event.INSERT, actor, (last,), target=node_of(last)),)
        )


class AbstractStaleWindowRead(Policy):
    """vLLM #56531: the speculative and plain paths keep the live state in different slots; a
    request whose verified window is not yet committed runs a plain step on the stale one."""

    def runs_in_step(self, world, r):
        return r.phase == A.RUNNING

    def verify_events(self, world, r):
        window = window_of(world, r.id)
        drafted = window and world.pool.slots[window[0] - 1].state is State.DRAFT
        return super().verify_events(world, r) if drafted else ()

    def step_rows(self, world, running):
        rows = super().step_rows(world, running)
        late = {r.id: r for r in running if window_of(world, r.id) and r.id in world.behind}
        return tuple(
            Row(RowKind.REQUEST, row.actor, late[row.actor].handle, row.write) if row.actor in late else row
            for row in rows
        )


class AbstractVerifyNeverCommits(Policy):
    """SGLang #26351: the verify never copies the accepted states back to the committed slots;
    the window is given back and the next decode reads stale state."""

    def commit_events(self, world, r):
        return (Fire(Event.COMMIT, req_actor(r), window_of(world, r.id)),)


class AbstractWindowOneSlot(Policy):
    """vLLM #41233: the kernel reads and writes 1 + k consecutive slots per request while the
    bookkeeping reserved one (a choice by slot number: explored unreduced)."""

    symmetric = False

    def draft_take(self, world, r):
        return (Alloc(req_actor(r), 1),)

    def step_rows(self, world, running):
        rows = super().step_rows(world, running)
        out: list = []
        for row in rows:
            window = window_of(world, row.actor) if row.kind is RowKind.REQUEST else ()
            if window and row.write == window[0]:
                out += [row._replace(write=window[0] + j, source=window[0] + j - 1) for j in range(world.drafts + 1)]
            elif not window or row.write not in window:
                out.append(row)
        return tuple(out)


class AbstractRollbackInPlace(Policy):
    """llama.cpp #26695: the verify advances the committed state in place, so a rollback of
    it reports success without restoring the state it replaced."""

    def step_rows(self, world, running):
        rows = super().step_rows(world, running)
        verifying = [r for r in running if window_of(world, r.id)]
        return rows + tuple(Row(RowKind.REQUEST, r.id, r.handle, r.handle) for r in verifying)


class AbstractVerifyBeforeAlloc(Policy):
    """SGLang #28484: in lazy mode the verify reads a request's tracking slot index before it
    is allocated: a request about to speculate reads index -1."""

    def step_rows(self, world, running):
        lazy = {r.id for r in running if world.drafts and r.ran and not window_of(world, r.id)}
        return tuple(
            row._replace(source=NOBODY) if row.kind is RowKind.REQUEST and row.actor in lazy else row
            for row in super().step_rows(world, running)
        )


class AbstractCountBeforeFence(Policy):
    """vLLM #50021: under async scheduling the accepted count of a step is read before that
    step's fence: the window is committed while the verify is still in flight."""

    def can_commit(self, world, r):
        states = {world.pool.slots[i - 1].state for i in window_of(world, r.id)}
        return states <= {State.VERIFYING, State.VERIFIED}  # launched: not waiting for its fence
