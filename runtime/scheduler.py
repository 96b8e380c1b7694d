"""The scheduler: requests, streaming sessions, prefill batches with rollback, chunked prefill,
decode, retraction, abort, session close and overlap fences, over a real (tiny) Mamba-2 layer.

Every slot move goes through the pool's lifecycle events; the scheduler never touches the
ledger. One `step()`:

1. reap idle sessions; build the next batch (see `admission.py`): continuing chunked prefills
   first, then waiting candidates one by one, each taking its slot (alloc, or its session's
   slot lent to it) and rolled back if it then does not fit; if no prefill work, a decode batch;
2. launch it on the device (the forward pass), then process the results of the step before
   it (overlap on) or of this step (overlap off): append tokens, finish requests (a plain one
   releases its slot, a session turn parks it or gives the lent slot back);
3. fence every step the device has finished: released slots it may have used become free;
4. when idle, audit the pool: every slot accounted for, no leak, owners named.

Mid-turn abort decision: a session turn aborted (or retracted, or failed) after it started
feeding has advanced the session's state in place. Its slot goes back to the session (the
lifecycle says so), the turn's tokens are dropped from the transcript, and the session is
marked *stale*: its next turn zeroes the slot and feeds the whole transcript again before its
own prompt. So no slot is ever owned twice, and a half-updated state is never continued.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import torch

from slotwarden.kernels.layer import TinyMamba
from slotwarden.model.vocabulary import Actor

from .admission import Batch, build_batch
from .device import SimulatedDevice
from .pool import StatePool
from .request import Phase, Request, Session, SessionStatus


@dataclass(frozen=True)
class SchedulerConfig:
    max_running: int = 8  # requests in the running batch
    token_budget: int = 64  # input tokens a prefill step may feed
    chunk_size: int = 32  # input tokens one request may feed in one step
    overlap: bool = False  # build and launch step N+1 while step N is in flight
    retract_after: int | None = 3  # a head of queue starved this many steps retracts a running request
    session_timeout: int | None = None  # steps an idle session lives before the reaper closes it
    audit_when_idle: bool = True


def _by_source(items: list) -> list:
    """Decode items ordered by the step whose tensor holds their last token (usually one), so
    their inputs gather with one index per source tensor."""
    return sorted(items, key=lambda item: id(item[0].tail[0]))


class StepFailed(RuntimeError):
    """The forward pass of a step raised; its requests were aborted cleanly first."""


class AuditFailed(RuntimeError):
    """The idle audit found a slot unaccounted for; the message carries the slots' history."""


class InFlight(NamedTuple):
    step: int
    batch: Batch
    produced: tuple  # (tokens tensor, [(request, generation, row or None) per batch item])


class StepReport(NamedTuple):
    step: int | None
    kind: str  # "prefill", "decode" or "idle"
    size: int
    tokens: int
    finished: tuple
    rolled_back: int
    retracted: tuple


