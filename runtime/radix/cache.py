"""The scheduler's prefix cache: a `RadixTree` of recurrent-state slots, moved only by pool events.

On with `SchedulerConfig(prefix_cache=True)`. The tree answers questions and never touches the
pool; `CachePolicy` (mixed into the `Scheduler`) turns its answers into pool events:

- admission: a plain request matches the longest published prefix of its input but the last
  token (at least one token is always fed) and LOCKs that node's slot; it takes a fresh slot
  and, once admitted, copies the cached state into it (copy-on-write) and feeds only the tokens
  after the prefix. Its lock is given back (UNLOCK) at the fence of the step that performs the
  copy, so the source cannot be evicted under the copy. A candidate that rolls back, finds no
  free slot, or leaves the queue unlocks at once (it copied nothing);
- finish: a plain request donates its slot to the node for the tokens its state has consumed
  (INSERT: CACHING). The node is published (matchable) only when the fence of the step in
  flight at the donation lands (CACHING -> CACHED); if that prefix already has a slot, the
  request finishes as without the cache;
- pressure: a candidate that finds no free slot has the cache EVICT its least recently used
  unlocked node (released, free at the fence) before anyone is retracted;
- `flush_cache()` evicts every unlocked node (the pool is quiescent after the next fence);
- parallel sampling (`Scheduler.submit_n`, n > 1): the group's prompt request feeds the prompt
  but its last token and donates its slot like any finished request; its siblings wait in the
  queue (`cache_awaits`) until that donation is published, then each matches it like any cache
  hit, copies it and feeds only the last prompt token (under pressure the cache evicts a state
  that waiting siblings will copy only when nothing else can go and nothing runs). So the
  prompt is prefilled once when the pool has room (in a small pool, eviction or retraction can
  make siblings prefill it again: the prompt request's prefill is then wasted), and every slot move is one of the moves above: no slot has two
  owners, and nothing is matched before its fence. A sibling aborted while waiting holds
  nothing; the prompt request aborted at any point is an ordinary abort (its siblings then
  prefill on their own).

Session turns neither match nor donate: a turn continues its session's own slot, which only
its session's close releases, so sessions work exactly as without the cache beside it.

No insertion at chunk boundaries: a request still prefilling keeps writing its slot, so a
chunk-boundary node would need a second slot and a copy per boundary (SGLang's extra_buffer);
donating only at finish keeps one slot per request and the model's one INSERT per slot.

Each policy step is one method (mutants override one): `cache_match`, `cache_forget`,
`cache_copy`, `cache_donate`, `cache_evict`, `cache_after_fence`, `cache_awaits`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from slotwarden.model.vocabulary import MAX_READERS, Actor, State

from slotwarden.runtime.radix.tree import RadixTree

if TYPE_CHECKING:
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


@dataclass(eq=False)
class PrefixCache:
    """The tree and what the scheduler waits for: `copies`, (step, request id, node, slot) of
    every lock to give back at that step's fence; `unpublished`, node -> slot of every
    donation waiting for its fence."""

    tree: RadixTree = field(default_factory=lambda: RadixTree(max_readers=MAX_READERS))
    copies: deque = field(default_factory=deque)
    unpublished: dict = field(default_factory=dict)
    tally: dict = field(default_factory=lambda: dict.fromkeys(CacheStats._fields, 0))

    def stats(self) -> CacheStats:
        return CacheStats(**self.tally)


class Match(NamedTuple):
    """A candidate's match: the node it locked, that node's slot, the prefix length."""

    node: int
    slot: int
    length: int


class CachePolicy:
    """The scheduler's prefix-cache moves (see the module docstring). Mixed into `Scheduler`;
    every method is a no-op answer when the cache is off (`self.prefix` None)."""

    prefix: PrefixCache | None

    def cache_match(self, req: "Request") -> None:
        """A plain candidate about to take a fresh slot locks the longest published prefix of
        its input but the last token whose slot has room for one more lock (`MAX_READERS`: at
        the bound, a shorter prefix or none matches, and the candidate feeds the rest itself);
        it will feed only what follows (`req.fed`)."""
        cache = self.prefix
        if cache is None or req.session is not None or req.cached is not None or len(req.input) < 2:
            return
        node, length = cache.tree.match(req.input[:-1])
        if node is None:
            return
        slot = cache.tree.info(node).slot
        had = req.rid in self.pool.lock_holders(slot)  # (then the pool refuses a second lock)
        try:
            self.pool.lock([slot], Actor.request(req.rid))
        finally:  # a fault after the pool moved: record the lock all the same
            if not had and req.rid in self.pool.lock_holders(slot):
                cache.tree.lock(node, req.rid)
                req.cached, req.fed = Match(node, slot, length), length

    def cache_forget(self, req: "Request") -> None:
        """A candidate gives its match back unused (it copied nothing): UNLOCK at once."""
        m = req.cached
        if m is None:
            return
        had = req.rid in self.pool.lock_holders(m.slot)
        try:
            self.pool.unlock([m.slot], Actor.request(req.rid))
        finally:  # a fault after the pool moved: record the unlock all the same
            if had and req.rid not in self.pool.lock_holders(m.slot):
                self.prefix.tree.unlock(m.node, req.rid)
                req.cached, req.fed = None, 0

    def cache_copy(self, req: "Request") -> None:
        """The admitted candidate copies the locked state into its fresh slot; the lock is
        given back at the fence of the step being built, which performs the copy."""
        m = req.cached
        if self.prefix is not None and req.session is None:
            self.prefix.tally["lookups"] += 1  # every plain request admitted looked its prefix up
            if req.shared:
                self.prefix.tally["prompt_tokens"] += len(req.input) - req.fed
        if m is None:
            return
        self.pool.copy([m.slot], [req.slot], Actor.request(req.rid))
        self.prefix.copies.append((self.pool.ledger.launched + 1, req.rid, m.node, m.slot))
        self.prefix.tally["hits"] += 1
        self.prefix.tally["tokens_saved"] += m.length
        req.cached = None

    def cache_donate(self, req: "Request") -> bool:
        """A finished plain request donates its slot to the node of the tokens its state has
        consumed (its prompt and every output but the last); False if the cache is off or that
        prefix already holds a slot (then it finishes as usual)."""
        cache = self.prefix
        if cache is None or req.session is not None:
            return False
        tokens = list(req.prompt) + list(req.output[:-1])
        node, donated = cache.tree.insert(tokens, req.slot)
        if not donated:
            return False
        try:
            self.pool.insert([req.slot], Actor.request(req.rid), node)
        except BaseException:
            if self.pool.state_of([req.slot])[0] is not State.CACHING:  # the pool refused: undo the tree
                cache.tree.drop_unpublished(node)
                raise
            cache.unpublished[node] = req.slot
            req.donated = node
            raise
        cache.unpublished[node] = req.slot
        req.donated = node
        cache.tally["inserts"] += 1
        return True

    def cache_awaits(self, req: "Request") -> bool:
        """Whether `req`, a sibling of a parallel-sampling group, still waits for its group's
        prompt request: while that one is live, or its donated state is not yet published.
        Once it ended (finished, aborted, failed) the sibling goes on as a plain request,
        matching whatever the cache holds then."""
        lead = req.awaits
        if lead is None:
            return False
        if not lead.done or (lead.donated is not None and lead.donated in self.prefix.unpublished):
            return True
        req.awaits, req.shares = None, lead.donated
        return False

    def cache_evict(self, n: int = 1) -> int:
        """Evict up to `n` unlocked published nodes, least recently used first, in one pool
        call (each slot by its own node); their slots are free at the fence of the step in
        flight. A group's prompt state that waiting siblings will copy is kept while any
        request runs (it will free a slot: the siblings wait rather than prefill the prompt
        again); with none running it goes after every other node, the group furthest back in
        the queue first. Returns how many were evicted."""
        cache = self.prefix
        if cache is None:
            return 0
        wanted = _wanted(self.waiting)
        nodes = cache.tree.evictable(n + len(wanted))
        if wanted:  # prompt states that waiting siblings will copy: kept while requests run
            spare = [] if self.running else sorted((x for x in nodes if x in wanted), key=lambda x: -wanted[x])
            nodes = [x for x in nodes if x not in wanted] + spare
        nodes = nodes[:n]
        if not nodes:
            return 0
        slots = [cache.tree.info(node).slot for node in nodes]
        done = 0
        try:
            self.pool.evict(slots, nodes)
        finally:  # a fault after the pool moved: record the evictions all the same
            for node, state in zip(nodes, self.pool.state_of(slots)):
                if state is not State.CACHED:
                    cache.tree.evict(node)
                    done += 1
            cache.tally["evictions"] += done
        return done

    def cache_after_fence(self) -> None:
        """After a fence: publish every donation whose write it fenced, and give back every
        lock whose copy it fenced (one pool call, each lock by its own request)."""
        cache = self.prefix
        if cache is None:
            return
        if cache.unpublished:
            slots = list(cache.unpublished.items())
            states = self.pool.state_of([s for _, s in slots])
            for (node, _), state in zip(slots, states):
                if state is State.CACHED:
                    cache.tree.publish(node)
                    del cache.unpublished[node]
        done, due = self.pool.ledger.completed, []
        while len(due) < len(cache.copies) and cache.copies[len(due)][0] <= done:
            due.append(cache.copies[len(due)])
        if not due:
            return
        had = [rid in self.pool.lock_holders(slot) for _, rid, _, slot in due]
        try:
            self.pool.unlock([slot for *_, slot in due], [rid for _, rid, _, _ in due])
        finally:  # a fault after the pool moved: record the unlocks all the same
            kept = []
            for entry, held in zip(due, had):
                cache.copies.popleft()
                _, rid, node, slot = entry
                if held and rid not in self.pool.lock_holders(slot):
                    cache.tree.unlock(node, rid)
                else:
                    kept.append(entry)
            cache.copies.extendleft(reversed(kept))

    def flush_cache(self) -> int:
        """Evict every unlocked published node (what is locked or unpublished stays, and while
        requests run, what waiting siblings will copy)."""
        if self.prefix is None:
            return 0
        return self.cache_evict(len(self.prefix.tree.holding()))


def _wanted(waiting) -> dict:
    """node -> queue position of the first waiting sibling that will copy that node's state
    (its group's prompt state). Read only when the cache must evict."""
    wanted: dict = {}
    for i, r in enumerate(waiting):
        node = r.awaits.donated if r.awaits is not None else r.shares
        if node is not None:
            wanted.setdefault(node, i)
    return wanted


def cache_problems(sched) -> list:
    """Where the tree and the pool disagree: a slot the tree holds that the pool does not say
    its node owns (published or not), a cache-owned slot the tree does not hold, a node's lock
    holders that are not the pool's, a lock held by a request that neither waits with a match
    nor waits for its copy's fence."""
    cache = sched.prefix
    if cache is None:
        return []
    pool, tree, problems = sched.pool, cache.tree, []
    holding = tree.holding()
    for slot, node in holding.items():
        rec = pool.ledger.record(slot)
        want = {State.CACHED} if tree.info(node).published else {State.CACHING}
        if node in cache.unpublished:  # fenced, and published by the scheduler's next look (after a fault)
            want.add(State.CACHED)
        if rec.state not in want or rec.owner != node:
            problems.append(f"node {node} holds slot {slot}, which the pool says is {rec.state.name} of {rec.owner}")
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
    expected = {(rid, slot) for _, rid, _, slot in cache.copies}
    expected |= {(r.rid, r.cached.slot) for r in sched.requests.values() if r.cached is not None}
    held = {(rid, slot) for slot, rids in pool.locks.items() for rid in rids}
    for rid, slot in sorted(held - expected):
        problems.append(f"request {rid} holds a lock on slot {slot} with no match or copy to account for it")
    return problems
