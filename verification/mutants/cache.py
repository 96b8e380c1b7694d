"""The prefix cache's bugs (2025-2026) as runtime mutants: each a `Scheduler` subclass that
overrides one of the cache's policy steps (`runtime/radix/cache.py`) to do what the buggy engine
did, through the same pool API. Run with `prefix_cache=True`; the cached scheduler machine
(follow-ups sharing donated prefixes) hunts them, and each is caught where the runtime checks
the move: the pool's lock record, the table, the fence, or the idle audit."""

from __future__ import annotations

from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.radix.cache import Match
from slotwarden.runtime.scheduler.scheduler import Scheduler


class TombstoneLockSkipped(Scheduler):
    """SGLang #27147: the match's lock on a tombstoned node is skipped (the inc does nothing),
    though the tree counts it; here every matched node is taken as tombstoned. The request
    then copies from a slot it holds no lock on, and its copy's fence would let go of a lock
    never taken: the pool refuses the copy (`IllegalCopy`)."""

    def cache_match(self, req) -> None:
        cache = self.prefix
        if req.session is not None or req.cached is not None or len(req.input) < 2:
            return
        node, length = cache.tree.match(req.input[:-1])
        if node is None:
            return
        cache.tree.lock(node, req.rid)  # the tree's count moves; the pool's lock is skipped
        req.cached, req.fed = Match(node, cache.tree.info(node).slot, length), length

    def cache_forget(self, req) -> None:
        m = req.cached
        if m is not None:
            self.prefix.tree.unlock(m.node, req.rid)
            req.cached, req.fed = None, 0


class CowUnlockOverDecrements(Scheduler):
    """SGLang #27038: the copy-on-write temp lock is released as soon as the copy is issued,
    and again at the fence of the step that copies: the second release is refused by the
    pool's lock record (`IllegalMove`), where the engine's count went below the locks taken
    and let the source be evicted under the copy."""

    def cache_copy(self, req) -> None:
        m = req.cached
        super().cache_copy(req)
        if m is not None:
            self.pool.unlock([m.slot], Actor.request(req.rid))


class CowPublishedBeforeCopy(Scheduler):
    """SGLang #30986: a donated slot is published at once, before the step still writing it
    has landed: a follow-up matches it and locks state that is not there yet (the table has no
    LOCK of an unpublished slot: `IllegalMove`)."""

    def cache_donate(self, req) -> bool:
        donated = super().cache_donate(req)
        if donated:
            node = self.prefix.tree.holding()[req.slot]
            self.prefix.tree.publish(node)
            del self.prefix.unpublished[node]
        return donated


class MatchLeaksOnQueueAbort(Scheduler):
    """SGLang #20182: a candidate that leaves the queue (rolled back, no slot free, aborted)
    forgets its prefix match without giving back the lock it took: the node stays pinned by a
    request that no longer matches it. Caught when it matches again (a second lock by the same
    request: `IllegalMove`) or at the idle audit (a lock nobody accounts for: `AuditFailed`)."""

    def cache_forget(self, req) -> None:
        req.cached, req.fed = None, 0


class EvictIgnoresPin(Scheduler):
    """LMDeploy #4700: eviction goes by another count and takes the least recently used
    published node, locked or not: the pool refuses to evict a slot readers hold
    (`IllegalMove`)."""

    def cache_evict(self, n: int = 1) -> int:
        tree = self.prefix.tree
        nodes = [info for info in map(tree.info, set(tree.holding().values())) if info.published]
        done = 0
        for info in sorted(nodes, key=lambda i: (i.last_access, i.id))[:n]:
            self.pool.evict([info.slot], Actor.cache(info.id))
            if info.locks:  # (the tree would refuse; the pool already has)
                continue
            tree.evict(info.id)
            done += 1
        return done


class PublishAtSchedule(Scheduler):
    """vLLM #56525: donated state is committed when the next step is scheduled, not at the
    fence of the step writing it: the scheduler fences the donated slots at launch, which the
    pool refuses for a step the device has not finished (`FenceError`)."""

    def _launch(self, batch):
        flight = super()._launch(batch)
        caching = [s for s in self.prefix.unpublished.values() if self.pool.state_of([s])[0] is State.CACHING]
        if caching:
            self.pool.fire(Event.FENCE, caching, Actor.fence(self.pool.ledger.launched))
        return flight
