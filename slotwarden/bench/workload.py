"""A seeded synthetic serving workload, and a driver that feeds it to a `Scheduler` step by step.

The workload is data (`Plan`): plain requests that arrive at given steps, and streaming sessions
that open at a given step and send 2-4 short turns, each turn sent a few "think" steps after the
previous one ended (the client reads the answer, then types). After its last turn a session is
either closed by its client (after a short delay, or while that turn still runs: the deferred
close) or left open for the scheduler's idle-session reaper. A few aborts are planned too: of a
queued plain request, of a running plain request and of a running session turn.

`Driver` plays the client's side around `Scheduler.step()`: `before_step(t)` submits what
arrives at step t, sends due turns, closes and aborts; `after_step(t)` notices ended turns and
plans what the client does next. It only uses the scheduler's public calls (`submit`,
`open_session`, `close_session`, `abort`) and reads `requests`, `sessions` (the live ones: a
request or session that ended is no longer there), `waiting`, `running`.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from slotwarden.runtime.scheduler.request import Phase, SessionStatus


@dataclass(frozen=True)
class WorkloadSpec:
    """What to generate. Ranges are inclusive (lo, hi)."""

    sessions: int = 24
    requests: int = 96
    seed: int = 0
    vocab: int = 64
    horizon: int | None = None  # arrivals spread over steps [0, horizon); None: 1.2 steps per arrival
    turns: tuple = (2, 4)
    turn_prompt: tuple = (2, 8)
    turn_new_tokens: tuple = (2, 10)
    think: tuple = (0, 3)  # steps between a turn's end and the next turn
    request_prompt: tuple = (1, 24)
    long_prompt: tuple = (33, 90)  # longer than the default chunk (32): chunked prefill
    long_share: float = 0.2
    request_new_tokens: tuple = (1, 24)
    close_share: float = 0.5  # sessions closed by their client; the rest are left to the reaper
    close_delay: tuple = (0, 4)
    deferred_closes: int = 1  # of the closed ones: closed while their last turn still runs
    aborts: tuple = ("queued", "running", "session turn")
    follow_share: float = 0.0  # plain requests that continue an earlier one once it ended (shared prefixes)
    samples: int = 1  # parallel samples per fresh plain prompt (`Scheduler.submit_n`), drawn at `temperature`
    temperature: float = 1.0  # of the samples when `samples` > 1 (each group seeded by its arrival index)

    def arrival_horizon(self) -> int:
        return self.horizon if self.horizon is not None else max(1, int(1.2 * (self.sessions + self.requests)))


@dataclass(frozen=True)
class Arrival:
    step: int
    prompt: tuple
    max_new_tokens: int
    follows: int | None = None  # index of an earlier arrival: sent once that one ended, after its prompt and output


@dataclass(frozen=True)
class SessionPlan:
    step: int  # the step at which the session opens and sends its first turn
    turns: tuple  # ((prompt, max_new_tokens), ...)
    thinks: tuple  # steps before turn i+1 is sent, after turn i ended
    close: str  # "client" (after close_delay), "deferred" (while the last turn runs), "reaper"
    close_delay: int


@dataclass(frozen=True)
class Plan:
    spec: WorkloadSpec
    requests: tuple  # Arrival
    sessions: tuple  # SessionPlan
    aborts: tuple  # (earliest step, kind)

    @property
    def last_arrival(self) -> int:
        steps = [a.step for a in self.requests] + [s.step for s in self.sessions]
        return max(steps, default=0)


def make_plan(spec: WorkloadSpec = WorkloadSpec()) -> Plan:
    """The workload of `spec`, the same for the same seed."""
    rng = random.Random(spec.seed)
    horizon = spec.arrival_horizon()

    def tokens(lo_hi) -> tuple:
        return tuple(rng.randint(1, spec.vocab - 1) for _ in range(rng.randint(*lo_hi)))

    requests = []
    for _ in range(spec.requests):
        long = rng.random() < spec.long_share
        requests.append(
            Arrival(
                rng.randrange(horizon),
                tokens(spec.long_prompt if long else spec.request_prompt),
                rng.randint(*spec.request_new_tokens),
            )
        )
    requests.sort(key=lambda a: a.step)
    if spec.follow_share > 0:  # drawn apart, so that the rest of the plan stays the same
        pick = random.Random(spec.seed + 2)
        requests = [
            a
            if i == 0 or pick.random() >= spec.follow_share
            else Arrival(a.step, a.prompt[:4], a.max_new_tokens, pick.randrange(i))
            for i, a in enumerate(requests)
        ]
    sessions = []
    closing = set(rng.sample(range(spec.sessions), round(spec.close_share * spec.sessions)))
    deferred = set(rng.sample(sorted(closing), min(spec.deferred_closes, len(closing))))
    for i in range(spec.sessions):
        n = rng.randint(*spec.turns)
        sessions.append(
            SessionPlan(
                step=rng.randrange(horizon),
                turns=tuple((tokens(spec.turn_prompt), rng.randint(*spec.turn_new_tokens)) for _ in range(n)),
                thinks=tuple(rng.randint(*spec.think) for _ in range(n - 1)),
                close="deferred" if i in deferred else "client" if i in closing else "reaper",
                close_delay=rng.randint(*spec.close_delay),
            )
        )
    sessions.sort(key=lambda s: s.step)
    # aborts: planned around the busy middle of the arrivals; each fires at the first step from
    # then on that has a candidate of its kind
    aborts = tuple(
        sorted((rng.randrange(horizon // 4, max(horizon // 4 + 1, 3 * horizon // 4)), kind) for kind in spec.aborts)
    )
    return Plan(spec, tuple(requests), tuple(sessions), aborts)


@dataclass
class _Live:
    plan: SessionPlan
    sid: int
    turn: int = 0  # index of the turn in flight (or last sent)
    rid: int | None = None  # its request id
    next_at: int | None = None  # step at which the next turn is sent
    close_at: int | None = None  # step at which the client closes it


@dataclass
class DriverStats:
    submitted: int = 0
    turns_sent: int = 0
    aborts: dict = field(default_factory=dict)  # kind -> request id aborted
    client_closes: int = 0
    deferred_closes: int = 0  # close asked while the session's turn was running
    skipped_turns: int = 0  # turns not sent because the session was closed first


class Driver:
    """The client side of `plan`, around `sched.step()`."""

    def __init__(self, sched, plan: Plan):
        self.sched, self.plan = sched, plan
        self.rng = random.Random(plan.spec.seed + 1)
        self.request_arrivals = defaultdict(list)
        for a in plan.requests:
            self.request_arrivals[a.step].append(a)
        self.session_arrivals = defaultdict(list)
        for s in plan.sessions:
            self.session_arrivals[s.step].append(s)
        self.index = {id(a): i for i, a in enumerate(plan.requests)}
        self.sent: dict[int, object] = {}  # arrival index -> its request, once submitted
        self.following: list = []  # follow-ups due, waiting for the request they continue to end
        self.pending_aborts = list(plan.aborts)
        self.live: dict[int, _Live] = {}  # sid -> live session, while the client still acts on it
        self.closed_by_client: set[int] = set()
        self.stats = DriverStats()

    # -- around each step ----------------------------------------------------------------------
    def before_step(self, t: int) -> None:
        s = self.sched
        self.following += self.request_arrivals.pop(t, ())
        for a in list(self.following):
            prompt = a.prompt
            if a.follows is not None:
                base = self.sent.get(a.follows)
                if base is None or not base.done:
                    continue  # (the base arrives no later: it is sent first)
                prompt = tuple(base.prompt) + tuple(base.output) + tuple(a.prompt)
            self.following.remove(a)
            i, n = self.index[id(a)], self.plan.spec.samples
            if n > 1 and a.follows is None:  # n samples of a fresh prompt; follow-ups continue the first
                ids = s.submit_n(prompt, a.max_new_tokens, n, temperature=self.plan.spec.temperature, seed=i)
            else:
                ids = (s.submit(prompt, a.max_new_tokens),)
            self.sent[i] = s.requests[ids[0]]
            self.stats.submitted += len(ids)
        for p in self.session_arrivals.pop(t, ()):
            live = _Live(p, s.open_session())
            self.live[live.sid] = live
            self._send(live, 0)
        for live in list(self.live.values()):
            if live.next_at == t:
                live.next_at = None
                self._send(live, live.turn + 1)
            elif live.close_at == t:
                self._close(live)
            elif live.plan.close == "deferred" and live.turn == len(live.plan.turns) - 1 and live.rid is not None:
                req = s.requests.get(live.rid)
                if req is not None and req.phase is Phase.RUNNING:
                    self.stats.deferred_closes += 1
                    self._close(live)
        self._abort(t)

    def after_step(self, t: int) -> None:
        for live in list(self.live.values()):
            if live.sid not in self.sched.sessions:  # closed: the reaper (or a deferred close) got there first
                self.live.pop(live.sid)
                continue
            if live.rid is None or live.next_at is not None or live.close_at is not None:
                continue
            if live.rid in self.sched.requests:  # not ended yet
                continue
            live.rid = None
            if live.turn + 1 < len(live.plan.turns):
                live.next_at = t + 1 + live.plan.thinks[live.turn]
            elif live.plan.close == "reaper":
                self.live.pop(live.sid)  # the client walks away; the reaper closes it
            else:
                live.close_at = t + 1 + live.plan.close_delay

    @property
    def finished(self) -> bool:
        """Everything arrived, the client has nothing left to do and every session is closed."""
        s = self.sched
        return (
            not self.request_arrivals
            and not self.following
            and not self.session_arrivals
            and not self.live
            and s.idle
            and not s.sessions  # every session closed
        )

    # -- internals -----------------------------------------------------------------------------
    def _send(self, live: _Live, i: int) -> None:
        session = self.sched.sessions.get(live.sid)
        if session is None or session.status is not SessionStatus.OPEN:
            self.stats.skipped_turns += 1
            self.live.pop(live.sid, None)
            return
        prompt, new = live.plan.turns[i]
        live.turn, live.rid = i, self.sched.submit(prompt, new, session=live.sid)
        self.stats.turns_sent += 1
        self.stats.submitted += 1

    def _close(self, live: _Live) -> None:
        self.sched.close_session(live.sid)
        self.closed_by_client.add(live.sid)
        self.stats.client_closes += 1
        self.live.pop(live.sid, None)

    def _abort(self, t: int) -> None:
        s = self.sched
        for planned in list(self.pending_aborts):
            at, kind = planned
            if t < at:
                continue
            if kind == "queued":
                candidates = [r for r in s.waiting if r.session is None]
            elif kind == "running":
                candidates = [r for r in s.running if r.session is None]
            else:  # a running session turn, preferably one on a lent slot (its session goes stale)
                turns = [r for r in s.running if r.session is not None]
                candidates = [r for r in turns if r.lent] or turns
            if not candidates:
                continue
            victim = self.rng.choice(candidates)
            s.abort(victim.rid)
            self.stats.aborts[kind] = victim.rid
            self.pending_aborts.remove(planned)
