"""One scheduler, not two: the abstract scheduler (the checker's model) and the runtime's
`Scheduler` run on the same event sequences and must agree on slot ownership.

The runtime decides; the model must be able to follow. Each operation of a workload (submit
a request, open a session, send a turn, abort, close, step) runs on the runtime with its pool
watched: every lifecycle move it makes (alloc, lend, admit, rollback, park, finish, retract,
abort, close) and every launch is turned into the abstract action that makes that move (an
ALLOC or a LEND is a `take`, a PARK or a FINISH a `finish`, ...), which must be enabled in
the model and make the same moves, slot by slot. User operations that move no slot (an abort
of a waiting request, a close deferred by a running turn, a turn entering the queue) are
followed by the model's action of the same name. After every operation the ledger's records
and the model's pool must agree on every slot: its state, its owner and its borrower, with
runtime ids and slots mapped to the model's (a slot's mapping is fixed when it is allocated).
The model fences after every action, the runtime at the end of a step: a slot the runtime
released after its last fence, with no step in flight that may use it, counts as free.

With the prefix cache on (`cache=True`, for a runtime that has one) the workloads also send
follow-ups (a plain request continuing an ended one: its prompt, its output, one more token),
and the cache's moves are followed too: a match's LOCK and its fresh slot are a `match`, an
INSERT a `donate`, an EVICT an `evict`; a lock given back at a fence was given back by the
model's `complete`, and a LOCK given back at once (no slot to copy into) is no move at all.
A cached slot's owner is compared through its slot (the model names a node by the slot it
holds), its lock count as it is.

With the cache on the workloads also submit parallel-sampling groups (`Scheduler.submit_n`,
2..3 samples, greedy or sampled): the model gets a plain request per sibling and one for the
group's hidden prompt request (whose id the runtime reserves after the siblings'). The twin
follows the group's moves like any others: the prompt request's take, admit and donation, each
sibling's match of the published prompt state and its copy, and the aborts (of a sibling, of
every sibling, of the prompt request by its id). A request the runtime ended without a move
(aborted while it waited, or the prompt request ended with its group's last sibling) is aborted
in the model too, which must then make no move either.

The first divergence stops a workload and is reported with the operations so far. Workloads
are drawn from a seeded generator, with pool sizes, budgets and overlap varied, so a run is
reproducible.
"""

from __future__ import annotations

import random
from typing import NamedTuple

from slotwarden.model.pool import new_pool
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Group, State
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.request import Phase
from slotwarden.runtime.scheduler.scheduler import Scheduler

