"""The seam: the scheduler's policy hooks, the one place the history mutants override.

Each hook makes one decision and fires its pool events: roll a candidate back, release a
finished, aborted or retracted request's slot, mark a retracted turn's session, close a session,
fence, and the prefix cache's moves. `Scheduler` inherits them; the batch builder
(`admission.py`) and the scheduler's steps call them, never the pool directly for these
decisions, so a mutant that overrides one hook changes that decision everywhere. The checker's
twin makes the same decisions as `Policy` methods (verification/abstract/policy.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from slotwarden.kernels.slots import copy_slots
from slotwarden.model.vocabulary import Actor, Event

if TYPE_CHECKING:
    from slotwarden.runtime.pool import StatePool
    from slotwarden.runtime.radix.cache import PrefixCache
    from slotwarden.runtime.scheduler.request import Request, Session


class Moves:
    """The default policy. It reads the scheduler's pool, its tables of sessions, waiting and
    running requests, and its prefix cache (None when off), declared here."""

    pool: "StatePool"
    sessions: dict
    waiting: object
    running: list
    prefix: "PrefixCache | None"

    def rollback_candidate(self, req: "Request") -> None:
        """A candidate that took its slot does not fit: give back exactly what it took (its
        prefix-cache match included)."""
        self.pool.rollback([req.slot], Actor.request(req.rid))
        req.slot, req.lent = None, False
        self.cache_forget(req)

    def release_finished(self, req: "Request") -> None:
        """A request reached its budget: a plain one releases its slot, a session turn parks
        its fresh slot in the session or gives the lent one back."""
        actor = Actor.request(req.rid)
        if self.cache_donate(req):
            return
        if req.session is None or req.lent:
            self.pool.finish([req.slot], actor)
        else:
            self.pool.park([req.slot], actor, req.session)
            self.sessions[req.session].slot = req.slot

    def release_finished_each(self, reqs: list) -> None:
        """Requests that reached their budget and give their slots back by FINISH (plain
        requests, and session turns on a lent slot), all in one multi-actor pool call. Used
        in place of `release_finished` for each, as long as that one is not replaced."""
        self.pool.fire_each(Event.FINISH, [req.slot for req in reqs], [req.rid for req in reqs])

    def release_aborted(self, req: "Request") -> None:
        """A running request is cancelled: its window goes back, then its slot goes back where
        it came from."""
        self.rollback_window(req)
        self.pool.abort([req.slot], Actor.request(req.rid))

    def release_retracted(self, req: "Request") -> None:
        """A running request is preempted, to be recomputed: its window goes back, then its slot
        goes back where it came from (its own is released, a lent one returns to its session)."""
        self.rollback_window(req)
        self.pool.retract([req.slot], Actor.request(req.rid))

    # speculative decoding (runtime/scheduler/speculative.py)
    def open_window(self, req: "Request", n: int):
        """Take `n` slots for the request's window (ALLOC, then DRAFT makes them its window);
        None, taking nothing, when fewer are free."""
        actor = Actor.request(req.rid)
        ids = self.pool.alloc(n, actor)
        if ids is None:
            return None
        try:
            self.pool.fire(Event.DRAFT, ids, actor)
        except BaseException:
            self.pool.rollback(ids, actor)  # TAKEN, never used: free at once
            raise
        return tuple(ids.tolist())

    def verify_windows(self, reqs: list) -> None:
        """The verify step just launched writes every window: VERIFY, stamped with that step."""
        ids = [i for req in reqs for i in req.window.slots]
        self.pool.fire_each(Event.VERIFY, ids, [req.rid for req in reqs for _ in req.window.slots])

    def commit_window(self, req: "Request", position: int) -> None:
        """The verify is fenced: one COMMIT of the committed slot and the window, all or none;
        once the ledger accepts it and before it writes, the state at window `position` is
        copied into the committed slot (a refused commit copies nothing). The window goes back:
        released, free at the next fence."""
        window = req.window.slots
        src, dst = self.pool.on_device([window[position]]), self.pool.on_device([req.slot])
        ids = np.array((req.slot, *window), dtype=np.int64)
        self.pool.ledger.apply(
            Event.COMMIT, ids, Actor.request(req.rid), before_write=lambda _: copy_slots(self.pool.tensors, src, dst)
        )
        req.window = None

    def rollback_window(self, req: "Request") -> None:
        """A verify that fails or is abandoned: the window goes back (ROLLBACK); the committed
        slot was never written. No window: nothing to do."""
        if req.window is not None:
            self.pool.rollback(list(req.window.slots), Actor.request(req.rid))
            req.window = None

    def turn_retracted(self, s: "Session", req: "Request", lent: bool) -> None:
        """Session `s`'s turn `req` was retracted. A turn that ran on the lent slot advanced the
        session's state in place: that partial state is no checkpoint of the session, which is
        marked stale (the turn's recomputation zeroes the slot and feeds the transcript again).
        The transcript is untouched: only a finished turn adds to it."""
        if lent:
            s.stale = True

    def release_session(self, s: "Session") -> None:
        """A session closes: exactly the slot it owns is released."""
        self.pool.close(Actor.session(s.sid))

    def fence_finished(self) -> None:
        """Fence every step the device has finished (then the prefix cache publishes what
        they wrote and gives back the locks of the copies they made)."""
        self.pool.fence()
        self.cache_after_fence()

    # the prefix cache's moves (no-ops with the cache off)
    def cache_match(self, req: "Request") -> None:
        if self.prefix is not None:
            self.prefix.match(req)

    def cache_forget(self, req: "Request") -> None:
        if self.prefix is not None:
            self.prefix.forget(req)

    def cache_copy(self, req: "Request") -> None:
        if self.prefix is not None:
            self.prefix.copy(req)

    def cache_donate(self, req: "Request") -> bool:
        return self.prefix is not None and self.prefix.donate(req)

    def cache_awaits(self, req: "Request") -> bool:
        return self.prefix is not None and self.prefix.awaits(req)

    def cache_evict(self, n: int = 1) -> int:
        return 0 if self.prefix is None else self.prefix.evict(n, self.waiting, self.running)

    def cache_after_fence(self) -> None:
        if self.prefix is not None:
            self.prefix.after_fence()
