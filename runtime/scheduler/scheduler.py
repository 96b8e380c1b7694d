"""The scheduler: requests, streaming sessions, prefill batches with rollback, chunked prefill,
decode, retraction, abort, session close and overlap fences, over a real (tiny) Mamba-2 layer.

Every slot move is a pool event fired by one of the policy hooks (the seam, `moves.py`). A step:

1. finish what an interrupted step left (`contract.py`); reap idle sessions; build the batch
   (`admission.py`: continuing chunked prefills first, then waiting candidates);
2. launch it (`forward.py`), then process the results of the step before it (overlap on) or of
   this step (overlap off): append tokens, finish requests (park, give back or release);
3. fence every step the device has finished: released slots it may have used become free;
4. when idle, audit the pool: every slot accounted for, no leak, owners named.

An ended request leaves the tables at once; its `Result` waits in the outbox for `step()`,
`run()` or `collect()`. The prefix cache (`runtime/radix/cache.py`) is a collaborator."""

from __future__ import annotations

from collections import deque


from slotwarden.kernels.layer import TinyMamba
from slotwarden.kernels.sample import sibling_seed
from slotwarden.model.vocabulary import Actor

from slotwarden.runtime.scheduler import intake
from slotwarden.runtime.scheduler.admission import BatchBuilder
from slotwarden.runtime.scheduler.device import SimulatedDevice
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.radix.cache import PrefixCache
from slotwarden.runtime.scheduler.config import SchedulerConfig
from slotwarden.runtime.scheduler.drafter import NgramDrafter
from slotwarden.runtime.scheduler.launching import Launching
from slotwarden.runtime.scheduler.moves import Moves
from slotwarden.runtime.scheduler.windows import Windows
from slotwarden.runtime.scheduler.forward import Forward, InFlight
from slotwarden.runtime.scheduler.request import (
    Counters,
    Phase,
    Request,
    Result,
    Session,
    SessionState,
    SessionStatus,
    StepReport,
)
from slotwarden.runtime.scheduler.contract import audit_failure, guarded as _guarded, handle_problems, recorded
from slotwarden.runtime.scheduler.results import finish_group, process_landed
from slotwarden.runtime.scheduler.sessions import (
    due_to_close,
    parked_words,
    state_between_turns,
    turn_finished,
    turn_input,
)
from slotwarden.runtime.scheduler.errors import AuditFailed, NotIdle, SchedulerBroken, SessionClosed, StepFailed  # noqa: F401 (StepFailed: the callers import it here)
from slotwarden.runtime.scheduler.shapes import check_fits
from slotwarden.runtime.scheduler.signals import Deferred

_COUNTED_AS = {"length": "finished", "abort": "aborts", "session closed": "dropped"}  # else "step N failed: ..."


