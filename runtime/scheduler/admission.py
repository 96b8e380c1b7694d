"""Building the next batch: chunked prefills first, then waiting candidates one by one.

A candidate takes its slot first (a fresh one, or its session's parked slot lent to it) and only
then is checked against the token budget and the running limit; one that does not fit is rolled
back: what it took goes back where it came from. The candidates that fit are admitted together,
in one multi-actor pool call. Once one finds no free slot, only turns whose session holds a slot
may pass it. With no prefill work, the batch decodes one token for every running request, or
verifies the windows of speculative ones (`windows.py`).

Retraction: a head of queue starved for `retract_after` steps (of a slot or a seat) retracts one
running request (`pick_victim`), which waits again and is recomputed later.

Faults: each move is one pool call followed by the builder's record of it. If the call raises,
the pool's word is taken (`_adopt`): a move it made is recorded, one it refused is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.scheduler.request import Phase, Request
from slotwarden.runtime.scheduler.sessions import turn_input
from slotwarden.runtime.scheduler.windows import open_windows

if TYPE_CHECKING:
    from slotwarden.runtime.pool import StatePool
    from slotwarden.runtime.radix.cache import PrefixCache
    from slotwarden.runtime.scheduler.moves import Moves


class Batch(NamedTuple):
    kind: str  # "prefill", "decode" or "verify" (speculative windows: windows.py)
    items: list  # (request, input tokens it feeds this step)


def has_own_slot(builder: "BatchBuilder", req: Request) -> bool:
    """A session turn whose session holds a slot needs no free one."""
    return req.session is not None and builder.sessions[req.session].slot is not None


def pick_victim(builder: "BatchBuilder", exclude: set, frees_slot: bool = True) -> Request | None:
    """The running request with the most tokens left among those that have kept at least one
    new token since they were admitted (so two requests retracting each other always make
    progress: each retraction follows a token its victim keeps) and still have tokens to make
    (one with none left is about to finish), not already in the batch being built.
    `frees_slot`: only one whose retraction frees a slot, i.e. not a session turn on its
    session's lent slot (that slot stays with the session)."""
    able = [
        r
        for r in builder.running
        if r.rid not in exclude
        and len(r.output) > r.outputs_at_admit
        and r.remaining() > 0
        and not (frees_slot and r.lent)
    ]
    return max(able, key=lambda r: (r.remaining(), r.rid), default=None)


