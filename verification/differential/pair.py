"""The runtime's scheduler and the checker's model side by side (`Pair`), with the maps from
runtime ids to model ids. The runtime's pool is watched: every lifecycle move it makes and every
launch is turned into the model action that makes that move (`follow`: an ALLOC or a LEND is a
`take`, a PARK or a FINISH a `finish`, a match's LOCK and its fresh slot a `match`, an INSERT a
`donate`, an EVICT an `evict`), which must be enabled and make the same moves, slot by slot;
`agree` compares every slot's state, owner, borrower and lock count. The first disagreement
raises `Divergence`.
"""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.pool import new_pool
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, State
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.request import Phase
from slotwarden.verification.abstract.actions import perform
from slotwarden.verification.abstract.policy import Policy
from slotwarden.verification.abstract.world import (
    OPEN,
    PENDING,
    SESSION_BASE,
    WAITING,
    Request,
    Session,
    World,
    node_of,
)
from slotwarden.verification.differential.workloads import new_requests

SETTINGS = ("overlap", "token_budget", "chunk_size", "max_running", "retract_after", "prefix_cache", "pad_to_captured")


class Divergence(SlotwardenError, AssertionError):
    """The runtime made a move the model cannot follow, or their slots disagree."""


class Pair:
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
        self._condensed = 0  # the persistent batch's rows moved by condensing, at the last launch
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

        def watched_launch(done=None, **write_set):
            self.moves.append("launch")
            self._rows(write_set)
            return launch(done, **write_set)

        pool.fire, pool.fire_each, pool.alloc, pool.launch = (
            watched_fire,
            watched_fire_each,
            watched_alloc,
            watched_launch,
        )
        pool.alloc_each = watched_alloc_each

    def _rows(self, write_set: dict) -> None:
        """Count what the launched step's rows show: pad rows (and padding to a captured size),
        rows condensed since the step before, rows kept for a request whose token is in flight."""
        batch, step = self.sched.forward.batch, self.sched.forward.planned
        condensed = batch.condensed
        if step is not None and step.kind == "decode" and step.pads:
            self._count("pad rows")  # beside the request rows: padding, or rows kept for a token in flight
            if len(step.slots) > len(batch.entries):
                self._count("padded launch")  # pad rows past the persistent batch's rows
        if condensed > self._condensed:
            self._count("condensed rows")
        self._condensed = condensed
        if any(batch.entries[row][0].pending_outputs for row in batch.dark):
            self._count("in-flight row")

    def _count(self, name: str) -> None:
        self.events[name] = self.events.get(name, 0) + 1

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
            self._same_moves(kind, who, [head] + self._take(todo, made[1:]), made)

    def _take(self, todo: list, made: tuple) -> list:
        """The runtime's moves that make the rest of an action's `made`, each the first of
        `todo` that is that move: another action's may come between (one FINISH of several
        requests, then the CLOSE of a closed session's turn among them); where none is, the next."""
        out = []
        for m in made:
            want = (m.event, m.slot_id, m.actor)
            k = next((k for k, t in enumerate(todo) if t != "launch" and self._seen(*t[:3]) == want), 0)
            if todo:
                out.append(todo.pop(k))
        return out

    def _seen(self, event: Event, slot: int, actor: Actor) -> tuple:
        """A runtime move in the model's terms: (event, model slot, model actor)."""
        mapped = Actor.cache(node_of(self.slots.get(slot, 0))) if actor.kind is ActorKind.CACHE else self.actor(actor)
        return event, self.slots.get(slot), mapped

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
            if self._seen(event, slot, actor) != (m.event, m.slot_id, m.actor):
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


def _action_for(event: Event, actor: Actor, target: int, pair: Pair) -> tuple:
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
            requests += [Request(len(requests) + i, None, WAITING) for i in range(new_requests(op))]
        elif op[0] == "turn":
            sid = SESSION_BASE + op[1]
            sessions[op[1]].append(len(requests))
            requests.append(Request(len(requests), sid, PENDING))
    model_sessions = tuple(Session(SESSION_BASE + j, OPEN, turns=tuple(t)) for j, t in enumerate(sessions))
    return World(new_pool(slots, locks=cache), tuple(requests), model_sessions, 0, 0, (), slots if cache else 0)


def _show(moves: list) -> str:
    return "[" + ", ".join(f"{e.name} slot {s} by {a}" for e, s, a, _ in moves) + "]"


def _show_model(moves: tuple) -> str:
    return "[" + ", ".join(f"{m.event.name} slot {m.slot_id} by {m.actor}" for m in moves) + "]"
