"""One scheduler, not two: the abstract scheduler (the checker's model) and the runtime's
`Scheduler` run on the same event sequences and must agree on slot ownership.

The runtime decides; the model must be able to follow (`pair.Pair`). Each operation of a
workload runs on the runtime with its pool watched, and every move it makes is followed by the
model action that makes it; user operations that move no slot are followed by the model's action
of the same name. After every operation every slot agrees: state, owner, borrower (runtime ids
and slots mapped to the model's) and lock count. The model fences after every action, the
runtime at the end of a step: a slot released after its last fence, with no step in flight that
may use it, counts as free. With the prefix cache on the workloads also send follow-ups and
parallel-sampling groups, and the cache's moves are followed too. The first divergence stops a
workload and is reported with the operations so far; workloads are seeded (`workloads`).
"""

from __future__ import annotations

import random
from typing import NamedTuple

from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import Event, Group
from slotwarden.runtime.scheduler.scheduler import Scheduler

from slotwarden.verification.abstract.policy import Policy
from slotwarden.verification.differential.pair import Divergence, Pair
from slotwarden.verification.differential.workloads import config, new_requests, workload
from slotwarden.verification.abstract.world import (
    DONE,
    OPEN,
    SESSION_BASE,
    WAITING,
)

CACHE_ONLY = tuple(
    e
    for e in Event
    if all(
        Group.CACHE_OWNED in (LIFECYCLE.spec(r.source).group, LIFECYCLE.spec(r.dest).group)
        for r in LIFECYCLE.rules
        if r.event is e
    )
)
"""The prefix cache's own events: made only by a run with the cache on."""
WINDOW_ONLY = (Event.DRAFT, Event.VERIFY, Event.COMMIT)
"""Speculative windows' events: the workloads send no `spec_k`, so the model follows no window."""
FOLLOWED = tuple(e for e in Event if e is not Event.FENCE and e not in CACHE_ONLY + WINDOW_ONLY)  # each at least once
FOLLOWED_WITH_CACHE = tuple(e for e in Event if e is not Event.FENCE and e not in WINDOW_ONLY)
ROWS = ("pad rows", "condensed rows", "in-flight row")
"""What the launched steps' rows must show at least once (`Pair._rows`): pad rows beside request
rows, the persistent batch's rows condensed, a row kept for a request whose token is in flight
(padding to a captured size is counted too, as "padded launch": rarer on these small pools)."""


def runtime_has_cache() -> bool:
    """Whether the runtime's scheduler has a prefix cache to compare (`prefix_cache`)."""
    from slotwarden.runtime.scheduler.scheduler import SchedulerConfig

    return "prefix_cache" in getattr(SchedulerConfig, "__dataclass_fields__", {})


class Report(NamedTuple):
    workloads: int
    operations: int
    moves: int  # runtime slot moves the model followed
    divergence: str | None  # the first one, with its workload; None: they agree
    events: dict = {}  # event name -> how many runtime moves of it the model followed
    cache: bool = False  # the runtime ran its prefix cache

    @property
    def unexercised(self) -> tuple:
        """The runtime's events (all but the fence; without the cache, all but its own and the
        rows' shapes, `ROWS`) that no workload made: a run that never made one says nothing about it."""
        names = [e.name for e in FOLLOWED_WITH_CACHE] if self.cache else [e.name for e in FOLLOWED] + list(ROWS)
        return tuple(name for name in names if name not in self.events)

    @property
    def ok(self) -> bool:
        return self.divergence is None and not self.unexercised


def run_workload(
    ops: tuple, cfg: dict, scheduler_cls: type = Scheduler, policy: Policy | None = None, model=None
) -> Pair:
    """Run `ops` on the runtime and the model side by side; raise `Divergence` at the first
    disagreement (its message names the operation)."""
    from slotwarden.verification.machines.shared import MODEL

    pair = Pair(ops, cfg, scheduler_cls, Policy() if policy is None else policy, model or MODEL)
    made, opened = 0, 0
    for n, op in enumerate(ops):
        try:
            _run_op(pair, op, made, opened)
            made += new_requests(op)
            if op[0] == "open":
                opened += 1
            pair.submit_started_turns()
            pair.agree()
        except Divergence as d:
            raise Divergence(
                f"after {n + 1} operations ({', '.join(map(_op, ops[: n + 1]))}) with {cfg}: {d}"
            ) from None
    return pair


