"""What a run of the checker must reach: the `sometimes` goals (`GOALS`: rare situations the
state space must contain, each a predicate on a transition), the declared rules no action of the
abstract scheduler fires (`UNREACHABLE`, each with its reason), and `coverage`, which fails a
run unless every other rule fired and every goal was reached: a state space that never reaches
a rule proves nothing about it."""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

from slotwarden.model.declaration import Lifecycle
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import MAX_READERS, Event, Relation, State
from slotwarden.verification.abstract import CLOSING, RUNNING, Outcome, World
from slotwarden.verification.abstract.rows import padded


class Goal(NamedTuple):
    """A `sometimes` goal: some transition (the world before, the outcome) must satisfy it.
    `cache`: it speaks of the prefix cache's slots, so only bounds with cache nodes can reach
    it (the others never judge it). `kinds`, `events`: what `reached` itself requires, read
    first by the search (`may_reach`): the action's kind is one of `kinds`, one of the moves
    carries one of `events` (empty: no such requirement)."""

    name: str
    text: str
    reached: Callable[[World, Outcome], bool]
    cache: bool = False
    kinds: frozenset = frozenset()
    events: frozenset = frozenset()


def may_reach(goal: Goal, out: Outcome, events: frozenset) -> bool:
    """Whether `out` (its moves' `events`) meets what `goal.reached` requires of the action's
    kind and moves' events: a goal is judged only on the transitions that may reach it."""
    return (not goal.kinds or out.action.kind in goal.kinds) and (not goal.events or not events.isdisjoint(goal.events))


def _lent_rolled_back(world: World, out: Outcome) -> bool:
    return any(m.event is Event.ROLLBACK and m.before.state is State.LENT for m in out.moves)


def _release_waits_under_a_step(world: World, out: Outcome) -> bool:
    nxt = out.world
    return bool(nxt.steps) and any(s.state is State.RELEASED and s.fence > 0 for s in nxt.pool.slots)


def _lent_retracted(world: World, out: Outcome) -> bool:
    return any(m.event is Event.RETRACT and m.before.state is State.LENT_RUNNING for m in out.moves)


def _close_deferred(world: World, out: Outcome) -> bool:
    return out.action.kind == "close" and any(s.status == CLOSING for s in out.world.sessions)


def _deferred_close_runs(world: World, out: Outcome) -> bool:
    return out.action.kind != "close" and any(m.event is Event.CLOSE for m in out.moves)


def _two_readers(world: World, out: Outcome) -> bool:
    return any(s.state is State.CACHED and s.readers >= 2 for s in out.world.pool.slots)


def _evicted_under_pressure(world: World, out: Outcome) -> bool:
    return not world.pool.free and any(m.event is Event.EVICT and m.before.state is State.CACHED for m in out.moves)


def _published_at_fence(world: World, out: Outcome) -> bool:
    return any(m.event is Event.FENCE and m.after.state is State.CACHED for m in out.moves)


def _copy_source_locked(world: World, out: Outcome) -> bool:
    slots = out.world.pool.slots
    return any(slots[i - 1].readers > 0 for st in out.world.steps for _, i in st.copies)


def _aborted_write_dropped(world: World, out: Outcome) -> bool:
    return any(m.event is Event.EVICT and m.before.state is State.CACHING for m in out.moves)


def _padded_launch(world: World, out: Outcome) -> bool:
    n = sum(r.phase == RUNNING for r in world.requests)
    return out.action.kind == "launch" and padded(n, len(world.requests)) > n


def _rows_condensed(world: World, out: Outcome) -> bool:
    if out.action.kind != "launch" or not world.steps:
        return False
    held = {r.handle for r in world.requests if r.phase == RUNNING}
    return bool(world.steps[-1].slots - held) and len(held) > 1