class Scheduler(Launching, Moves, Windows):
    """Build it with `slotwarden.build(...)` (runtime/scheduler/build.py), which sizes the pool from the
    layer; built by hand, a pool whose state does not fit the layer raises `PoolMismatch` here."""

    def __init__(self, pool: StatePool, model: TinyMamba, config: SchedulerConfig = SchedulerConfig()):
        if hasattr(model, "config"):
            check_fits(pool.config, model.config)
        self.pool, self.config = pool, config
        self.vocab = getattr(getattr(model, "config", None), "vocab", None)
        self.device = SimulatedDevice()
        self.forward = Forward(pool, model, self._sample, config.max_running if config.pad_to_captured else None)
        self.requests: dict[int, Request] = {}  # live requests only: waiting, running, queued turns
        self.sessions: dict[int, Session] = {}  # open and closing sessions only
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.inflight: InFlight | None = None  # overlap: the step launched last, not yet processed
        self.landed: deque[InFlight] = deque()  # finished steps whose results are not all processed
        self.verified: deque[InFlight] = deque()  # verify steps whose windows are not all committed
        self.drafter = NgramDrafter()  # what speculative requests propose (drafter.py)
        self.speculating = 0  # live requests with `spec_k` > 0 (none: every decode step is plain)
        self.finishing: deque[Request] = deque()  # requests at their budget whose slot is not yet released
        self.outbox: list[Result] = []  # results of ended requests, not yet returned to the user
        self._next_rid = 0
        self._next_sid = 0
        self._tally = dict.fromkeys(Counters._fields, 0)  # read as `counters`
        self._broken: SchedulerBroken | None = None
        self._critical: str | None = None  # set while a fault would leave the scheduler broken
        self._sigint = Deferred()  # a SIGINT waits for the boundary of the call (signals.py)
        self.prefix = PrefixCache(pool) if config.prefix_cache else None  # the prefix cache (runtime/radix/cache.py)
        queues = {"waiting": self.waiting, "running": self.running, "sessions": self.sessions}
        self.batches = BatchBuilder(pool, config, self, **queues, tally=self._tally, cache=self.prefix)

    @property
    def model(self) -> TinyMamba:
        return self.forward.model

    @model.setter
    def model(self, model: TinyMamba) -> None:
        self.forward.model = model

    @property
    def config(self) -> SchedulerConfig:
        return self._config

    @config.setter
    def config(self, config: SchedulerConfig) -> None:
        self._config = config
        if "batches" in self.__dict__:
            self.batches.config = config

    # -- the user's side ---------------------------------------------------------------------
    @_guarded
    def submit(
        self, prompt, max_new_tokens: int, session: int | None = None, *, temperature=0.0, seed=None, spec_k=0
    ) -> int:
        """Queue a request (or the next turn of `session`); returns its id. `temperature` 0 is
        greedy; above 0 a token's noise is a pure function of `seed` (None: the id) and its
        position (`kernels/sample.py`). `spec_k` > 0: it decodes speculatively, verifying up to
        that many drafts a step (`windows.py`; greedy only, tokens as without). Refuses, recording
        nothing: a prompt empty or with a token outside the vocabulary, a budget not a positive
        int, a session unknown or not open, a temperature not finite and >= 0 (or below
        `MIN_TEMPERATURE`), a seed not an int, a `spec_k` outside 0..16 or with a temperature."""
        prompt = intake.prompt_tokens(prompt, self.vocab)
        max_new_tokens = intake.new_token_budget(max_new_tokens)
        temperature = intake.temperature(temperature)
        spec_k = intake.draft_count(spec_k, temperature)
        seed = intake.sampling_seed(seed, self._next_rid)
        s = None
        if session is not None:
            sid = intake.session_id(session, self._next_sid)
            s = self.sessions.get(sid)
            if s is None or s.status is not SessionStatus.OPEN:
                raise SessionClosed(f"session {sid} is {'closing' if s else 'closed'}: it takes no more turns")
        rid = self._new_request(prompt, max_new_tokens, s.sid if s else None, temperature, seed, spec_k=spec_k).rid
        if s is None:
            return rid
        s.turns.append(rid)
        s.idle_steps = 0
        if s.turn is None:
            self._start_turn(s)
        return rid

    @_guarded
    def submit_n(self, prompt, max_new_tokens: int, n: int, *, temperature=0.0, seed=None, spec_k=0) -> tuple:
        """Queue `n` samples of one plain prompt; returns the `n` sibling ids, consecutive. Sibling
        i samples with `sibling_seed(seed, i)`. With n > 1 the next id is reserved for the group's
        prompt request: with the cache on it prefills the prompt once and donates it, and the
        siblings wait until it is published, then copy it (docs/contracts.md, "Sampling").
        Tokens are bit-identical with the cache off. Each sibling decodes speculatively with
        `spec_k` > 0. Refusals as in `submit`, and `n` not an int in 1..256."""
        prompt = intake.prompt_tokens(prompt, self.vocab)
        max_new_tokens = intake.new_token_budget(max_new_tokens)
        n = intake.sample_count(n)
        temperature = intake.temperature(temperature)
        spec_k = intake.draft_count(spec_k, temperature)
        seed = intake.sampling_seed(seed, self._next_rid)
        first = self._next_rid
        lead = None
        if n > 1:
            if self.prefix is not None and len(prompt) > 1:
                lead = self._new_request(prompt[:-1], 1, None, 0.0, 0, rid=first + n)
                lead.shared = True
        for i in range(n):
            sib = self._new_request(
                prompt, max_new_tokens, None, temperature, sibling_seed(seed, i), rid=first + i, spec_k=spec_k
            )
            if lead is not None:
                sib.awaits = lead
                lead.siblings.append(sib)
        self._next_rid = first + n + (n > 1)
        return tuple(range(first, first + n))

    def _new_request(self, prompt, max_new_tokens, sid, temperature, seed, rid=None, spec_k=0) -> Request:
        """A request in the tables (a plain one queued: a session turn waits for `_start_turn`)."""
        if rid is None:
            rid = self._next_rid
            self._next_rid += 1
        req = Request(rid, prompt, max_new_tokens, sid, temperature=temperature, seed=seed, spec_k=spec_k)
        self.speculating += bool(spec_k)
        self.requests[rid] = req
        if sid is None:
            req.input = list(prompt)
            self.waiting.append(req)
        return req

    @_guarded
    def open_session(self) -> int:
        sid = self._next_sid
        self._next_sid += 1
        self.sessions[sid] = Session(sid)
        return sid

    @_guarded
    def close_session(self, sid: int) -> None:
        """Close `sid`: queued turns are dropped; with a turn running, the close is deferred
        until that turn ends. Releases exactly the slot the session owns. A closed session:
        nothing to do; an id never handed out: `UnknownSession`."""
        s = self.sessions.get(intake.session_id(sid, self._next_sid))
        if s is None or s.status is SessionStatus.CLOSED:
            return
        for rid in list(s.turns):
            req = self.requests[rid]
            if req.phase is Phase.WAITING and rid != s.turn:
                s.turns.remove(rid)
                self._drop(req, "session closed")
        if s.turn is not None and self.requests[s.turn].phase is Phase.RUNNING:
            s.status = SessionStatus.CLOSING
            return
        if s.turn is not None:
            self._drop(self.requests[s.turn], "session closed")
            s.turns.clear()
            s.turn = None
        self._close_now(s)

    @_guarded
    def abort(self, rid: int) -> None:
        """Cancel request `rid`, wherever it is; whatever it holds goes back where it came from.
        An ended request: nothing to do; an id never handed out: `UnknownRequest`."""
        req = self.requests.get(intake.request_id(rid, self._next_rid))
        if req is None or req.done:
            return
        self._abort_one(req)
        lead = req.awaits  # a group's prompt request that no sibling waits for any more: aborted too
        if lead is not None and not lead.done and all(sib.done for sib in lead.siblings):
            self._abort_one(lead)

    def _abort_one(self, req: Request) -> None:
        try:
            if req.phase is Phase.WAITING:
                self._drop(req, "abort")
            else:
                self._abort_running(req, "abort")
        finally:
            if req.done:  # also when the pool moved before a fault struck: the turn ended
                self._turn_ended(req)

    def collect(self) -> tuple:
        """Pop the results waiting in the outbox (also works on a broken scheduler; from a
        thread other than the pool's it raises `WrongThread` and takes nothing)."""
        self.pool.ledger.check_owner()  # the thread alone: a ledger whose write was interrupted still hands back
        out = tuple(self.outbox)
        self.outbox.clear()
        return out

    @_guarded
    def session_state(self, sid: int) -> SessionState:
        """Session `sid`'s conv and SSM state between turns, as copies (see `SessionState`).
        Refuses, changing nothing: an id never handed out (`UnknownSession`), a session closed
        or closing (`SessionClosed`), one whose slot is lent to its turn (`SessionBusy`: the
        turn writes it in place), one with no state to give (`NoSessionState`: no turn has
        finished yet, or the last one ended mid-way and the next turn rebuilds it)."""
        sid = intake.session_id(sid, self._next_sid)
        return state_between_turns(self.pool, sid, self.sessions.get(sid))

    counters = property(lambda self: Counters(**self._tally), doc="Totals since the scheduler was built.")

    @property
    def idle(self) -> bool:
        """Nothing to run, nothing in flight, and no slot waiting for a fence (a slot released
        with no step in flight keeps it False until the next `step()`, which only fences)."""
        return (
            not self.waiting
            and not self.running
            and self.inflight is None
            and not self.landed
            and not self.verified
            and not self.finishing
            and not self.pool.awaits_fence()
            and not any(s.status is SessionStatus.CLOSING for s in self.sessions.values())  # a close to retry
        )

    broken = property(lambda self: self._broken)

    @property
    def submitted(self) -> int:
        """Request ids handed out so far (`submit_n`'s reserved ids included)."""
        return self._next_rid

    @property
    def opened(self) -> int:
        """Session ids handed out so far (0..opened-1); the open ones are in `sessions`."""
        return self._next_sid

    # -- one step ----------------------------------------------------------------------------
    @_guarded
    def step(self) -> StepReport:
        self._catch_up()
        self._reap_sessions()
        before = self._tally["rollbacks"]
        batch, retracted = self.batches.build()
        current = self._launch(batch) if batch.items else None
        verify = current is not None and current.kind == "verify"  # lands at once: its commit reads its fence
        if self.config.overlap:
            previous, self.inflight = self.inflight, None if verify else current
            self.landed.extend(s for s in (previous, current if verify else None) if s is not None)
        elif current is not None:
            self.landed.append(current)
        self._catch_up()
        self.fence_finished()
        self.commit_verified()
        if self.idle and self.config.audit_when_idle:
            self.check_audit()
        return StepReport(
            current.step if current else None,
            batch.kind if batch.items else "idle",
            len(batch.items),
            sum(n for _, n in batch.items),
            self.collect(),
            self._tally["rollbacks"] - before,
            tuple(r.rid for r in retracted),
        )

    @_guarded
    def run(self, max_steps: int = 10_000) -> dict:
        """Step until idle; returns {rid: Result} of every request that ended meanwhile, in the
        order they ended. Not idle after `max_steps`: RuntimeError, naming the sessions that park
        slots while requests wait. If a step raises, what was gathered goes back to the outbox."""
        results: dict = {}
        try:
            for _ in range(max_steps):
                if self.idle:
                    results.update((r.rid, r) for r in self.collect())
                    return results
                results.update((r.rid, r) for r in self.step().finished)
                self._sigint.deliver()  # a SIGINT noted during that step: raised here, between steps
            why = parked_words(self.waiting, self.sessions, self.pool.capacity, self.config.session_timeout)
            raise NotIdle(f"not idle after {max_steps} steps{why}")
        except BaseException:
            self.outbox[:0] = results.values()
            raise

    def check_audit(self):
        """free + batch + session + released == capacity, the free list is the FREE set, and
        every held slot belongs to a live request or session, as the scheduler itself says."""
        live_requests = {r.rid for r in self.requests.values() if r.slot is not None}
        live_nodes = set(self.prefix.tree.holding().values()) if self.prefix is not None else None
        audit = self.pool.audit(live_requests, set(self.sessions), live_nodes)
        failure = audit_failure(audit, handle_problems(self))
        if failure:
            raise AuditFailed(failure)
        return audit

    @_guarded
    def flush_cache(self) -> int:
        """Evict every unlocked published node (what is locked or unpublished stays, and while
        requests run, what waiting siblings will copy). Returns how many were evicted."""
        return 0 if self.prefix is None else self.cache_evict(len(self.prefix.tree.holding()))

    def _catch_up(self) -> None:
        """Process every landed step, release every request at its budget. Each unit leaves its
        queue only once done, so a fault leaves exactly the rest for the next call."""
        while self.landed:
            self._process(self.landed[0])
            self.landed.popleft()
        while self.finishing:
            req = self.finishing[0]
            if req.done:  # aborted meanwhile
                self.finishing.popleft()
                continue
            group = finish_group(self.finishing) if self._releases_in_groups() else [req]
            if len(group) > 1:
                self._finish_many(group)
            else:
                self._finish(req)

    def _process(self, done: InFlight) -> None:
        process_landed(done, self.device, self.finishing)

    def _releases_in_groups(self) -> bool:
        """Finished requests are released many in one pool call only with the stock
        `release_finished` (one replaced is called per request) and the prefix cache off."""
        return self.prefix is None and getattr(self.release_finished, "__func__", None) is Scheduler.release_finished

    def _finish_many(self, group: list) -> None:
        """`_finish` for a group of `finish_group`, in one pool call (all or none: the first says which)."""
        recorded(
            lambda: self.release_finished_each(group),
            lambda: not self._holds(group[0]),
            lambda: self._finished_each(group),
        )

    def _finished_each(self, group: list) -> None:
        for req in group:
            while self.finishing[0] is not req:  # aborted meanwhile
                self.finishing.popleft()
            self._finished(req)

    def _finish(self, req: Request) -> None:
        recorded(lambda: self.release_finished(req), lambda: not self._holds(req), lambda: self._finished(req))

    def _finished(self, req: Request) -> None:
        if req.session is not None:
            turn_finished(self.sessions[req.session], req)
        self._leave(req, "length")
        self.finishing.popleft()
        self._turn_ended(req)

    def _abort_running(self, req: Request, reason: str) -> None:
        recorded(lambda: self.release_aborted(req), lambda: not self._holds(req), lambda: self._aborted(req, reason))

    def _aborted(self, req: Request, reason: str) -> None:
        if req.lent:
            self.sessions[req.session].stale = True  # its state was advanced in place
        self._leave(req, reason)

    def _leave(self, req: Request, reason: str) -> None:
        """`req` is done, keeps no handle on a slot or step tensor, and leaves the tables."""
        req.phase, req.slot, req.lent, req.finish_reason, req.tail = Phase.DONE, None, False, reason, None
        req.generation += 1
        if req in self.running:
            self.running.remove(req)
        if self.requests.pop(req.rid, None) is not None and req.spec_k:
            self.speculating -= 1
        if req.shared:  # a group's prompt request: its siblings' results are what the user asked for
            req.siblings = []
            return
        self._tally[_COUNTED_AS.get(reason, "failures")] += 1
        self.outbox.append(req.result())

    def _drop(self, req: Request, reason: str) -> None:
        """A waiting request leaves (giving back a slot it took before a fault)."""
        if req.slot is not None:
            self.rollback_candidate(req)
            self._tally["rollbacks"] += 1
        self.cache_forget(req)  # a prefix match it still holds (SGLang #20182)
        if req in self.waiting:
            self.waiting.remove(req)
        self._leave(req, reason)

    def _turn_ended(self, req: Request) -> None:
        if req.session is None:
            return
        s = self.sessions.get(req.session)
        if s is None:
            return
        if req.rid in s.turns:
            s.turns.remove(req.rid)
        if s.turn == req.rid:
            s.turn = None
        if s.status is SessionStatus.CLOSING:
            for rid in list(s.turns):
                self._drop(self.requests[rid], "session closed")
            s.turns.clear()
            self._close_now(s)
        elif s.turn is None and s.turns:
            self._start_turn(s)

    def _start_turn(self, s: Session) -> None:
        """The session's next turn enters the queue, feeding what the session's state lacks."""
        req = self.requests[s.turns[0]]
        s.turn = req.rid
        turn_input(s, req, req.prompt)
        self.waiting.append(req)

    def _close_now(self, s: Session) -> None:
        """Release the session's slot (marked CLOSING first: if refused, the next step retries)."""
        s.status = SessionStatus.CLOSING
        moved = lambda: s.slot is None or not self.pool.held_by(Actor.session(s.sid)).numel()  # noqa: E731
        recorded(lambda: self.release_session(s), moved, lambda: self._closed(s))

    def _closed(self, s: Session) -> None:
        s.slot, s.status, s.turn = None, SessionStatus.CLOSED, None
        self.sessions.pop(s.sid, None)

    def _holds(self, req: Request) -> bool:
        """Whether the pool says `req` still holds a slot (after a call for it raised)."""
        return bool(self.pool.held_by(Actor.request(req.rid)).numel())

    def _reap_sessions(self) -> None:
        """Close idle sessions past the timeout, and closes that a fault interrupted."""
        for s in due_to_close(self.sessions, self.config.session_timeout):
            self._close_now(s)
