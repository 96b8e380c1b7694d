"""The speculative-decoding bugs as runtime mutants: each a `Scheduler` subclass that overrides one
hook of its windows (`runtime/scheduler/moves.py`, `windows.py`) or the rows of its verify step.

A wrong move raises at the call that makes it (`IllegalMove` from the ledger, `IllegalStep` from
the launch check); a wrong state, every move legal, is caught by the continuity machine, which
replays each request's transcript (`AssertionError`).
"""

from __future__ import annotations

from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.scheduler.scheduler import Scheduler


class LookaheadCached(Scheduler):
    """vLLM #48375: the lookahead position's state, no valid checkpoint, is kept as a prefix-cache
    entry: the commit hands the window's last slot to a cache node."""

    def commit_window(self, req, position: int) -> None:
        self.pool.insert([req.window.slots[-1]], Actor.request(req.rid), 1)
        super().commit_window(req, position)


class VerifyNeverCommits(Scheduler):
    """SGLang #26351: the verify never copies the accepted state back into the committed slot;
    the window is given back and the next step reads stale state."""

    def commit_window(self, req, position: int) -> None:
        self.pool.fire(Event.COMMIT, [req.slot, *req.window.slots], Actor.request(req.rid))
        req.window = None


class WindowOneSlot(Scheduler):
    """vLLM #41233: the bookkeeping reserves one slot per request while the verify reads and
    writes 1 + k consecutive slots from it."""

    def open_window(self, req, n: int):
        taken = super().open_window(req, 1)
        return None if taken is None else tuple(taken[0] + i for i in range(n))

    def unverify(self, batch) -> None:
        for req, _ in batch.items:  # what it really holds goes back
            if req.window is not None:
                self.pool.rollback([req.window.slots[0]], Actor.request(req.rid))
                req.window = None


class CountBeforeFence(Scheduler):
    """vLLM #50021: under async scheduling the accepted count is read, and the window committed,
    before the fence of the step that produced it."""

    def launched_verify(self, batch) -> None:
        super().launched_verify(batch)
        for req, _ in batch.items:
            self.commit_window(req, 0)


class StaleWindowRead(Scheduler):
    """vLLM #56531: the speculative and plain paths keep the live state in different slots; a
    row verifying no draft reads the slot its request's last window committed from."""

    def commit_window(self, req, position: int) -> None:
        self.__dict__.setdefault("stale", {})[req.rid] = req.window.slots[position]
        super().commit_window(req, position)

    def _launch(self, batch):
        stale = self.__dict__.get("stale", {})
        if batch.kind == "verify":
            plan = self.forward.plan(batch)
            for i, (req, win) in enumerate(plan.items):
                if not win.drafts and req.rid in stale:
                    plan.sources[plan.first_row[i]] = stale[req.rid]
        return super()._launch(batch)


class VerifyBeforeAlloc(Scheduler):
    """SGLang #28484: the verify reads a request's tracking slot index before lazy mode has
    allocated it: its first position reads index -1."""

    def _launch(self, batch):
        if batch.kind == "verify":
            plan = self.forward.plan(batch)
            plan.sources[list(plan.first_row)] = -1
        return super()._launch(batch)


class RollbackInPlace(Scheduler):
    """llama.cpp #26695: the verify advances the committed state in place (its first position
    writes the committed slot), so a rollback has nothing to restore."""

    def _launch(self, batch):
        if batch.kind == "verify":
            plan = self.forward.plan(batch)
            for i, (req, _) in enumerate(plan.items):
                plan.slots[plan.first_row[i]] = req.slot
        return super()._launch(batch)