from slotwarden.verification.abstract.actions import perform
from slotwarden.verification.abstract.policy import Policy
from slotwarden.verification.abstract.world import (
    DONE,
    OPEN,
    PENDING,
    SESSION_BASE,
    WAITING,
    Request,
    Session,
    World,
    node_of,
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
FOLLOWED = tuple(e for e in Event if e is not Event.FENCE and e not in CACHE_ONLY)  # each at least once
FOLLOWED_WITH_CACHE = tuple(e for e in Event if e is not Event.FENCE)


def runtime_has_cache() -> bool:
    """Whether the runtime's scheduler has a prefix cache to compare (`prefix_cache`)."""
    from slotwarden.runtime.scheduler.scheduler import SchedulerConfig

    return "prefix_cache" in getattr(SchedulerConfig, "__dataclass_fields__", {})


SETTINGS = ("overlap", "token_budget", "chunk_size", "max_running", "retract_after", "prefix_cache")


class Divergence(AssertionError):
    """The runtime made a move the model cannot follow, or their slots disagree."""


class Report(NamedTuple):
    workloads: int
    operations: int
    moves: int  # runtime slot moves the model followed
    divergence: str | None  # the first one, with its workload; None: they agree
    events: dict = {}  # event name -> how many runtime moves of it the model followed
    cache: bool = False  # the runtime ran its prefix cache

    @property
    def unexercised(self) -> tuple:
        """The runtime's events (all but the fence; without the cache, all but its own) that no
        workload made: a run that never made one says nothing about it."""
        return tuple(e.name for e in (FOLLOWED_WITH_CACHE if self.cache else FOLLOWED) if e.name not in self.events)

    @property
    def ok(self) -> bool:
        return self.divergence is None and not self.unexercised


def workload(rng: random.Random, length: int, follow: bool = False, groups: bool = False) -> tuple:
    """A random sequence of operations: ("submit", n, new), ("open",), ("turn", session, n,
    new), ("abort", request), ("close", session), ("step", times), with `follow`
    ("follow", request, new): a plain request continuing an earlier one, and with `groups`
    ("group", size, new, n, temperature): n samples of a prompt of `size` tokens, each group
    now and then followed by the aborts of all its siblings. Requests and sessions are named
    by their order of creation (a group's siblings, then its prompt request)."""
    ops, requests, sessions = [], 0, 0
    for _ in range(length):
        roll = rng.random()
        if groups and rng.random() < 0.1:
            op = ("group", rng.randint(2, 6), rng.randint(1, 3), rng.randint(2, 3), rng.choice([0.0, 1.0]))
            ops.append(op)
            if rng.random() < 0.3:  # after a few steps, every sibling aborted: the prompt request ends too
                ops.append(("step", rng.randint(0, 2)))
                ops += [("abort", requests + i) for i in range(op[3])]
            requests += _new_requests(op)
        elif follow and requests and roll < 0.12:
            ops.append(("follow", rng.randrange(requests), rng.randint(1, 3)))
            requests += 1
        elif roll < 0.18:
            ops.append(("submit", rng.randint(1, 6), rng.randint(1, 4)))
            requests += 1
        elif roll < 0.26 or (roll < 0.42 and not sessions):
            ops.append(("open",))
            sessions += 1
        elif roll < 0.42:
            ops.append(("turn", rng.randrange(sessions), rng.randint(1, 4), rng.randint(1, 3)))
            requests += 1
        elif roll < 0.52 and requests:
            ops.append(("abort", rng.randrange(requests)))
        elif roll < 0.58 and sessions:
            ops.append(("close", rng.randrange(sessions)))
        else:
            ops.append(("step", rng.randint(1, 3)))
    return tuple(ops)


def _new_requests(op: tuple) -> int:
    """How many requests operation `op` creates in the model (a group: its siblings and its
    prompt request)."""
    if op[0] == "group":
        return op[3] + 1
    return 1 if op[0] in ("submit", "turn", "follow") else 0


def config(rng: random.Random) -> dict:
    return dict(
        slots=rng.randint(1, 4),
        overlap=rng.random() < 0.5,
        token_budget=rng.choice([2, 4, 8, 32]),
        chunk_size=rng.choice([1, 2, 4, 16]),
        max_running=rng.randint(1, 4),
        retract_after=rng.choice([1, 2, None]),
    )


class _Pair:
    """The runtime and the model side by side, with the maps from runtime ids to model ids."""

    def __init__(self, ops: tuple, cfg: dict, scheduler_cls: type, policy: Policy, model):
        self.sched = build(model, slots=cfg["slots"], cls=scheduler_cls, **{k: cfg[k] for k in SETTINGS if k in cfg})
        self.policy, self.overlap = policy, cfg["overlap"]
        self.cache = bool(cfg.get("prefix_cache"))
        self.world = _initial_world(ops, cfg["slots"], self.cache)
        self.asked: dict = {}  # model request id -> (prompt, runtime request id): what follow-ups continue
        self.results: dict = {}  # runtime request id -> its output, once ended
        self.requests: dict = {}  # runtime request id -> model request id
        self.sessions: dict = {}  # runtime session id -> model session id
        self.slots: dict = {}  # runtime slot id -> model slot id
        self.moves: list = []  # runtime moves of the operation in progress: (event, slot, actor, target) or "launch"
        self.followed = self.launched = self.completed = 0
        self.fenced: tuple = ()  # the model's moves at fences not yet matched with the runtime's (its unlocks)
        self.events: dict = {}
        self._watch(self.sched.pool)

    def _watch(self, pool) -> None:
        fire, fire_each, alloc, launch = pool.fire, pool.fire_each, pool.alloc, pool.launch
        alloc_each = pool.alloc_each

        def watched_fire(event, ids, actor, target=NOBODY):
            out = fire(event, ids, actor, target)
            self.moves += [(event, int(i), actor, target) for i in out.tolist()]
            return out

        def watched_fire_each(event, ids, actor_ids):  # many slots, each moved by its own actor
            out = fire_each(event, ids, actor_ids)
            kind = LIFECYCLE.event(event).actor
            self.moves += [(event, int(i), Actor(kind, int(a)), NOBODY) for i, a in zip(out.tolist(), actor_ids)]
            return out

        def watched_alloc(n, owner):
            out = alloc(n, owner)
            if out is not None:
                self.moves += [(Event.ALLOC, int(i), owner, NOBODY) for i in out.tolist()]
            return out

        def watched_alloc_each(request_ids):  # one slot for each request, in one call
            out = alloc_each(request_ids)
            if out is not None:
                self.moves += [
                    (Event.ALLOC, int(i), Actor.request(int(r)), NOBODY) for i, r in zip(out.tolist(), request_ids)
                ]
            return out

        def watched_launch(done=None):
            self.moves.append("launch")
            return launch(done)

        pool.fire, pool.fire_each, pool.alloc, pool.launch = (
            watched_fire,
            watched_fire_each,
            watched_alloc,
            watched_launch,
        )
        pool.alloc_each = watched_alloc_each

    # -- the model follows ---------------------------------------------------------------------
    def catch_up(self) -> tuple:
        """Complete in the model every step the device has finished; their moves but fences."""
        made: tuple = ()
        while self.completed < self.sched.device.finished and self.world.steps:
            made += tuple(m for m in self._apply("complete", None).moves if m.event is not Event.FENCE)
            self.completed += 1
        return made

    def act(self, kind: str, who: int | None = None, slot: int | None = None) -> tuple:
        """Perform a model action (completing first every step the device has finished);
        return its slot moves other than fences."""
        self.fenced += self.catch_up()
        out = self._apply(kind, who, slot)
        if kind == "launch":
            self.launched += 1
        return tuple(m for m in out.moves if m.event is not Event.FENCE)

    def _apply(self, kind: str, who, slot: int | None = None):
        out = perform(self.world, self.policy, kind, who, self.overlap, slot)
        if out is None:
            on = "" if slot is None else f" slot {slot}"
            raise Divergence(f"the model cannot {kind}{'' if who is None else f'({who})'}{on}: not enabled")
        if out.error is not None:
            raise Divergence(f"the model refuses {kind}({who}): {out.error}")
        self.world = out.world
        return out

    def submit_started_turns(self) -> None:
        """A turn the runtime put in its queue is submitted in the model too."""
        for req in list(self.sched.requests.values()):
            rid = self.requests.get(req.rid)
            if rid is not None and req.session is not None and self.world.requests[rid].phase == PENDING:
                s = self.sched.sessions.get(req.session)
                if s is not None and s.turn == req.rid and req.phase is not Phase.DONE:
                    self.act("submit", rid)

    def follow(self) -> None:
        """Turn the runtime's moves of this operation into model actions, one by one; each
        action's moves must be the runtime's next ones."""
        todo, self.moves = self.moves, []
        while todo:
            head = todo.pop(0)
            if head == "launch":
                self.act("launch")
                continue
            event, slot, actor, target = head
            if event is Event.LOCK and todo and todo[0][:3] == (Event.UNLOCK, slot, actor):
                del todo[0]  # a match given back at once (no slot to copy into): no move at all
                continue
            if event is Event.UNLOCK and self._unlocked_at_fence(slot, actor):
                continue
            kind, who = _action_for(event, actor, target, self)
            if kind == "take" and self.world.requests[who].phase == PENDING:
                self.act("submit", who)
            on = self.slots.get(slot) if kind in ("match", "evict") else None
            made = self.act(kind, who, on)
            runtime = [head] + [m for m in todo[: len(made) - 1]]
            del todo[: len(made) - 1]
            self._same_moves(kind, who, runtime, made)

    def _unlocked_at_fence(self, slot: int, actor: Actor) -> bool:
        """Whether the runtime's UNLOCK of `slot` by `actor` is one the model made when it
        completed the copy's step (then it is followed, once)."""
        self.fenced += self.catch_up()
        want = (Event.UNLOCK, self.slots.get(slot), self.actor(actor))
        for k, m in enumerate(self.fenced):
            if (m.event, m.slot_id, m.actor) == want:
                self.fenced = self.fenced[:k] + self.fenced[k + 1 :]
                self.followed += 1
                self.events["UNLOCK"] = self.events.get("UNLOCK", 0) + 1
                return True
        return False

    def _same_moves(self, kind, who, runtime: list, made: tuple) -> None:
        if len(runtime) != len(made):
            raise Divergence(f"{kind}({who}): the runtime moved {_show(runtime)}, the model {_show_model(made)}")
        for (event, slot, actor, _), m in zip(runtime, made):
            if event is Event.ALLOC:
                self.slots[slot] = m.slot_id
            mapped = (
                Actor.cache(node_of(self.slots.get(slot, 0))) if actor.kind is ActorKind.CACHE else self.actor(actor)
            )
            if (event, self.slots.get(slot), mapped) != (m.event, m.slot_id, m.actor):
                raise Divergence(f"{kind}({who}): the runtime moved {_show(runtime)}, the model {_show_model(made)}")
            self.followed += 1
            self.events[event.name] = self.events.get(event.name, 0) + 1

    def actor(self, actor: Actor) -> Actor:
        if actor.kind is ActorKind.REQUEST:
            return Actor.request(self.requests.get(actor.id, -10 - actor.id))
        if actor.kind is ActorKind.SESSION:
            return Actor.session(self.sessions.get(actor.id, -10 - actor.id))
        return actor

    # -- the comparison ------------------------------------------------------------------------
    def agree(self) -> None:
        """Every runtime slot's record, mapped, is the model's record of its slot."""
        while self.completed < self.sched.device.finished and self.world.steps:
            self._apply("complete", None)
            self.completed += 1
        ledger, model = self.sched.pool.ledger, self.world.pool.slots
        held = 0
        for i in range(1, self.sched.pool.capacity + 1):
            rec = ledger.record(i)
            if rec.state is State.FREE or (rec.state is State.RELEASED and rec.fence <= ledger.completed):
                continue  # free, or free at the runtime's next fence (the model fences at once)
            held += 1
            j = self.slots.get(i)
            mine = None if j is None else model[j - 1]
            owner = self._owner(rec) if LIFECYCLE.spec(rec.state).owner is not ActorKind.CACHE else node_of(j or 0)
            borrower = NOBODY if rec.borrower == NOBODY else self.actor(Actor.request(rec.borrower)).id
            same = (rec.state, owner, borrower, rec.readers)
            if mine is None or (mine.state, mine.owner, mine.borrower, mine.readers) != same:
                raise Divergence(f"slot {i}: the runtime has {rec}, the model's slot {j} is {mine}")
        if held != sum(s.state is not State.FREE for s in model):
            raise Divergence(
                f"the runtime holds {held} slots, the model {sum(s.state is not State.FREE for s in model)}"
            )

    def _owner(self, rec) -> int:
        if rec.owner == NOBODY:
            return NOBODY
        kind = LIFECYCLE.spec(rec.state).owner
        return self.actor(Actor(kind, rec.owner)).id


def _action_for(event: Event, actor: Actor, target: int, pair: _Pair) -> tuple:
    """The model action that makes a runtime move of `event` by `actor`."""
    kind = {
        Event.ALLOC: "take", Event.ADMIT: "admit", Event.ROLLBACK: "rollback", Event.PARK: "finish",
        Event.FINISH: "finish", Event.RETRACT: "retract", Event.ABORT: "abort", Event.CLOSE: "close",
    }.get(event)  # fmt: skip
    if event is Event.LEND:  # the session lends: the turn borrowing it takes it
        return "take", pair.actor(Actor.request(target)).id
    if event is Event.LOCK:  # a match: its lock, then its fresh slot
        return "match", pair.actor(actor).id
    if event is Event.INSERT:
        return "donate", pair.actor(actor).id
    if event is Event.EVICT:
        return "evict", None
    if kind is None:
        raise Divergence(f"the runtime fired {event.name} by {actor}, which no model action fires")
    return kind, pair.actor(actor).id


def _initial_world(ops: tuple, slots: int, cache: bool = False) -> World:
    """The model's world for a workload: a request per submit, follow-up and turn (in order), a
    session per open; plain requests wait, turns are pending. With the cache: the lock record,
    and as many nodes as slots."""
    sessions, requests = [], []
    for op in ops:
        if op[0] == "open":
            sessions.append([])
        elif op[0] in ("submit", "follow", "group"):
            requests += [Request(len(requests) + i, None, WAITING) for i in range(_new_requests(op))]
        elif op[0] == "turn":
            sid = SESSION_BASE + op[1]
            sessions[op[1]].append(len(requests))
            requests.append(Request(len(requests), sid, PENDING))
    model_sessions = tuple(Session(SESSION_BASE + j, OPEN, turns=tuple(t)) for j, t in enumerate(sessions))
    return World(new_pool(slots, locks=cache), tuple(requests), model_sessions, 0, 0, (), slots if cache else 0)


def run_workload(
    ops: tuple, cfg: dict, scheduler_cls: type = Scheduler, policy: Policy | None = None, model=None
) -> _Pair:
    """Run `ops` on the runtime and the model side by side; raise `Divergence` at the first
    disagreement (its message names the operation)."""
    from slotwarden.verification.machines.shared import MODEL

    pair = _Pair(ops, cfg, scheduler_cls, Policy() if policy is None else policy, model or MODEL)
    made, opened = 0, 0
    for n, op in enumerate(ops):
        try:
            _run_op(pair, op, made, opened)
            made += _new_requests(op)
            if op[0] == "open":
                opened += 1
            pair.submit_started_turns()
            pair.agree()
        except Divergence as d:
            raise Divergence(
                f"after {n + 1} operations ({', '.join(map(_op, ops[: n + 1]))}) with {cfg}: {d}"
            ) from None
    return pair


def _run_op(pair: _Pair, op: tuple, made: int, opened: int) -> None:
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


def _ended_without_a_move(pair: _Pair) -> None:
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


def _show(moves: list) -> str:
    return "[" + ", ".join(f"{e.name} slot {s} by {a}" for e, s, a, _ in moves) + "]"


def _show_model(moves: tuple) -> str:
    return "[" + ", ".join(f"{m.event.name} slot {m.slot_id} by {m.actor}" for m in moves) + "]"
