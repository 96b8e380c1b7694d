"""The scheduler: requests, streaming sessions, prefill batches with rollback, chunked prefill,
decode, retraction, abort, session close and overlap fences, over a real (tiny) Mamba-2 layer.

Every slot move goes through the pool's lifecycle events; the scheduler never touches the
ledger. One `step()`:

1. finish what an interrupted step left (see `faults.py`); reap idle sessions;
   build the next batch (see `admission.py`): continuing chunked prefills first, then waiting
   candidates one by one, each taking its slot (alloc, or its session's slot lent to it) and
   rolled back if it then does not fit; if no prefill work, a decode batch;
2. launch it on the device (the forward pass), then process the results of the step before
   it (overlap on) or of this step (overlap off): append tokens, finish requests (a plain one
   releases its slot, a session turn parks it or gives the lent slot back);
3. fence every step the device has finished: released slots it may have used become free;
4. when idle, audit the pool: every slot accounted for, no leak, owners named.

With `SchedulerConfig(prefix_cache=True)` plain requests also share recurrent state by prefix
(`prefix.py`): a candidate copies its longest cached prefix into its fresh slot, a finished
request donates its slot, and a candidate short of a slot has the cache evict before anyone
is retracted; every cache move is a pool event too.

Sampling: greedy by default; `submit(..., temperature, seed)` draws each token with noise that
is a pure function of (seed, the token's position, the vocabulary index) (kernels/sample.py), in
one batched operation per step. `submit_n` queues n samples of one prompt; with the prefix cache
on, the prompt is prefilled once by the group's prompt request and copied by the siblings
(`prefix.py`).

Results: a request that ends (finished, aborted, dropped with its session, failed) leaves the
scheduler's tables at once; its `Result` (plain ints) waits in an outbox that the next
`step()` empties into its report's `finished`, `run()` into the dict it returns, or `collect()`
directly. Closed sessions leave `sessions` too. So memory stays bounded by what is live.
`session_state(sid)` gives copies of a session's state between turns; `counters` the totals
(steps, ended requests by reason, rollbacks, retractions).

Faults: see `faults.py` for the contract (after any exception the scheduler is consistent and
resumes exactly, or a failed forward pass ended its requests, or it refuses every call).

Mid-turn abort decision: a session turn aborted (or retracted, or failed) after it started
feeding has advanced the session's state in place. Its slot goes back to the session (the
lifecycle says so) and the session is marked *stale*: the turn's partial state is never taken
as the session's checkpoint. An aborted or failed turn's tokens are dropped from the
transcript, and the next turn zeroes the slot and feeds the whole transcript again before its
own prompt; a retracted turn waits again and does the same before its prompt and the tokens it
had made (see `admission.py`). So no slot is ever owned twice, and a half-updated state is
never continued.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from slotwarden.kernels.layer import TinyMamba
from slotwarden.kernels.sample import sample, sibling_seed
from slotwarden.model.vocabulary import Actor, Event

from slotwarden.runtime.scheduler import intake
from slotwarden.runtime.scheduler.admission import Batch, BatchBuilder
from slotwarden.runtime.scheduler.device import SimulatedDevice
from slotwarden.runtime.pool import StatePool, to_device
from slotwarden.runtime.radix.cache import PrefixCache
from slotwarden.runtime.scheduler.request import Counters, Phase, Request, Result, Session, SessionState, SessionStatus
from slotwarden.runtime.scheduler.contract import guarded as _guarded, handle_problems
from slotwarden.runtime.scheduler.errors import (
    AuditFailed,
    BadConfig,
    NoSessionState,
    SchedulerBroken,
    SessionBusy,
    SessionClosed,
    StepFailed,
)
from slotwarden.runtime.scheduler.shapes import check_fits

__all__ = [
    "Scheduler",
    "SchedulerConfig",
    "StepReport",
    "Counters",
    "SessionState",
    "StepFailed",
    "AuditFailed",
    "SchedulerBroken",
    "Result",
]


@dataclass(frozen=True)
class SchedulerConfig:
    max_running: int = 8  # requests in the running batch
    token_budget: int = 64  # input tokens a prefill step may feed
    chunk_size: int = 32  # input tokens one request may feed in one step
    overlap: bool = False  # build and launch step N+1 while step N is in flight
    retract_after: int | None = 3  # a head of queue starved this many steps retracts a running request
    session_timeout: int | None = None  # steps an idle session lives before the reaper closes it
    audit_when_idle: bool = True
    prefix_cache: bool = False  # plain requests share recurrent state by prefix (runtime/radix/cache.py)

    def __post_init__(self):
        for name in ("max_running", "token_budget", "chunk_size"):
            _check_field(self, name, lambda v: v >= 1, "a positive int")
        for name in ("retract_after", "session_timeout"):
            _check_field(self, name, lambda v: v >= 0, "an int >= 0, or None", optional=True)
        for name in ("overlap", "audit_when_idle", "prefix_cache"):
            if type(getattr(self, name)) is not bool:
                raise BadConfig(name, getattr(self, name), "True or False")


def _check_field(config, name: str, ok, want: str, optional: bool = False) -> None:
    value = getattr(config, name)
    if optional and value is None:
        return
    if not (intake.is_int(value) and ok(value)):
        raise BadConfig(name, value, want)


_COUNTED_AS = {"length": "finished", "abort": "aborts", "session closed": "dropped"}  # else "step N failed: ..."


def _ended(batch: Batch) -> str:
    """What a failed step ends, in words: the requests with a Result, and each parallel-sampling
    group's prompt request (no Result, not counted: its siblings go on as plain requests)."""
    live = [req for req, _ in batch.items if not req.done]
    shown = [req.rid for req in live if not req.shared]
    words = [f"ended requests {shown} (each with a Result, reason 'step N failed')"] if shown else []
    for req in live:
        if req.shared:
            sibs = [sib.rid for sib in req.siblings if not sib.done]
            words.append(
                f"ended the prompt request {req.rid} of parallel-sampling siblings {sibs} (no Result, not counted: "
                "the siblings go on as plain requests, each prefilling the prompt or matching what the cache holds)"
            )
    return "; ".join(words)