class BatchBuilder:
    """Builds each step's batch from the queues it is handed (`waiting`, `running`, `sessions`,
    shared with the scheduler), moving slots through `pool` and the seam `moves` (the policy
    hooks the history mutants override), and counting rollbacks and retractions in `tally`."""

    def __init__(
        self,
        pool: "StatePool",
        config,
        moves: "Moves",
        *,
        waiting,
        running,
        sessions,
        tally,
        cache: "PrefixCache | None",
    ):
        self.pool, self.config, self.moves = pool, config, moves
        self.waiting, self.running, self.sessions = waiting, running, sessions
        self.tally, self.cache = tally, cache
        self.verified_last = False  # the last batch verified windows: plain requests go next

    def build(self) -> tuple[Batch, list]:
        cfg = self.config
        items: list = []
        budget = cfg.token_budget
        for req in self.running:
            if req.prefilling and budget > 0:
                n = min(cfg.chunk_size, len(req.input) - req.fed, budget)
                items.append((req, n))
                budget -= n
        self.take_fresh_slots(budget)
        retracted: list = []
        blocked = False  # a request found no free slot: only turns whose session has one may pass it
        fits: list = []  # candidates that took their slot and fit: admitted together after the loop
        for req in list(self.waiting):
            if budget <= 0:
                break
            if self.moves.cache_awaits(req):  # a sibling waits for its group's prompt state to be published
                continue
            if blocked and not has_own_slot(self, req):
                continue
            if len(self.running) + len(fits) >= cfg.max_running:
                if not blocked:  # the head of queue waits for a seat (a free slot too, if it lacks one)
                    needs_slot = req.slot is None and not has_own_slot(self, req) and not self.pool.available()
                    self._starved(req, items, retracted, needs_slot)
                break
            if not self.take_slot(req) and not self.make_room(req, items, retracted):
                blocked = True
                continue
            n = min(cfg.chunk_size, len(req.input) - req.fed, cfg.token_budget)  # always fits an empty step
            if n > budget:  # does not fit this step: give back what it took, try again next step
                try:
                    self.moves.rollback_candidate(req)
                except BaseException:
                    self._adopt(req)
                    raise
                self.tally["rollbacks"] += 1
                break
            fits.append(req)
            items.append((req, n))
            budget -= n
        self.admit_all(fits)
        if items:
            return Batch("prefill", items), retracted
        if not self.moves.speculating:  # no live request speculates: the plain decode step
            return Batch("decode", [(r, 1) for r in self.running if not r.prefilling and r.remaining() > 0]), retracted
        ready = [r for r in self.running if not r.prefilling and r.remaining() > 0]
        plain_waits = self.verified_last and any(not r.spec_k for r in ready)
        verify, starved = open_windows(ready, self.moves, plain_waits)
        self.verified_last = bool(verify)
        if verify:
            return Batch("verify", verify), retracted
        return Batch("decode", [(r, 1) for r in ready if not r.spec_k or r in starved]), retracted

    def take_fresh_slots(self, budget: int) -> None:
        """The leading waiting candidates that the loop of `build_batch` would each give a fresh
        slot take them here in one multi-actor alloc, in the same order. Planned as the loop
        decides, without a pool call: up to the free slots and the seats, while the budget lasts,
        through the first candidate that will not fit (it takes its slot and the loop gives it
        back). The plan stops at a candidate the loop handles
        otherwise (a session turn, one that kept its slot). The loop then finds their slots taken;
        with fewer than two planned, it takes them itself. A fault: each candidate takes the
        pool's word, as in `take_slot`. With the prefix cache on there is no plan: each candidate
        locks its match and then takes its slot, one by one (the order of moves that the abstract
        scheduler, which verification follows move by move, makes)."""
        if self.cache is not None:
            return
        cfg = self.config
        seats, free = cfg.max_running - len(self.running), self.pool.available()
        planned: list = []
        for req in self.waiting:
            if budget <= 0:
                break
            if self.moves.cache_awaits(req):  # passed over by the loop too
                continue
            if len(planned) >= min(seats, free) or req.slot is not None or req.session is not None:
                break
            planned.append(req)
            n = min(cfg.chunk_size, len(req.input) - req.fed, cfg.token_budget)
            if n > budget:
                break
            budget -= n
        if len(planned) < 2:
            return
        try:
            ids = self.pool.alloc_each([req.rid for req in planned])
        except BaseException:
            for req in planned:  # every handle made true first: a second fault in a rollback below leaves them so
                req.unzeroed = self._adopt(req) is State.TAKEN  # allocated, but its zeroing may not have run
            for req in planned:
                if req.unzeroed:  # give it back
                    self.pool.rollback([req.slot], Actor.request(req.rid))
                    req.slot, req.unzeroed = None, False
                if req.slot is None:
                    self.moves.cache_forget(req)
            raise
        if ids is None:  # (cannot be: no more than the free slots were planned)
            for req in planned:
                self.moves.cache_forget(req)
            return
        for req, slot in zip(planned, ids.tolist()):
            req.slot, req.lent = slot, False

    def take_slot(self, req: Request) -> bool:
        """The candidate takes its slot: its session's parked slot, lent to it, or a fresh one
        (or keeps the one it took in a step a fault interrupted)."""
        actor = Actor.request(req.rid)
        if req.slot is not None:
            if req.unzeroed:  # a second fault cut its recovery short: zero it now, as its alloc would have
                self.pool.zero([req.slot], actor)
                req.unzeroed = False
            return True
        try:
            if req.session is not None:
                s = self.sessions[req.session]
                if s.slot is not None:
                    self.pool.lend([s.slot], Actor.session(s.sid), req.rid)
                    req.slot, req.lent = s.slot, True
                    return True
            self.moves.cache_match(req)  # a plain request locks its longest cached prefix, if any
            ids = self.pool.alloc(1, actor)
        except BaseException:
            req.unzeroed = self._adopt(req) is State.TAKEN  # allocated, but its zeroing may not have run
            if req.unzeroed:  # give it back (kept, and zeroed when next taken, if a second fault strikes here)
                self.pool.rollback([req.slot], actor)
                req.slot, req.unzeroed = None, False
            if req.slot is None:
                self.moves.cache_forget(req)
            raise
        if ids is None:
            self.moves.cache_forget(req)  # no slot to copy into: let the prefix go (it may be evicted to make room)
            return False
        req.slot, req.lent = int(ids[0]), False
        return True

    def make_room(self, req: Request, items: list, retracted: list) -> bool:
        """`req` found no free slot. The prefix cache evicts its least recently used unlocked node
        before anyone is retracted; the evicted slot is free at the fence of the step in flight,
        at once when none is (overlap off), and `req` tries again. With nothing to evict, `req`
        starves (and may retract a running request). Whether `req` now holds a slot."""
        if not self.moves.cache_evict(1):
            self._starved(req, items, retracted, needs_slot=True)
            return False
        self.moves.fence_finished()  # frees the evicted slot if no step in flight may use it
        return self.take_slot(req)

    def admit(self, req: Request) -> None:
        actor = Actor.request(req.rid)
        if req.lent and self.sessions[req.session].stale:
            self.pool.zero([req.slot], actor)  # the transcript is fed again from zero (again, on a retry)
        self.moves.cache_copy(req)  # copy-on-write of its matched prefix, if any, into its fresh slot
        try:
            self.pool.admit([req.slot], actor)
        except BaseException:
            if self._adopt(req) in (State.RUNNING, State.LENT_RUNNING):
                self._enter_running(req)
            raise
        self._enter_running(req)

    def admit_all(self, reqs: list) -> None:
        """Admit the candidates that fit this step: `admit` for one; for more, one multi-actor
        ADMIT (all or none). A fault before the pool moved leaves them waiting with their slots
        (the next batch takes them up again); after it moved, they are recorded as running."""
        if len(reqs) < 2:
            for req in reqs:
                self.admit(req)
            return
        for req in reqs:
            if req.lent and self.sessions[req.session].stale:
                self.pool.zero([req.slot], Actor.request(req.rid))  # fed again from zero (again, on a retry)
            self.moves.cache_copy(req)  # copy-on-write of its matched prefix, if any, into its fresh slot
        try:
            self.pool.fire_each(Event.ADMIT, [req.slot for req in reqs], [req.rid for req in reqs])
        except BaseException:
            if self._adopt(reqs[0]) in (State.RUNNING, State.LENT_RUNNING):  # all or none: the first says which
                for req in reqs:
                    self._enter_running(req)
            raise
        for req in reqs:
            self._enter_running(req)

    def _enter_running(self, req: Request) -> None:
        self.waiting.remove(req)
        req.phase = Phase.RUNNING
        req.waited = 0
        req.outputs_at_admit = len(req.output)
        self.running.append(req)

    def _adopt(self, req: Request) -> State | None:
        """After a pool call for `req` raised: record what the pool says `req` holds now (a fault
        may strike after the pool moved). Returns that slot's state, or None."""
        held = self.pool.held_by(Actor.request(req.rid)).tolist()
        if not held:
            req.slot, req.lent = None, False
            return None
        state = self.pool.state_of(held[:1])[0]
        req.slot, req.lent = held[0], self.pool.ledger.lifecycle.spec(state).lent
        return state

    def _starved(self, req: Request, items: list, retracted: list, needs_slot: bool) -> None:
        """`req`, the head of queue, waited one more step; starved for `retract_after` steps, it
        retracts a victim that gives it what it lacks (if any is running)."""
        req.waited += 1
        after = self.config.retract_after
        if after is None or req.waited < after:
            return
        victim = pick_victim(self, exclude={r.rid for r, _ in items}, frees_slot=needs_slot)
        if victim is not None:
            self.retract(victim)
            retracted.append(victim)
            req.waited = 0

    def retract(self, req: Request) -> None:
        """Preempt `req`: its slot goes back by RETRACT (a request's own slot is released, free at
        the fence of the step in flight; a lent one returns to its session) and it waits again, to
        recompute its input and what it has generated so far."""
        lent = req.lent
        try:
            self.moves.release_retracted(req)
        except BaseException:
            if self._adopt(req) is None:  # the pool gave the slot back before the fault: record that
                self._requeue(req, lent)
            raise
        self._requeue(req, lent)

    def _requeue(self, req: Request, lent: bool) -> None:
        self.tally["retractions"] += 1
        self.running.remove(req)
        req.generation += 1
        req.phase, req.slot, req.lent, req.tail = Phase.WAITING, None, False, None
        req.input = req.prompt + req.output
        if req.session is not None:  # what its session's state lacks, then the turn so far
            s = self.sessions[req.session]
            self.moves.turn_retracted(s, req, lent)
            turn_input(s, req, req.input)
        req.fed, req.pending_outputs = 0, 0
        self.waiting.append(req)
