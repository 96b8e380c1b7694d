"""The properties the checker judges in the abstract scheduler: the state properties of a world
(`judge_world`), the per-transition properties of a slot move (`judge_move`) and the write-set
properties of a launched step's rows (`judge_launch`: the model's `check_step`, and the step
properties it proves), each the model's own predicate (`slotwarden.model.properties`), memoised
on exactly what it reads. A judge returns the first property broken, as (name, message), or None."""

from __future__ import annotations

from slotwarden.model.errors import IllegalStep
from slotwarden.model.launch import check_step
from slotwarden.model.pool import Pool
from slotwarden.model.write_set import RowKind
from slotwarden.model.properties import (
    cache_read_only,
    commit_fenced,
    publishes_committed,
    conserved,
    exclusive,
    fence_respected,
    freed_once,
    handles_match,
    ids_in_pool,
    lock_counted,
    locks_match,
    no_orphans,
    pads_to_pad,
    quiescent,
    reads_committed,
    reads_filled,
    reads_held,
    reads_published,
    rollback_restores,
    session_kept,
    writes_disjoint,
    writes_held,
)
from slotwarden.model.registry import text, texts
from slotwarden.model.vocabulary import Actor, State

from slotwarden.verification.abstract.actions import Move
from slotwarden.verification.abstract.memo import _FORGETTERS
from slotwarden.verification.abstract.words import show_handles, show_slot, show_slots
from slotwarden.verification.abstract.rows import lock_holders
from slotwarden.verification.abstract.world import CLOSED, DONE, RUNNING, World, is_final, window_of

STATE_PROPERTIES = texts(
    (
        "conserved",
        "exclusive",
        "no_orphans",
        "handles_match",
        "in_flight_not_free",
        "evict_unlocked",
        "reads_published",
        "locks_match",
        "quiescent",
        "reads_current",
    )
)
MOVE_PROPERTIES = texts(
    (
        "legal",
        "session_kept",
        "freed_once",
        "fence_respected",
        "cache_read_only",
        "lock_counted",
        "reads_published",
        "publishes_committed",
        "commit_fenced",
    )
)
RUN_PROPERTIES = {"deadlock": text("deadlock")}  # judged over the search (rule coverage and goals: checker.coverage)
STEP_PROPERTIES = texts(
    (
        "pads_to_pad",
        "ids_in_pool",
        "writes_held",
        "writes_disjoint",
        "reads_held",
        "reads_filled",
        "reads_committed",
        "rollback_restores",
    )
)
"""The write-set properties judged on the rows of every launch (`judge_launch`), in the order named."""
PROPERTIES = {**STATE_PROPERTIES, **MOVE_PROPERTIES, **RUN_PROPERTIES, **STEP_PROPERTIES}
"""The properties the checker judges, in the registry's words (`slotwarden.model.registry`)."""


def _handles(world: World) -> dict:
    found = {}
    for r in world.requests:
        found[Actor.request(r.id)] = (() if r.handle is None else (r.handle,)) + window_of(world, r.id)
    for s in world.sessions:
        found[Actor.session(s.id)] = () if s.handle is None else (s.handle,)
    return found


def judge_world(world: World) -> tuple[str, str] | None:
    """The first state property `world` breaks, as (name, message), or None."""
    slots = world.pool.slots
    found = _judge_pool(world.pool) or _judge_holders(world)
    if found:
        return found
    for st in world.steps:
        for i in sorted(st.slots):
            if slots[i - 1].state in _NOT_UNDER_A_STEP:
                return "in_flight_not_free", (
                    f"slot {i} is {show_slot(slots[i - 1])} while a step in flight still uses it "
                    f"(in flight: {len(world.steps)})"
                )
    if world.pool.locks is not None:
        found = _judge_cache(world)
        if found:
            return found
    if is_final(world) and not quiescent(slots):
        return "quiescent", f"everything done and fenced, yet slots {show_slots(slots)}"
    return None