GOALS = (
    Goal(
        "lent_rolled_back",
        "a lent slot is rolled back to its session",
        _lent_rolled_back,
        events=frozenset({Event.ROLLBACK}),
    ),
    Goal(
        "lent_retracted",
        "a running session turn is retracted: its lent slot goes back to its session",
        _lent_retracted,
        events=frozenset({Event.RETRACT}),
    ),
    Goal(
        "release_waits_for_fence",
        "a released slot waits for the fence of a step in flight",
        _release_waits_under_a_step,
    ),
    Goal(
        "close_deferred",
        "a session is closed while its turn is in flight: the close is deferred",
        _close_deferred,
        kinds=frozenset({"close"}),
    ),
    Goal(
        "deferred_close_runs",
        "a deferred close releases the session's slot when its turn ends",
        _deferred_close_runs,
        events=frozenset({Event.CLOSE}),
    ),
    Goal(
        "padded_launch",
        "a launched step is padded to a captured size: its pad rows on the pad slot",
        _padded_launch,
        kinds=frozenset({"launch"}),
    ),
    Goal(
        "rows_condensed",
        "a step is launched over rows closed up since the step still in flight: a request of it left the batch",
        _rows_condensed,
        kinds=frozenset({"launch"}),
    ),
    Goal("two_readers", "a cached slot is locked by two readers at once", _two_readers, cache=True),
    Goal(
        "evicted_under_pressure",
        "the cache evicts a published node while no slot is free",
        _evicted_under_pressure,
        cache=True,
        events=frozenset({Event.EVICT}),
    ),
    Goal(
        "published_at_fence",
        "a donated slot is published at the fence of the step that wrote it",
        _published_at_fence,
        cache=True,
        events=frozenset({Event.FENCE}),
    ),
    Goal(
        "copy_source_locked",
        "a copy-on-write's source stays locked while the step performing the copy is in flight",
        _copy_source_locked,
        cache=True,
    ),
    Goal(
        "aborted_write_dropped",
        "a donated slot whose write was never fenced is dropped unread",
        _aborted_write_dropped,
        cache=True,
        events=frozenset({Event.EVICT}),
    ),
)

UNREACHABLE = {  # (source, event, relation) -> why no action of the abstract scheduler fires it
    (State.CACHED, Event.UNLOCK, Relation.FULL): (
        f"an unlock at the lock bound needs {MAX_READERS} readers of one slot, and the checker's worlds hold "
        "a few requests; the one-move proofs (lock_counted, locks_match) judge it"
    ),
}


class Coverage(NamedTuple):
    """Rules and goals over a run: what was never reached, and what was listed unreachable but fired."""

    missed_rules: tuple  # tuple[str, ...]: rules no bounds fired, not listed in UNREACHABLE
    stale_unreachable: tuple  # rules listed in UNREACHABLE that fired after all
    missed_goals: tuple  # names of the GOALS no bounds reached
    fired: int  # how many declared rules fired
    declared: int

    @property
    def ok(self) -> bool:
        return not (self.missed_rules or self.stale_unreachable or self.missed_goals)

    def __str__(self) -> str:
        text = f"{self.fired}/{self.declared} rules fired, {len(UNREACHABLE)} listed unreachable; "
        text += f"{len(GOALS) - len(self.missed_goals)}/{len(GOALS)} goals reached"
        if self.missed_rules:
            text += "; never fired: " + ", ".join(self.missed_rules)
        if self.stale_unreachable:
            text += "; listed unreachable but fired: " + ", ".join(self.stale_unreachable)
        if self.missed_goals:
            text += "; goals never reached: " + ", ".join(self.missed_goals)
        return text


def coverage(results: Iterable, lifecycle: Lifecycle = LIFECYCLE, unreachable: dict = UNREACHABLE) -> Coverage:
    """Judge the rules fired and goals reached over `results` (the `CheckResult`s of one run's bounds)."""
    results = list(results)
    fired = frozenset().union(*(r.rules for r in results))
    reached = frozenset().union(*(r.goals for r in results))
    keys = [(r.source, r.event, r.by) for r in lifecycle.rules]
    missed = tuple(show_rule(k) for k in keys if k not in fired and k not in unreachable)
    stale = tuple(show_rule(k) for k in unreachable if k in fired)
    goals = tuple(g.name for g in GOALS if g.name not in reached)
    return Coverage(missed, stale, goals, sum(k in fired for k in keys), len(keys))


def show_rule(k: tuple) -> str:
    return f"{k[0].name} --{k[1].name} [{k[2].name}]"