def _by_source(items: list) -> list:
    """Decode items ordered by the step whose tensor holds their last token (usually one), so
    their inputs gather with one index per source tensor (a stable, reproducible order)."""
    return sorted(items, key=lambda item: item[0].tail[2])


@dataclass(eq=False)
class InFlight:
    """A launched step's results: the tokens tensor (a device future) and, per batch item not
    yet processed, (request, its generation at launch, row of its token or None)."""

    step: int
    kind: str
    tokens: torch.Tensor
    rows: deque
    host: list | None = field(default=None)  # the tokens on the host, once read


class StepReport(NamedTuple):
    step: int | None
    kind: str  # "prefill", "decode" or "idle"
    size: int
    tokens: int
    finished: tuple  # Result of every request that ended since the last report (or collect())
    rolled_back: int
    retracted: tuple


class Scheduler:
    """Build it with `slotwarden.build(...)` (runtime/scheduler/build.py), which sizes the pool from the
    layer; built by hand, a pool whose state does not fit the layer raises `PoolMismatch` here."""

    def __init__(self, pool: StatePool, model: TinyMamba, config: SchedulerConfig = SchedulerConfig()):
        if hasattr(model, "config"):
            check_fits(pool.config, model.config)
        self.pool, self.model, self.config = pool, model, config
        self.vocab = getattr(getattr(model, "config", None), "vocab", None)
        self.device = SimulatedDevice()
        self.requests: dict[int, Request] = {}  # live requests only: waiting, running, queued turns
        self.sessions: dict[int, Session] = {}  # open and closing sessions only
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.inflight: InFlight | None = None  # overlap: the step launched last, not yet processed
        self.landed: deque[InFlight] = deque()  # finished steps whose results are not all processed
        self.finishing: deque[Request] = deque()  # requests at their budget whose slot is not yet released
        self.outbox: list[Result] = []  # results of ended requests, not yet returned to the user
        self._next_rid = 0
        self._next_sid = 0
        self._tally = dict.fromkeys(Counters._fields, 0)  # read as `counters`
        self._broken: SchedulerBroken | None = None
        self._critical: str | None = None  # set while a fault would leave the scheduler broken
        self._state_written = False  # the step being launched has called the model
        self.prefix = PrefixCache(pool) if config.prefix_cache else None  # the prefix cache (runtime/radix/cache.py)
        self.batches = BatchBuilder(
            pool,
            config,
            self,
            waiting=self.waiting,
            running=self.running,
            sessions=self.sessions,
            tally=self._tally,
            cache=self.prefix,
        )

    @property
    def config(self) -> SchedulerConfig:
        return self._config

    @config.setter
    def config(self, config: SchedulerConfig) -> None:
        """A new config reaches the batch builder too (tests and demos replace it between runs)."""
        self._config = config
        if "batches" in self.__dict__:
            self.batches.config = config

    # -- the user's side ---------------------------------------------------------------------
    @_guarded
    def submit(
        self, prompt, max_new_tokens: int, session: int | None = None, *, temperature=0.0, seed: int | None = None
    ) -> int:
        """Queue a request (or the next turn of `session`); returns its id. Refuses (typed error,
        nothing recorded) a prompt that is empty or has a token that is not an int of the
        vocabulary, a budget that is not a positive int, and a session unknown or not open.

        Sampling: `temperature` 0 (the default) is greedy; above 0 each token is drawn from
        softmax(logits / temperature) with noise that is a pure function of `seed` and the
        token's position in the output (`kernels/sample.py`), so the tokens depend on nothing
        else: not the batch, the slot, retractions, nor the prefix cache. `seed` is any int
        (None: the request's id). A temperature that is not a finite number >= 0, a positive
        one below `MIN_TEMPERATURE` (1e-30: too small to divide the logits by), or a seed that
        is not an int, is refused."""
        prompt = intake.prompt_tokens(prompt, self.vocab)
        max_new_tokens = intake.new_token_budget(max_new_tokens)
        temperature = intake.temperature(temperature)
        seed = intake.sampling_seed(seed, self._next_rid)
        s = None
        if session is not None:
            sid = intake.session_id(session, self._next_sid)
            s = self.sessions.get(sid)
            if s is None or s.status is not SessionStatus.OPEN:
                raise SessionClosed(f"session {sid} is {'closing' if s else 'closed'}: it takes no more turns")
        rid = self._new_request(prompt, max_new_tokens, s.sid if s else None, temperature, seed).rid
        if s is None:
            return rid
        s.turns.append(rid)
        s.idle_steps = 0
        if s.turn is None:
            self._start_turn(s)
        return rid

    @_guarded
    def submit_n(self, prompt, max_new_tokens: int, n: int, *, temperature=0.0, seed: int | None = None) -> tuple:
        """Queue `n` samples of one plain prompt (parallel sampling); returns the ids of the `n`
        sibling requests, consecutive. Each is a plain request of its own (its own result, its
        own `abort`); sibling i samples with `sibling_seed(seed, i)` (`kernels/sample.py`;
        `seed` None: the first sibling's id), at `temperature` as in `submit`.

        With n > 1 one more id, the one after the siblings', is reserved for the group's
        prompt request, whether or not the prefix cache is on (so the siblings' ids and
        tokens do not depend on it). With the cache on and a prompt of two tokens or more,
        that request prefills the prompt but its last token once and donates its slot to the
        cache (its result is never reported nor counted); the siblings wait in the queue until
        that state is published (or the prompt request ended without donating: aborted with
        its id, failed, or the prefix already cached), then each matches it, copies it
        (copy-on-write) and feeds only the last prompt token. With the cache off, each sibling
        prefills the whole prompt. The tokens are the same either way, bit for bit. Aborting
        the last live sibling while the prompt request still runs or waits aborts it too.
        The prefill saved is not guaranteed: if the published prompt state is evicted before a
        sibling copies it (a small pool under pressure) or a sibling is retracted, the sibling
        prefills the prompt again and the prompt request's prefill was spent for nothing.
        Refusals as in `submit`, and `n` not an int in 1..256."""
        prompt = intake.prompt_tokens(prompt, self.vocab)
        max_new_tokens = intake.new_token_budget(max_new_tokens)
        n = intake.sample_count(n)
        temperature = intake.temperature(temperature)
        seed = intake.sampling_seed(seed, self._next_rid)
        first = self._next_rid
        lead = None
        if n > 1:
            if self.prefix is not None and len(prompt) > 1:
                lead = self._new_request(prompt[:-1], 1, None, 0.0, 0, rid=first + n)
                lead.shared = True
        for i in range(n):
            sib = self._new_request(prompt, max_new_tokens, None, temperature, sibling_seed(seed, i), rid=first + i)
            if lead is not None:
                sib.awaits = lead
                lead.siblings.append(sib)
        self._next_rid = first + n + (n > 1)
        return tuple(range(first, first + n))

    def _new_request(self, prompt, max_new_tokens, sid, temperature, seed, rid=None) -> Request:
        """A request in the tables (a plain one queued: a session turn waits for `_start_turn`)."""
        if rid is None:
            rid = self._next_rid
            self._next_rid += 1
        req = Request(rid, prompt, max_new_tokens, sid, temperature=temperature, seed=seed)
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
        """Pop the results waiting in the outbox (also works on a broken scheduler)."""
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
        s = self.sessions.get(sid)
        if s is None or s.status is not SessionStatus.OPEN:
            raise SessionClosed(f"session {sid} is {'closing' if s else 'closed'}: its slot is released")
        if s.slot is None:
            raise NoSessionState(f"session {sid} has no state yet: none of its turns has finished")
        state = self.pool.state_of([s.slot])[0]
        if self.pool.ledger.lifecycle.spec(state).lent:
            borrower = self.pool.ledger.record(s.slot).borrower
            raise SessionBusy(f"session {sid}'s slot {s.slot} is {state.name}: lent to its turn, request {borrower}")
        if s.stale:
            raise NoSessionState(
                f"session {sid}'s state is stale: its last turn ended mid-way, the next one rebuilds it"
            )
        conv, ssm = self.pool.conv[0][:, s.slot].clone(), self.pool.ssm[:, s.slot].clone()  # copies, no sync
        return SessionState(conv, ssm, tuple(s.transcript))

    @property
    def counters(self) -> Counters:
        """Totals since the scheduler was built: steps, ended requests by reason, rollbacks and
        retractions (see `Counters`)."""
        return Counters(**self._tally)

    @property
    def idle(self) -> bool:
        """Nothing to run, nothing in flight, and no slot waiting for a fence: the pool is
        quiescent (every slot free, parked with a session, or cached). A slot released with no
        step in flight (an abort, a session's close, `flush_cache()`) keeps it False until the
        next `step()`, which with nothing to run only fences; `run()` takes that step."""
        return (
            not self.waiting
            and not self.running
            and self.inflight is None
            and not self.landed
            and not self.finishing
            and not self.pool.awaits_fence()
        )

    @property
    def broken(self) -> SchedulerBroken | None:
        return self._broken

    @property
    def submitted(self) -> int:
        """Request ids handed out so far (0..submitted-1, the prompt ids `submit_n` reserves
        included); the live ones are in `requests`."""
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
        if self.config.overlap:
            previous, self.inflight = self.inflight, current
            if previous is not None:
                self.landed.append(previous)
        elif current is not None:
            self.landed.append(current)
        self._catch_up()
        self.fence_finished()
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
        order they ended: what the steps' reports carry in `finished`, and what was waiting in
        the outbox. The totals (rollbacks, retractions, aborts, ...) are in `counters`. Not idle
        after `max_steps`: RuntimeError (naming the sessions that park slots between turns
        while requests wait: only their close, or `session_timeout`, frees those slots). If a step raises, what was gathered goes back to the
        outbox (`collect()`, or the next `step()`/`run()`, hands it over)."""
        results: dict = {}
        try:
            for _ in range(max_steps):
                if self.idle:
                    results.update((r.rid, r) for r in self.collect())
                    return results
                results.update((r.rid, r) for r in self.step().finished)
            raise RuntimeError(f"not idle after {max_steps} steps{self._why_not_idle()}")
        except BaseException:
            self.outbox[:0] = results.values()
            raise

    def _why_not_idle(self) -> str:
        """For `run()`'s error: requests waiting while sessions park slots between turns."""
        parked = sorted((s.sid, s.slot) for s in self.sessions.values() if s.slot is not None and s.turn is None)
        if not self.waiting or not parked:
            return ""
        sids, slots = [sid for sid, _ in parked], [slot for _, slot in parked]
        timeout = self.config.session_timeout
        return (
            f": requests {[r.rid for r in self.waiting][:8]} wait while sessions {sids} park slots {slots} "
            f"between turns ({len(slots)} of {self.pool.capacity}); closing them (close_session) frees their "
            "slots, and so does SchedulerConfig(session_timeout=N), which closes a session idle for N steps"
            + (f" (now {timeout})" if timeout is not None else " (now None: never)")
        )

    # -- audit -------------------------------------------------------------------------------
    def check_audit(self):
        """free + batch + session + released == capacity, the free list is the FREE set, and
        every held slot belongs to a live request or session, as the scheduler itself says."""
        live_requests = {r.rid for r in self.requests.values() if r.slot is not None}
        live_sessions = set(self.sessions)
        live_nodes = set(self.prefix.tree.holding().values()) if self.prefix is not None else None
        audit = self.pool.audit(live_requests, live_sessions, live_nodes)
        problems = list(audit.problems) + handle_problems(self)
        leaks = [
            f"slot {leak.slot}: {leak.state.name}, owner {leak.owner}, left there by {leak.last_event.name.lower()}\n{leak.history}"
            for leak in audit.leaks
        ]
        if problems or leaks:
            raise AuditFailed("idle audit failed:\n" + "\n".join(problems + leaks))
        return audit

    # -- policy: what the scheduler fires at each decision (mutants override one of these) ----
    def rollback_candidate(self, req: Request) -> None:
        """A candidate that took its slot does not fit: give back exactly what it took (its
        prefix-cache match included)."""
        self.pool.rollback([req.slot], Actor.request(req.rid))
        req.slot, req.lent = None, False
        self.cache_forget(req)

    def release_finished(self, req: Request) -> None:
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

    def release_aborted(self, req: Request) -> None:
        """A running request is cancelled: its slot goes back where it came from."""
        self.pool.abort([req.slot], Actor.request(req.rid))

    def release_retracted(self, req: Request) -> None:
        """A running request is preempted, to be recomputed: its slot goes back where it came
        from (its own is released, a lent one returns to its session)."""
        self.pool.retract([req.slot], Actor.request(req.rid))

    def turn_retracted(self, s: Session, req: Request, lent: bool) -> None:
        """Session `s`'s turn `req` was retracted. A turn that ran on the lent slot advanced the
        session's state in place: that partial state is no checkpoint of the session, which is
        marked stale (the turn's recomputation zeroes the slot and feeds the transcript again).
        The transcript is untouched: only a finished turn adds to it."""
        if lent:
            s.stale = True

    def release_session(self, s: Session) -> None:
        """A session closes: exactly the slot it owns is released."""
        self.pool.close(Actor.session(s.sid))

    def fence_finished(self) -> None:
        """Fence every step the device has finished (then the prefix cache publishes what
        they wrote and gives back the locks of the copies they made)."""
        self.pool.fence()
        self.cache_after_fence()

    # -- the prefix cache's moves, on the same seam (no-ops with the cache off) ----------------
    def cache_match(self, req: Request) -> None:
        if self.prefix is not None:
            self.prefix.match(req)

    def cache_forget(self, req: Request) -> None:
        if self.prefix is not None:
            self.prefix.forget(req)

    def cache_copy(self, req: Request) -> None:
        if self.prefix is not None:
            self.prefix.copy(req)

    def cache_donate(self, req: Request) -> bool:
        return self.prefix is not None and self.prefix.donate(req)

    def cache_awaits(self, req: Request) -> bool:
        return self.prefix is not None and self.prefix.awaits(req)

    def cache_evict(self, n: int = 1) -> int:
        return 0 if self.prefix is None else self.prefix.evict(n, self.waiting, self.running)

    def cache_after_fence(self) -> None:
        if self.prefix is not None:
            self.prefix.after_fence()

    def flush_cache(self) -> int:
        """Evict every unlocked published node (what is locked or unpublished stays, and while
        requests run, what waiting siblings will copy). Returns how many were evicted."""
        return 0 if self.prefix is None else self.cache_evict(len(self.prefix.tree.holding()))

    # -- the forward pass --------------------------------------------------------------------
    def _launch(self, batch: Batch) -> InFlight:
        """Launch `batch`. A fault before the model is called leaves its requests admitted and
        unfed (the next step feeds them); once it was called, they end (see the contract)."""
        step = self.pool.launch(self.device.marker(self.pool.ledger.launched + 1))
        self._tally["steps"] += 1
        self._state_written = False
        try:
            tokens, rows = self._forward(batch)
        except BaseException as exc:
            self.device.finish(step)  # nothing more of this step will run
            if not self._state_written:
                raise
            ended = _ended(batch)  # before `_fail` ends them (a prompt request forgets its siblings)
            self._fail(batch, step, exc)
            if isinstance(exc, Exception):
                raise StepFailed(f"the forward pass of step {step} raised: {exc!r}; {ended}") from exc
            raise
        return InFlight(step, batch.kind, tokens, deque(rows))

    def _fail(self, batch: Batch, step: int, exc: BaseException) -> None:
        """The slots of a failed step may hold anything: end its requests (a session turn's
        lent slot goes back to its session, marked stale). A fault in here breaks the scheduler."""
        self._critical = f"ending the requests of failed step {step}"
        for req, _ in batch.items:
            if not req.done:
                self._abort_running(req, f"step {step} failed: {exc!r}")
                self._turn_ended(req)
        self._critical = None

    def _forward(self, batch: Batch) -> tuple:
        """Run the layer on the batch (reading and writing the pool by slot index). Returns the
        tokens tensor (a device future) and, per item, (request, generation, row of its token
        in that tensor or None). No host sync here."""
        items = batch.items if batch.kind == "prefill" else _by_source(batch.items)
        slots = self.pool.on_device([req.slot for req, _ in items])
        conv, ssm = self.pool.conv[0], self.pool.ssm
        sampled = any(req.temperature > 0 for req, _ in items)  # host floats: greedy batches run as before
        if batch.kind == "prefill":
            chunks = [torch.tensor(req.input[req.fed : req.fed + n], dtype=torch.int64) for req, n in items]
            self._state_written = True  # from here on the slots' state may be written
            if sampled:
                nxt = self._sample(self.model.prefill_logits(chunks, slots, conv, ssm), items)
            else:
                nxt = self.model.prefill(chunks, slots, conv, ssm)
        else:  # each request's last token, gathered from the step that produced it
            groups: dict = {}
            for req, _ in items:
                groups.setdefault(req.tail[2], (req.tail[0], []))[1].append(req.tail[1])
            # the rows go to the device through pinned memory, asynchronously: no sync here
            last = torch.cat(
                [t[to_device(torch.tensor(rows, dtype=torch.int64), t.device)] for t, rows in groups.values()]
            )
            self._state_written = True
            if sampled:
                nxt = self._sample(self.model.decode_logits(last.to(slots.device), slots, conv, ssm), items)
            else:
                nxt = self.model.decode(last.to(slots.device), slots, conv, ssm)
        rows = []
        for i, (req, n) in enumerate(items):
            if batch.kind == "prefill":
                req.fed += n
            makes_token = not req.prefilling
            if makes_token:
                req.tail = (nxt, i, self.pool.ledger.launched)  # the step launched last is this one
                req.pending_outputs += 1
            rows.append((req, req.generation, i if makes_token else None))
        return nxt, rows

    @staticmethod
    def _sample(logits: torch.Tensor, items: list) -> torch.Tensor:
        """Each row's next token (`kernels/sample.py`): its temperature and seed, and the token's
        position in its output (outputs so far, made or in flight). The three columns go to the
        device through pinned memory, asynchronously: no sync here."""
        device = logits.device
        temperature = to_device(torch.tensor([req.temperature for req, _ in items], dtype=torch.float64), device)
        seed = to_device(torch.tensor([req.seed for req, _ in items], dtype=torch.int64), device)
        position = [len(req.output) + req.pending_outputs for req, _ in items]
        return sample(logits, temperature, seed, to_device(torch.tensor(position, dtype=torch.int64), device))

    # -- results -----------------------------------------------------------------------------
    def _catch_up(self) -> None:
        """Process every landed step, release every request at its budget, close every session
        whose close is due. Each unit is taken off its queue only once done, so a fault leaves
        exactly the rest for the next call."""
        while self.landed:
            self._process(self.landed[0])
            self.landed.popleft()
        while self.finishing:
            req = self.finishing[0]
            if req.done:  # aborted meanwhile
                self.finishing.popleft()
                continue
            group = self._finish_group() if self._releases_in_groups() else [req]
            if len(group) > 1:
                self._finish_many(group)
            else:
                self._finish(req)

    def _process(self, done: InFlight) -> None:
        """The host learns a finished step's tokens (one `.tolist()`: the step's one device
        sync on CUDA, taken only once the step is done); requests at their budget queue to finish."""
        self.device.finish(done.step)
        if done.host is None:
            done.host = done.tokens.tolist()
        rows = done.rows
        while rows:
            req, generation, row = rows[0]
            if not (req.done or generation != req.generation or row is None):  # else void: aborted or retracted
                req.pending_outputs -= 1
                req.output.append(done.host[row])
                if len(req.output) >= req.max_new_tokens:
                    self.finishing.append(req)
            rows.popleft()

    def _releases_in_groups(self) -> bool:
        """Whether finished requests may be released many in one pool call: only with the stock
        `release_finished` (a subclass or a wrapper that replaces it, as mutants and fault
        tests do, is called once per request), and with the prefix cache off (a plain request
        donates its slot to the cache: one INSERT of its own)."""
        return self.prefix is None and getattr(self.release_finished, "__func__", None) is Scheduler.release_finished

    def _finish_group(self) -> list:
        """The requests waiting to finish, in order, up to the first that parks its slot in
        its session (that one goes alone): every one of them gives its slot back by FINISH."""
        group = []
        for req in self.finishing:
            if req.done:
                continue
            if req.session is not None and not req.lent:
                break
            group.append(req)
        return group

    def _finish_many(self, group: list) -> None:
        """`_finish` for a group from `_finish_group`, in one pool call (all or none)."""
        try:
            self.release_finished_each(group)  # the pool moves first: if it refuses, nothing here changed
        except BaseException:
            if self._holds(group[0]):  # all or none: the first says which
                raise
            self._finished_each(group)  # the pool moved before the fault struck: record it
            raise
        self._finished_each(group)

    def _finished_each(self, group: list) -> None:
        for req in group:
            while self.finishing[0] is not req:  # aborted meanwhile
                self.finishing.popleft()
            self._finished(req)

    def _finish(self, req: Request) -> None:
        try:
            self.release_finished(req)  # the pool moves first: if it refuses, nothing here changed
        except BaseException:
            if self._holds(req):
                raise
            self._finished(req)  # the pool moved before the fault struck: record it
            raise
        self._finished(req)

    def _finished(self, req: Request) -> None:
        if req.session is not None:
            s = self.sessions[req.session]
            if not req.lent:
                s.slot = req.slot  # parked: the session's now
            s.transcript = s.transcript + s.pending + req.prompt + req.output[:-1]  # what the turn fed and made
            s.pending = req.output[-1:]
            s.stale = False
        self._leave(req, "length")
        self.finishing.popleft()
        self._turn_ended(req)

    # -- internals ---------------------------------------------------------------------------
    def _abort_running(self, req: Request, reason: str) -> None:
        try:
            self.release_aborted(req)
        except BaseException:
            if not self._holds(req):  # the pool moved before the fault struck: record it
                self._aborted(req, reason)
            raise
        self._aborted(req, reason)

    def _aborted(self, req: Request, reason: str) -> None:
        if req.lent:
            self.sessions[req.session].stale = True  # its state was advanced in place
        self._leave(req, reason)

    def _leave(self, req: Request, reason: str) -> None:
        """`req` is done and keeps no handle on any slot nor any step tensor; it leaves the
        tables and its result goes to the outbox."""
        req.phase, req.slot, req.lent, req.finish_reason, req.tail = Phase.DONE, None, False, reason, None
        req.generation += 1
        if req in self.running:
            self.running.remove(req)
        self.requests.pop(req.rid, None)
        if req.shared:  # a group's prompt request: its siblings' results are what the user asked for
            req.siblings = []
            return
        self._tally[_COUNTED_AS.get(reason, "failures")] += 1
        self.outbox.append(req.result())

    def _drop(self, req: Request, reason: str) -> None:
        """A waiting request leaves; a candidate that took its slot in a step a fault
        interrupted gives it back first."""
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
        refeed = s.stale or s.slot is None  # the state is lost or untrustworthy: feed it all from zero
        req.input = (s.transcript if refeed else []) + s.pending + req.prompt
        req.refeeds = refeed
        self.waiting.append(req)

    def _close_now(self, s: Session) -> None:
        """Release the session's slot; it leaves the tables. Marked CLOSING first: if the pool
        refuses, the next step closes it again."""
        s.status = SessionStatus.CLOSING
        try:
            self.release_session(s)
        except BaseException:
            if s.slot is None or not self.pool.held_by(Actor.session(s.sid)).numel():
                self._closed(s)  # the pool moved before the fault struck: record it
            raise
        self._closed(s)

    def _closed(self, s: Session) -> None:
        s.slot, s.status, s.turn = None, SessionStatus.CLOSED, None
        self.sessions.pop(s.sid, None)

    def _holds(self, req: Request) -> bool:
        """Whether the pool says `req` still holds a slot (after a call for it raised)."""
        return bool(self.pool.held_by(Actor.request(req.rid)).numel())

    def _reap_sessions(self) -> None:
        """Close idle sessions past the timeout, and closes that a fault interrupted."""
        timeout = self.config.session_timeout
        for s in list(self.sessions.values()):
            if s.turn is not None or s.turns:
                continue
            if s.status is SessionStatus.CLOSING:
                self._close_now(s)
            elif s.status is SessionStatus.OPEN:
                s.idle_steps += 1
                if timeout is not None and s.idle_steps > timeout:
                    self._close_now(s)
