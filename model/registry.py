"""Every safety property, registered once: its name, its words, what it judges, its predicate,
and the proofs and checks that establish it.

The CrossHair proofs (`slotwarden.model.proofs`), the exhaustive checker, the Hypothesis
machines, the declaration mutants, the generated docs and the verify report all read the
words and the predicates from here; nothing restates them. Kinds: `MOVE` (one move of one slot,
judged on before, event, actor, target, epoch, after), `SLOT` (one slot record), `POOL` (the
records of a pool and its free list), `WORLD` (a pool against who is alive and which slot each
believes it holds: the checker's worlds and the scheduler machine's audit), `STEP` (the rows of a
launched step against the pool's records: its write set).

    >>> PROPERTIES["authority"].kind.value
    'slot move'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable

from slotwarden.model.declaration import Lifecycle
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.properties import (
    authority,
    borrow_safe,
    commit_fenced,
    publishes_committed,
    reads_committed,
    rollback_restores,
    cache_read_only,
    evict_unlocked,
    lock_counted,
    locks_match,
    reads_published,
    conserved,
    exclusive,
    fence_respected,
    freed_once,
    handles_follow,
    handles_match,
    ids_in_pool,
    no_orphans,
    pads_to_pad,
    reads_filled,
    reads_held,
    writes_disjoint,
    writes_held,
    parks_what_ran,
    quiescent,
    release_waits,
    session_kept,
)
from slotwarden.model.vocabulary import Actor, Event, Slot


class Kind(Enum):
    MOVE = "slot move"
    SLOT = "slot"
    POOL = "pool"
    WORLD = "world"
    STEP = "launched step"


MoveJudge = Callable[[Slot, Event, Actor, int, int, Slot, Lifecycle], bool]


@dataclass(frozen=True)
class Property:
    """One safety property. `predicate` is the function in `slotwarden.model.properties`
    (None for the two the checker judges itself: `legal`, `deadlock`, and `in_flight_not_free`,
    which needs the checker's steps); `on_move` judges one move with the predicate, whatever
    its own signature (MOVE properties only). `proofs` name entries of
    `slotwarden.model.proofs.PROOFS`; `checks` name the other stages that judge it."""

    name: str
    number: int  # which of the numbered safety rules it belongs to
    text: str
    kind: Kind
    predicate: Callable | None
    proofs: tuple = ()
    checks: tuple = ()
    on_move: MoveJudge | None = None

    def words(self) -> str:
        return f"{self.number}. {self.text}"


CHECKER, MACHINES, MUTANTS = "exhaustive checker", "Hypothesis machines", "declaration mutants"
LAUNCH = "the launch check (`runtime/launch.py`, against the model's in tests/runtime/launch)"

_ALL = (
    Property(
        "session_kept",
        1,
        "only the owning session's close moves a session-owned slot out of its session",
        Kind.MOVE,
        session_kept,
        ("session_kept",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: session_kept(b, e, a, x, L),
    ),
    Property(
        "freed_once",
        2,
        "no slot is freed twice; only real slot ids are ever freed",
        Kind.MOVE,
        freed_once,
        ("freed_once",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: freed_once(b, e, x, L),
    ),
    Property(
        "conserved",
        3,
        "free list + owned + released = capacity, counted from the free list and the records; "
        "the free list is exactly the FREE set, no duplicates",
        Kind.POOL,
        conserved,
        ("conserved",),
        (CHECKER, MACHINES, MUTANTS),
    ),
    Property(
        "fence_respected",
        4,
        "a released slot becomes FREE only at the fence of the step it waits for; "
        "a slot a step in flight may use (the running batch's, a window being verified) is never freed at once",
        Kind.MOVE,
        fence_respected,
        ("fence_respected",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: fence_respected(b, a, x),
    ),
    Property(
        "release_waits",
        4,
        "a slot released while a step is in flight waits for that step's fence",
        Kind.MOVE,
        release_waits,
        ("release_waits",),
        (MUTANTS,),
        lambda b, e, a, t, ep, x, L: release_waits(b, x, ep, L),
    ),
    Property(
        "in_flight_not_free",
        4,
        "no slot used by a step in flight is FREE (or freed and taken again)",
        Kind.WORLD,
        None,
        (),
        (CHECKER,),
    ),
    Property(
        "exclusive",
        5,
        "every held slot has exactly one owner (and a borrower exactly when lent); "
        "a free or released slot names nobody",
        Kind.SLOT,
        exclusive,
        ("exclusive",),
        (CHECKER, MACHINES, MUTANTS),
    ),
    Property(
        "handles_follow",
        5,
        "whoever a move takes a slot from keeps no handle: the record names only "
        "the holder it had, the actor that took it or the party it was handed to, of the right kind",
        Kind.MOVE,
        handles_follow,
        ("handles_follow",),
        (MUTANTS,),
        lambda b, e, a, t, ep, x, L: handles_follow(b, e, a, t, x, L),
    ),
    Property(
        "handles_match",
        5,
        "every request's and session's handle is exactly what it holds: no stale handle",
        Kind.WORLD,
        handles_match,
        (),
        (CHECKER, MACHINES),
    ),
    Property(
        "no_orphans",
        6,
        "every held slot's owner and borrower is still alive: nothing leaks past its holder",
        Kind.WORLD,
        no_orphans,
        (),
        (CHECKER,),
    ),
    Property(
        "quiescent",
        6,
        "with every request done, every session closed and after the fence, every slot is FREE",
        Kind.POOL,
        quiescent,
        ("quiescent",),
        (CHECKER, MACHINES, MUTANTS),
    ),
    Property(
        "authority",
        8,
        "only a held slot's owner, or the request it is lent to, moves it; only the owning "
        "session lends, and only to a request",
        Kind.MOVE,
        authority,
        ("authority",),
        (MUTANTS,),
        lambda b, e, a, t, ep, x, L: authority(b, e, a, t, x, L),
    ),
    Property(
        "borrow_safe",
        9,
        "a lent slot leaves its session only after the request it is lent to has given it back",
        Kind.MOVE,
        borrow_safe,
        ("borrow_safe",),
        (MUTANTS,),
        lambda b, e, a, t, ep, x, L: borrow_safe(b, a, x, L),
    ),
    Property(
        "parks_what_ran",
        10,
        "a session or the prefix cache takes over only a slot of the running batch: it keeps a state a step computed",
        Kind.MOVE,
        parks_what_ran,
        ("parks_what_ran",),
        (MUTANTS,),
        lambda b, e, a, t, ep, x, L: parks_what_ran(b, x, L),
    ),
    Property(
        "cache_read_only",
        11,
        "a cached slot is never written by a request: a request only locks or unlocks it",
        Kind.MOVE,
        cache_read_only,
        ("cache_read_only",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: cache_read_only(b, a, x, L),
    ),
    Property(
        "evict_unlocked",
        12,
        "a cached slot is evicted only while unlocked (no reader, no copy in flight), "
        "and only to be released, free at the fence",
        Kind.MOVE,
        evict_unlocked,
        ("evict_unlocked",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: evict_unlocked(b, x, ep, L),
    ),
    Property(
        "lock_counted",
        13,
        "the lock count never goes negative; it moves by one, up by a lock, down by an unlock",
        Kind.MOVE,
        lock_counted,
        ("lock_counted",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: lock_counted(b, e, x, L),
    ),
    Property(
        "reads_published",
        14,
        "no request reads unpublished state: a lock needs a published slot, and a slot "
        "is published only at the fence of the step that wrote it (an aborted write is never read)",
        Kind.MOVE,
        reads_published,
        ("reads_published",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: reads_published(b, a, x, L),
    ),
    Property(
        "locks_match",
        13,
        "every cached slot's lock count is the number of live requests holding a lock on it: "
        "every unlock matches a lock by the same request",
        Kind.WORLD,
        locks_match,
        (),
        (CHECKER, MACHINES),
    ),
    Property(
        "writes_held",
        15,
        "every slot a request's batch row writes is one the request holds: it owns it, or it is lent to it",
        Kind.STEP,
        writes_held,
        ("writes_held",),
        (LAUNCH, CHECKER),
    ),
    Property(
        "writes_disjoint",
        15,
        "no slot but the pad slot is written by two rows of one step",
        Kind.STEP,
        writes_disjoint,
        ("writes_disjoint",),
        (LAUNCH, CHECKER),
    ),
    Property(
        "pads_to_pad",
        15,
        "a padding row reads and writes only the pad slot",
        Kind.STEP,
        pads_to_pad,
        ("pads_to_pad",),
        (LAUNCH, CHECKER),
    ),
    Property(
        "ids_in_pool",
        15,
        "every id a step addresses is the pad slot or a real slot: never -1, never one past the pool",
        Kind.STEP,
        ids_in_pool,
        ("ids_in_pool",),
        (LAUNCH, CHECKER),
    ),
    Property(
        "reads_held",
        15,
        "every slot a request's row reads is one it holds, or a published cached slot it holds a lock on",
        Kind.STEP,
        reads_held,
        ("reads_held",),
        (LAUNCH, CHECKER),
    ),
    Property(
        "reads_filled",
        15,
        "no row reads a previous tenant's state: a slot is read only once zeroed, copied into or "
        "written by a step since it was taken",
        Kind.STEP,
        reads_filled,
        ("reads_filled",),
        (LAUNCH, CHECKER),
    ),
    Property(
        "publishes_committed",
        16,
        "only committed state is published to the prefix cache, parked with a session or shared: "
        "a speculative window's slot leaves the window only to go back",
        Kind.MOVE,
        publishes_committed,
        ("publishes_committed",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: publishes_committed(b, x),
    ),
    Property(
        "commit_fenced",
        16,
        "the accepted count is read only after the fence of the step that produced it: a window "
        "slot is verified at that fence and committed only once verified",
        Kind.MOVE,
        commit_fenced,
        ("commit_fenced",),
        (CHECKER, MUTANTS),
        lambda b, e, a, t, ep, x, L: commit_fenced(b, e, a, x),
    ),
    Property(
        "reads_committed",
        16,
        "the next step reads only committed state: no row addresses a window slot a verify wrote",
        Kind.STEP,
        reads_committed,
        ("reads_committed",),
        (LAUNCH, CHECKER),
    ),
    Property(
        "rollback_restores",
        16,
        "a verify step writes only its window, never the committed slot: a rollback restores the "
        "committed state by keeping it, and never succeeds without it",
        Kind.STEP,
        rollback_restores,
        (),
        (CHECKER,),
    ),
    Property(
        "reads_current",
        16,
        "no request runs on a committed slot behind its tokens: a commit copies the accepted state "
        "into the committed slot before the request's next step",
        Kind.WORLD,
        None,
        (),
        (CHECKER,),
    ),
    Property(
        "legal",
        0,
        "the declared lifecycle allows every move the scheduler makes (IllegalMove / BadSlotId)",
        Kind.WORLD,
        None,
        (),
        (CHECKER, MUTANTS),
    ),
    Property(
        "deadlock",
        0,
        "every non-final state has an enabled action",
        Kind.WORLD,
        None,
        (),
        (CHECKER,),
    ),
)

PROPERTIES: dict[str, Property] = {p.name: p for p in _ALL}
"""Every property by name, in the order of the numbered rules."""

MOVE_PROPERTIES = tuple(p for p in _ALL if p.kind is Kind.MOVE)


def text(name: str) -> str:
    """The property `name` in words, numbered ("1. only the owning session's close ...");
    rules outside the numbered list (`legal`, `deadlock`) have no number."""
    p = PROPERTIES[name]
    return p.words() if p.number else p.text


def texts(names=None) -> dict:
    """{name: words} for the properties named (default: every one with a predicate)."""
    chosen = names if names is not None else [p.name for p in _ALL if p.predicate is not None]
    return {n: text(n) for n in chosen}


def move_faults(
    before: Slot, event: Event, actor: Actor, target: int, epoch: int, after: Slot, lifecycle: Lifecycle = LIFECYCLE
) -> tuple:
    """The names of the MOVE properties one move breaks (and `exclusive` of the record after)."""
    bad = [p.name for p in MOVE_PROPERTIES if not p.on_move(before, event, actor, target, epoch, after, lifecycle)]
    if not exclusive(after, lifecycle):
        bad.append("exclusive")
    return tuple(bad)


def proved_by(proof: str) -> tuple:
    """The properties a proof of `slotwarden.model.proofs.PROOFS` establishes."""
    return tuple(p.name for p in _ALL if proof in p.proofs)
