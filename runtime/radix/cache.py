"""The scheduler's prefix cache: a `RadixTree` of recurrent-state slots, moved only by pool events.

`PrefixCache(pool)` is the scheduler's collaborator when `SchedulerConfig(prefix_cache=True)`.
The tree answers questions and never touches the pool; each method turns one answer into pool
events, and after a fault takes the pool's word for what moved:

    match   a plain candidate LOCKs the longest published prefix of its input but the last token
    copy    once admitted, it copies that state into its fresh slot; UNLOCK at the copy's fence
    forget  a candidate that rolls back or leaves the queue unlocks at once (it copied nothing)
    donate  a finished plain request INSERTs its slot (CACHING); published at the fence (CACHED)
    evict   a candidate short of a slot has the least recently used unlocked node EVICTed
    awaits  a parallel-sampling sibling waits until its group's prompt state is published

Session turns neither match nor donate. Donation happens only at finish: one INSERT a slot.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from slotwarden.model.vocabulary import MAX_READERS, Actor, State
from slotwarden.runtime.radix.tree import RadixTree

if TYPE_CHECKING:
    from slotwarden.runtime.pool import StatePool
    from slotwarden.runtime.scheduler.request import Request


class CacheStats(NamedTuple):
    """What the prefix cache saved: plain requests admitted (each looked up its prefix), those
    that found one (`hits`), the input tokens they did not feed (`tokens_saved`), slots donated,
    slots evicted, and the input tokens the prompt requests of parallel-sampling groups were
    admitted to feed (`prompt_tokens`: prefill that runs only with the cache on, so
    `tokens_saved - prompt_tokens` is what the cache saved net)."""

    lookups: int
    hits: int
    tokens_saved: int
    inserts: int
    evictions: int
    prompt_tokens: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0


class Match(NamedTuple):
    """A candidate's match: the node it locked, that node's slot, the prefix length."""

    node: int
    slot: int
    length: int


class PrefixCache:
    """The tree, the pool it moves, and what it waits for: `copies`, (step, request id, node,
    slot) of every lock to give back at that step's fence; `unpublished`, node -> slot of every
    donation waiting for its fence; `tally`, the counts behind `stats()`."""

    def __init__(self, pool: "StatePool"):
        self.pool = pool
        self.tree = RadixTree(max_readers=MAX_READERS)
        self.copies: deque = deque()
        self.unpublished: dict = {}
        self.tally: dict = dict.fromkeys(CacheStats._fields, 0)

    def stats(self) -> CacheStats:
        return CacheStats(**self.tally)

    def match(self, req: "Request") -> None:
        """A plain candidate about to take a fresh slot locks the longest published prefix of
        its input but the last token whose slot has room for one more lock (`MAX_READERS`: at
        the bound, a shorter prefix or none matches, and the candidate feeds the rest itself);
        it will feed only what follows (`req.fed`)."""
        if req.session is not None or req.cached is not None or len(req.input) < 2:
            return
        node, length = self.tree.match(req.input[:-1])
        if node is None:
            return
        slot = self.tree.info(node).slot
        had = req.rid in self.pool.lock_holders(slot)  # (then the pool refuses a second lock)
        try:
            self.pool.lock([slot], Actor.request(req.rid))
        finally:  # a fault after the pool moved: record the lock all the same
            if not had and req.rid in self.pool.lock_holders(slot):
                self.tree.lock(node, req.rid)
                req.cached, req.fed = Match(node, slot, length), length

    def forget(self, req: "Request") -> None:
        """A candidate gives its match back unused (it copied nothing): UNLOCK at once."""
        m = req.cached
        if m is None:
            return
        had = req.rid in self.pool.lock_holders(m.slot)
        try:
            self.pool.unlock([m.slot], Actor.request(req.rid))
        finally:  # a fault after the pool moved: record the unlock all the same
            if had and req.rid not in self.pool.lock_holders(m.slot):
                self.tree.unlock(m.node, req.rid)
                req.cached, req.fed = None, 0

    def copy(self, req: "Request") -> None:
        """The admitted candidate copies the locked state into its fresh slot; the lock is
        given back at the fence of the step being built, which performs the copy."""
        m = req.cached
        if req.session is None:
            self.tally["lookups"] += 1  # every plain request admitted looked its prefix up
            if req.shared:
                self.tally["prompt_tokens"] += len(req.input) - req.fed
        if m is None:
            return
        self.pool.copy([m.slot], [req.slot], Actor.request(req.rid))
        self.copies.append((self.pool.ledger.launched + 1, req.rid, m.node, m.slot))
        self.tally["hits"] += 1
        self.tally["tokens_saved"] += m.length
        req.cached = None

    def donate(self, req: "Request") -> bool:
        """A finished plain request donates its slot to the node of the tokens its state has
        consumed (its prompt and every output but the last); False if that prefix already
        holds a slot (then it finishes as usual)."""
        if req.session is not None:
            return False
        tokens = list(req.prompt) + list(req.output[:-1])
        node, donated = self.tree.insert(tokens, req.slot)
        if not donated:
            return False
        try:
            self.pool.insert([req.slot], Actor.request(req.rid), node)
        except BaseException:
            if self.pool.state_of([req.slot])[0] is not State.CACHING:  # the pool refused: undo the tree
                self.tree.drop_unpublished(node)
                raise
            self.unpublished[node] = req.slot
            req.donated = node
            raise
        self.unpublished[node] = req.slot
        req.donated = node
        self.tally["inserts"] += 1
        return True

    def awaits(self, req: "Request") -> bool:
        """Whether `req`, a sibling of a parallel-sampling group, still waits for its group's
        prompt request: while that one is live, or its donated state is not yet published.
        Once it ended (finished, aborted, failed) the sibling goes on as a plain request,
        matching whatever the cache holds then."""
        lead = req.awaits
        if lead is None:
            return False
        if not lead.done or (lead.donated is not None and lead.donated in self.unpublished):
            return True
        req.awaits, req.shares = None, lead.donated
        return False

    def evict(self, n: int, waiting, running) -> int:
        """Evict up to `n` unlocked published nodes, least recently used first, in one pool
        call (each slot by its own node); their slots are free at the fence of the step in
        flight. A group's prompt state that `waiting` siblings will copy is kept while any
        request is `running` (it will free a slot: the siblings wait rather than prefill the
        prompt again); with none running it goes after every other node, the group furthest
        back in the queue first. Returns how many were evicted."""
        wanted = _wanted(waiting)
        nodes = self.tree.evictable(n + len(wanted))
        if wanted:  # prompt states that waiting siblings will copy: kept while requests run
            spare = [] if running else sorted((x for x in nodes if x in wanted), key=lambda x: -wanted[x])
            nodes = [x for x in nodes if x not in wanted] + spare
        nodes = nodes[:n]
        if not nodes:
            return 0
        slots = [self.tree.info(node).slot for node in nodes]
        done = 0
        try:
            self.pool.evict(slots, nodes)
        finally:  # a fault after the pool moved: record the evictions all the same
            for node, state in zip(nodes, self.pool.state_of(slots)):
                if state is not State.CACHED:
                    self.tree.evict(node)
                    done += 1
            self.tally["evictions"] += done
        return done

    def after_fence(self) -> None:
        """After a fence: publish every donation whose write it fenced, and give back every
        lock whose copy it fenced (one pool call, each lock by its own request)."""
        if self.unpublished:
            slots = list(self.unpublished.items())
            states = self.pool.state_of([s for _, s in slots])
            for (node, _), state in zip(slots, states):
                if state is State.CACHED:
                    self.tree.publish(node)
                    del self.unpublished[node]
        done, due = self.pool.ledger.completed, []
        while len(due) < len(self.copies) and self.copies[len(due)][0] <= done:
            due.append(self.copies[len(due)])
        if not due:
            return
        had = [rid in self.pool.lock_holders(slot) for _, rid, _, slot in due]
        try:
            self.pool.unlock([slot for *_, slot in due], [rid for _, rid, _, _ in due])
        finally:  # a fault after the pool moved: record the unlocks all the same
            kept = []
            for entry, held in zip(due, had):
                self.copies.popleft()
                _, rid, node, slot = entry
                if held and rid not in self.pool.lock_holders(slot):
                    self.tree.unlock(node, rid)
                else:
                    kept.append(entry)
            self.copies.extendleft(reversed(kept))

    def problems(self, requests) -> list:
        """Where the tree and the pool disagree: a slot the tree holds that the pool does not
        say its node owns (published or not), a cache-owned slot the tree does not hold, a
        node's lock holders that are not the pool's, a lock held by a request (of `requests`,
        the live ones) that neither waits with a match nor waits for its copy's fence."""
        pool, tree, problems = self.pool, self.tree, []
        holding = tree.holding()
        for slot, node in holding.items():
            rec = pool.ledger.record(slot)
            want = {State.CACHED} if tree.info(node).published else {State.CACHING}
            if node in self.unpublished:  # fenced, and published by the scheduler's next look (after a fault)
                want.add(State.CACHED)
            if rec.state not in want or rec.owner != node:
                problems.append(
                    f"node {node} holds slot {slot}, which the pool says is {rec.state.name} of {rec.owner}"
                )
            elif tree.info(node).holders != pool.lock_holders(slot):
                problems.append(
                    f"node {node}: the tree says requests {sorted(tree.info(node).holders)} lock slot {slot}, "
                    f"the pool {sorted(pool.lock_holders(slot))}"
                )
        states = pool.ledger.cols.state
        cached = np.flatnonzero((states == int(State.CACHING)) | (states == int(State.CACHED))).tolist()
        for slot in cached:
            if slot not in holding:
                problems.append(f"slot {slot} is cache-owned, but no node of the tree holds it")
        expected = {(rid, slot) for _, rid, _, slot in self.copies}
        expected |= {(r.rid, r.cached.slot) for r in requests.values() if r.cached is not None}
        held = {(rid, slot) for slot, rids in pool.locks.items() for rid in rids}
        for rid, slot in sorted(held - expected):
            problems.append(f"request {rid} holds a lock on slot {slot} with no match or copy to account for it")
        return problems


def _wanted(waiting) -> dict:
    """node -> queue position of the first waiting sibling that will copy that node's state
    (its group's prompt state). Read only when the cache must evict."""
    wanted: dict = {}
    for i, r in enumerate(waiting):
        node = r.awaits.donated if r.awaits is not None else r.shares
        if node is not None:
            wanted.setdefault(node, i)
    return wanted