def _judge_pool(pool: Pool) -> tuple[str, str] | None:
    """Conservation and exclusive ownership: properties of the pool alone (memoised)."""
    try:
        return _POOL_VERDICTS[pool]
    except KeyError:
        pass
    slots, free, found = pool.slots, pool.free, None
    if not conserved(slots, free):
        found = "conserved", f"slots {show_slots(slots)} with free list {free}"
    else:
        for i, s in enumerate(slots):
            if not exclusive(s):
                found = "exclusive", f"slot {i + 1} is {show_slot(s)}"
                break
    _POOL_VERDICTS[pool] = found
    return found


def _judge_holders(world: World) -> tuple[str, str] | None:
    """No orphans and matching handles: the pool against who is alive and what each holds
    (memoised on exactly those)."""
    slots = world.pool.slots
    key = (
        slots,
        tuple(r.handle if r.phase != DONE else -2 - (r.handle or 0) for r in world.requests),
        tuple(s.handle if s.status != CLOSED else -2 - (s.handle or 0) for s in world.sessions),
        world.windows,
    )
    try:
        return _HOLDER_VERDICTS[key]
    except KeyError:
        pass
    found = None
    live_r = [r.id for r in world.requests if r.phase != DONE]
    live_s = [s.id for s in world.sessions if s.status != CLOSED]
    handles = _handles(world)
    if not no_orphans(slots, live_r, live_s):
        found = "no_orphans", f"slots {show_slots(slots)}; live requests {live_r}, live sessions {live_s}"
    elif not handles_match(slots, handles):
        found = "handles_match", f"slots {show_slots(slots)}; handles {show_handles(handles)}"
    _HOLDER_VERDICTS[key] = found
    return found


def _judge_cache(world: World) -> tuple[str, str] | None:
    """The prefix cache against the steps in flight and the requests: every copy in flight
    holds its lock on its source (so the source cannot be evicted under it); no slot a step in
    flight writes is published; every lock the pool counts is held by a live match or a copy
    in flight, and nothing else."""
    slots, locks = world.pool.slots, world.pool.locks
    for st in world.steps:
        for rid, i in sorted(st.copies):
            if (rid, i) not in locks:
                return "evict_unlocked", (
                    f"r{rid}'s copy from slot {i} is in flight, yet it holds no lock on it "
                    f"({show_slot(slots[i - 1])}): the cache may evict it under the copy"
                )
        for i in sorted(st.slots):
            if slots[i - 1].state is State.CACHED:
                return "reads_published", (
                    f"slot {i} is {show_slot(slots[i - 1])}, matchable while a step in flight still writes it"
                )
    held: dict = {}
    for r in world.requests:
        if r.src is not None:
            held.setdefault(r.id, []).append(r.src)
    for st in world.steps:
        for rid, i in st.copies:
            held.setdefault(rid, []).append(i)
    if not locks_match(slots, held) or sorted(locks) != sorted((rid, i) for rid, ids in held.items() for i in ids):
        return (
            "locks_match",
            f"slots {show_slots(slots)}; locks recorded {list(locks)}; held by matches and copies {held}",
        )
    return None


_NOT_UNDER_A_STEP = (State.FREE, State.TAKEN)  # TAKEN: freed under the step and taken again
_POOL_VERDICTS: dict = {}
_HOLDER_VERDICTS: dict = {}


def judge_move(move: Move) -> tuple[str, str] | None:
    """The first per-transition property `move` breaks, as (name, message), or None."""
    try:
        return _MOVE_VERDICTS[move]
    except KeyError:
        pass
    b, e, a, x = move.before, move.event, move.actor, move.after
    found = None
    for name, holds in (
        ("session_kept", lambda: session_kept(b, e, a, x)),
        ("freed_once", lambda: freed_once(b, e, x)),
        ("fence_respected", lambda: fence_respected(b, a, x)),
        ("cache_read_only", lambda: cache_read_only(b, a, x)),
        ("lock_counted", lambda: lock_counted(b, e, x)),
        ("reads_published", lambda: reads_published(b, a, x)),
        ("publishes_committed", lambda: publishes_committed(b, x)),
        ("commit_fenced", lambda: commit_fenced(b, e, a, x)),
    ):
        if not holds():
            found = name, f"{e.name} by {a} on slot {move.slot_id}: {show_slot(b)} -> {show_slot(x)}"
            break
    _MOVE_VERDICTS[move] = found
    return found