class Scheduler:
    def __init__(self, pool: StatePool, model: TinyMamba, config: SchedulerConfig = SchedulerConfig()):
        self.pool, self.model, self.config = pool, model, config
        self.device = SimulatedDevice()
        self.requests: dict[int, Request] = {}
        self.sessions: dict[int, Session] = {}
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.inflight: InFlight | None = None
        self.generation: dict[int, int] = {}
        self._next_rid = 0
        self._next_sid = 0
        self.rolled_back = 0

    # -- the user's side ---------------------------------------------------------------------
    def submit(self, prompt, max_new_tokens: int, session: int | None = None) -> int:
        """Queue a request (or the next turn of `session`); returns its id."""
        prompt = [int(t) for t in prompt]
        if not prompt or max_new_tokens < 1:
            raise ValueError("a request needs at least one prompt token and one new token")
        rid = self._next_rid
        self._next_rid += 1
        req = Request(rid, prompt, max_new_tokens, session)
        self.requests[rid] = req
        self.generation[rid] = 0
        if session is None:
            req.input = list(prompt)
            self.waiting.append(req)
            return rid
        s = self.sessions.get(session)
        if s is None or s.status is not SessionStatus.OPEN:
            raise ValueError(f"session {session} is not open")
        s.turns.append(rid)
        s.idle_steps = 0
        if s.turn is None:
            self._start_turn(s)
        return rid

    def open_session(self) -> int:
        sid = self._next_sid
        self._next_sid += 1
        self.sessions[sid] = Session(sid)
        return sid

    def close_session(self, sid: int) -> None:
        """Close `sid`: queued turns are dropped; with a turn running, the close is deferred
        until that turn ends. Releases exactly the slot the session owns."""
        s = self.sessions[sid]
        if s.status is SessionStatus.CLOSED:
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
        self._close_now(s)

    def abort(self, rid: int) -> None:
        """Cancel request `rid`, wherever it is; whatever it holds goes back where it came from."""
        req = self.requests[rid]
        if req.done:
            return
        if req.phase is Phase.WAITING:
            self._drop(req, "abort")
        else:
            self._abort_running(req, "abort")
        self._turn_ended(req)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running and self.inflight is None

    # -- one step ----------------------------------------------------------------------------
    def step(self) -> StepReport:
        self._reap_sessions()
        before = self.rolled_back
        batch, retracted = build_batch(self)
        previous, current, failure = self.inflight, None, None
        if batch.items:
            step = self.pool.launch(self.device.marker(self.pool.ledger.launched + 1))
            try:
                current = InFlight(step, batch, self._forward(batch))
            except Exception as exc:  # the step's state writes are unknown: abort its requests
                failure = exc
                for req, _ in batch.items:
                    self._abort_running(req, f"step {step} failed: {exc!r}")
                    self._turn_ended(req)
                self.device.finish(step)
        finished = []
        if self.config.overlap:
            self.inflight = current
            if previous is not None:
                self.device.finish(previous.step)
                finished += self._process(previous)
        elif current is not None:
            self.device.finish(current.step)
            finished += self._process(current)
        self.fence_finished()
        if failure is not None:
            raise StepFailed(f"the forward pass of step {self.pool.ledger.launched} raised: {failure!r}") from failure
        if self.idle and self.config.audit_when_idle:
            self.check_audit()
        return StepReport(
            current.step if current else None,
            batch.kind if batch.items else "idle",
            len(batch.items),
            sum(n for _, n in batch.items),
            tuple(finished),
            self.rolled_back - before,
            tuple(r.rid for r in retracted),
        )

    def run(self, max_steps: int = 10_000) -> int:
        """Step until idle (or `max_steps`); returns the number of steps taken."""
        for n in range(max_steps):
            if self.idle:
                return n
            self.step()
        raise RuntimeError(f"not idle after {max_steps} steps")

    # -- audit -------------------------------------------------------------------------------
    def check_audit(self):
        """free + batch + session + released == capacity, the free list is the FREE set, and
        every held slot belongs to a live request or session, as the scheduler itself says."""
        live_requests = {r.rid for r in self.running}
        live_sessions = {s.sid for s in self.sessions.values() if s.status is not SessionStatus.CLOSED}
        audit = self.pool.audit(live_requests, live_sessions)
        problems = list(audit.problems)
        for s in self.sessions.values():
            held = set(self.pool.held_by(Actor.session(s.sid)).tolist())
            if held != ({s.slot} if s.slot is not None else set()):
                problems.append(f"session {s.sid} thinks it holds {s.slot}, the pool says {sorted(held)}")
        for r in self.running:
            held = set(self.pool.held_by(Actor.request(r.rid)).tolist())
            if held != {r.slot}:
                problems.append(f"request {r.rid} thinks it holds {r.slot}, the pool says {sorted(held)}")
        leaks = [
            f"slot {leak.slot}: {leak.state.name}, owner {leak.owner}, left there by {leak.last_event.name.lower()}\n{leak.history}"
            for leak in audit.leaks
        ]
        if problems or leaks:
            raise AuditFailed("idle audit failed:\n" + "\n".join(problems + leaks))
        return audit

    # -- policy: what the scheduler fires at each decision (mutants override one of these) ----
    def rollback_candidate(self, req: Request) -> None:
        """A candidate that took its slot does not fit: give back exactly what it took."""
        self.pool.rollback([req.slot], Actor.request(req.rid))
        req.slot, req.lent = None, False
        self.rolled_back += 1

    def release_finished(self, req: Request) -> None:
        """A request reached its budget: a plain one releases its slot, a session turn parks
        its fresh slot in the session or gives the lent one back."""
        actor = Actor.request(req.rid)
        if req.session is None or req.lent:
            self.pool.finish([req.slot], actor)
        else:
            self.pool.park([req.slot], actor, req.session)
            self.sessions[req.session].slot = req.slot

    def release_aborted(self, req: Request) -> None:
        """A running request is cancelled: its slot goes back where it came from."""
        self.pool.abort([req.slot], Actor.request(req.rid))

    def release_session(self, s: Session) -> None:
        """A session closes: exactly the slot it owns is released."""
        self.pool.close(Actor.session(s.sid))

    def fence_finished(self) -> None:
        """Fence every step the device has finished."""
        self.pool.fence()

    # -- internals ---------------------------------------------------------------------------
    def _forward(self, batch: Batch) -> tuple:
        """Run the layer on the batch (reading and writing the pool by slot index). Returns the
        tokens tensor (a device future) and, per item, (request, generation, row of its token
        in that tensor or None). No host sync here."""
        items = batch.items if batch.kind == "prefill" else _by_source(batch.items)
        slots = self.pool.on_device([req.slot for req, _ in items])
        conv, ssm = self.pool.conv[0], self.pool.ssm
        if batch.kind == "prefill":
            chunks = [torch.tensor(req.input[req.fed : req.fed + n], dtype=torch.int64) for req, n in items]
            nxt = self.model.prefill(chunks, slots, conv, ssm)
        else:  # each request's last token, gathered from the step that produced it
            groups: dict = {}
            for req, _ in items:
                groups.setdefault(id(req.tail[0]), (req.tail[0], []))[1].append(req.tail[1])
            last = torch.cat([t[torch.tensor(rows, device=t.device)] for t, rows in groups.values()])
            nxt = self.model.decode(last.to(slots.device), slots, conv, ssm)
        rows = []
        for i, (req, n) in enumerate(items):
            if batch.kind == "prefill":
                req.fed += n
            makes_token = not req.prefilling
            if makes_token:
                req.tail = (nxt, i)
                req.pending_outputs += 1
            rows.append((req, self.generation[req.rid], i if makes_token else None))
        return nxt, rows

    def _process(self, done: InFlight) -> list:
        """The host learns a finished step's tokens (one `.tolist()`: the step's one device
        sync on CUDA, taken only once the step is done) and finishes the requests that reached
        their budget."""
        tokens, rows = done.produced
        host = tokens.tolist()
        finished = []
        for req, generation, row in rows:
            if req.done or generation != self.generation[req.rid] or row is None:
                continue  # aborted or retracted while the step was in flight: its output is void
            req.pending_outputs -= 1
            req.output.append(host[row])
            if len(req.output) >= req.max_new_tokens:
                self._finish(req)
                finished.append(req.rid)
        return finished

    def _finish(self, req: Request) -> None:
        self.release_finished(req)
        if req.session is not None:
            s = self.sessions[req.session]
            s.transcript = (req.input if req.refeeds else s.transcript + req.input) + req.output[:-1]
            s.pending = req.output[-1:]
            s.stale = False
        self._leave(req, "length")
        self._turn_ended(req)

    def _abort_running(self, req: Request, reason: str) -> None:
        self.release_aborted(req)
        if req.lent:
            self.sessions[req.session].stale = True  # its state was advanced in place
        self._leave(req, reason)

    def _leave(self, req: Request, reason: str) -> None:
        """`req` is done and keeps no handle on any slot."""
        req.phase, req.slot, req.lent, req.finish_reason = Phase.DONE, None, False, reason
        self.generation[req.rid] += 1
        if req in self.running:
            self.running.remove(req)

    def _drop(self, req: Request, reason: str) -> None:
        """A waiting request leaves: it holds no slot."""
        if req in self.waiting:
            self.waiting.remove(req)
        req.phase, req.finish_reason = Phase.DONE, reason
        self.generation[req.rid] += 1

    def _turn_ended(self, req: Request) -> None:
        if req.session is None:
            return
        s = self.sessions[req.session]
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
        self.release_session(s)
        s.slot, s.status, s.turn = None, SessionStatus.CLOSED, None

    def _reap_sessions(self) -> None:
        timeout = self.config.session_timeout
        for s in self.sessions.values():
            if s.status is SessionStatus.OPEN and s.turn is None and not s.turns:
                s.idle_steps += 1
                if timeout is not None and s.idle_steps > timeout:
                    self._close_now(s)