def _run_op(pair: Pair, op: tuple, made: int, opened: int) -> None:
    sched, kind = pair.sched, op[0]
    if kind == "submit":
        prompt = [(op[1] + i) % 64 for i in range(op[1])]
        rid = sched.submit(prompt, op[2])
        pair.requests[rid], pair.asked[made] = made, (prompt, rid)
    elif kind == "follow":  # the earlier request's prompt and output (if it ended), one more token
        prompt, base = pair.asked.get(op[1], ([op[1] % 64], None))
        ended = [r.output for r in sched.outbox if r.rid == base] or [pair.results.get(base, ())]
        prompt = list(prompt) + list(ended[0]) + [op[2]]
        rid = sched.submit(prompt, op[2])
        pair.requests[rid], pair.asked[made] = made, (prompt, rid)
    elif kind == "group":  # siblings first, then the prompt request (the id after theirs)
        size, new, n, temperature = op[1:]
        prompt = [(size + i) % 64 for i in range(size)]
        rids = sched.submit_n(prompt, new, n, temperature=temperature, seed=size)
        for i, rid in enumerate(rids):
            pair.requests[rid], pair.asked[made + i] = made + i, (prompt, rid)
        if rids[-1] + 1 in sched.requests:
            pair.requests[rids[-1] + 1] = made + n
        else:  # no prompt request (the cache is off): its reserved id never names a request
            pair.act("abort", made + n)
    elif kind == "open":
        pair.sessions[sched.open_session()] = SESSION_BASE + opened
    elif kind == "turn":
        sid = _runtime_id(pair.sessions, SESSION_BASE + op[1])
        try:
            pair.requests[sched.submit([(op[2] + i) % 64 for i in range(op[2])], op[3], session=sid)] = made
        except ValueError:  # the session is closed (SessionClosed): the turn never exists
            pass
    elif kind == "abort":
        rid = _runtime_id(pair.requests, op[1])
        if rid is None:
            return
        sched.abort(rid)
        pair.follow()
        _ended_without_a_move(pair)
    elif kind == "close":
        sid = _runtime_id(pair.sessions, SESSION_BASE + op[1])
        if sid is None:
            return
        live = {rid for rid, r in sched.requests.items() if not r.done}
        sched.close_session(sid)
        todo, pair.moves = pair.moves, []
        made_moves: list = []
        for rid in sorted(live):  # the turn the close dropped from the queue (ended requests leave the table)
            r, mine = sched.requests.get(rid), pair.requests.get(rid)
            if mine is not None and (r is None or r.done) and pair.world.requests[mine].phase == WAITING:
                made_moves += pair.act("abort", mine)
        if pair.world.sessions[op[1]].status == OPEN:
            made_moves += pair.act("close", SESSION_BASE + op[1])
        pair._same_moves("close", SESSION_BASE + op[1], todo, tuple(made_moves))
    else:
        for _ in range(op[1]):
            sched.step()
            pair.results.update((r.rid, r.output) for r in sched.outbox)
            pair.follow()
            pair.submit_started_turns()


def _ended_without_a_move(pair: Pair) -> None:
    """Every request the runtime ended (it left the tables) that the model has not: aborted
    in the model, which must make no move for it (the runtime made none: a request aborted
    while it waited, the prompt request of a group whose last sibling was aborted, a queued
    turn)."""
    for rid, mine in sorted(pair.requests.items()):
        if rid not in pair.sched.requests and pair.world.requests[mine].phase != DONE:
            pair._same_moves("abort", mine, [], pair.act("abort", mine))


def _runtime_id(ids: dict, model_id: int):
    return next((k for k, v in ids.items() if v == model_id), None)


def check_differential(workloads: int = 200, length: int = 30, seed: int = 0, scheduler_cls: type = Scheduler,
                       policy: Policy | None = None, cache: bool = False) -> Report:  # fmt: skip
    """Run `workloads` random workloads (seeded); the first divergence, if any. `cache`: with
    the runtime's prefix cache on, and follow-ups and parallel-sampling groups in the workloads."""
    rng = random.Random(seed)
    operations = moves = 0
    events: dict = {}
    for w in range(workloads):
        ops, cfg = workload(rng, length, follow=cache, groups=cache), config(rng)
        if cache:
            cfg["prefix_cache"] = True
        try:
            pair = run_workload(ops, cfg, scheduler_cls, policy)
        except Divergence as d:
            return Report(w + 1, operations, moves, f"workload {w} (seed {seed}): {d}", events, cache)
        except Exception as e:  # the runtime itself refused: as much a failure of the stage
            return Report(
                w + 1,
                operations,
                moves,
                f"workload {w} (seed {seed}): the runtime raised {e!r} on {ops} with {cfg}",
                events,
                cache,
            )
        operations += len(ops)
        moves += pair.followed
        for name, n in pair.events.items():
            events[name] = events.get(name, 0) + n
    return Report(workloads, operations, moves, None, events, cache)


def _op(op: tuple) -> str:
    return op[0] + ("" if len(op) == 1 else f"{op[1:]}")