_MOVE_VERDICTS: dict = {}  # moves repeat across worlds: judge each distinct one once


def show_rows(rows: tuple) -> str:
    """A step's rows: `r<id>:<write>` (`<-<source>` when it reads another slot), `pad:<write>`."""
    return "[" + ", ".join(_show_row(r) for r in rows) + "]"


def _show_row(r) -> str:
    text = f"r{r.actor}:{r.write}" if r.kind is RowKind.REQUEST else f"pad:{r.write}"
    return text if r.source == r.write else f"{text}<-{r.source}"


def launched(world: World, policy) -> list:
    """The requests a step launched in `world` runs (a request whose window awaits its commit
    does not run: `Policy.runs_in_step`)."""
    if world.windows:
        return [r for r in world.requests if r.phase == RUNNING and policy.runs_in_step(world, r)]
    return [r for r in world.requests if r.phase == RUNNING]


def launch_rows(world: World, policy) -> tuple:
    """The rows `policy` builds for a step launched in `world` (its running requests)."""
    return tuple(policy.step_rows(world, launched(world, policy)))


def judge_launch(world: World, policy) -> tuple[str, str] | None:
    """The first write-set property broken by the step `policy` launches in `world`, judged
    against the world's slot records, fills and locks, as (name, message), or None. A step the
    model's check refuses names the first of `STEP_PROPERTIES` its rows break ("legal" if
    none: the check refused what no property names); an accepted step that breaks one names it."""
    running = launched(world, policy)
    if not running:
        return None
    late = [r.id for r in running if r.id in world.behind]
    if late:
        return "reads_current", f"r{late[0]} runs a step on its committed slot before its verified state is copied in"
    rows = tuple(policy.step_rows(world, running))
    key = (rows, world.pool.slots, tuple(policy.fills(world)), world.pool.locks)
    try:
        return _STEP_VERDICTS[key]
    except KeyError:
        pass
    _STEP_VERDICTS[key] = found = _judge_step(*key)
    return found


def _judge_step(rows: tuple, slots: tuple, fills: tuple, locks) -> tuple[str, str] | None:
    holders = lock_holders(locks)
    holds = {
        "pads_to_pad": lambda: pads_to_pad(rows),
        "ids_in_pool": lambda: ids_in_pool(rows, len(slots)),
        "writes_held": lambda: writes_held(rows, slots),
        "writes_disjoint": lambda: writes_disjoint(rows),
        "reads_held": lambda: reads_held(rows, slots, holders),
        "reads_filled": lambda: reads_filled(rows, fills),
        "reads_committed": lambda: reads_committed(rows, slots),
        "rollback_restores": lambda: rollback_restores(rows, slots),
    }
    broken = next((name for name in STEP_PROPERTIES if not holds[name]()), None)
    try:
        check_step(rows, slots, fills, holders)
    except IllegalStep as e:
        return broken or "legal", f"the launch check refuses rows {show_rows(rows)}: {e}"
    if broken is not None:
        return broken, f"rows {show_rows(rows)} over slots {show_slots(slots)}, accepted by the launch check"
    return None


_STEP_VERDICTS: dict = {}  # (rows, slots, fills, locks) -> verdict
_FORGETTERS.extend((_POOL_VERDICTS.clear, _HOLDER_VERDICTS.clear, _MOVE_VERDICTS.clear, _STEP_VERDICTS.clear))
