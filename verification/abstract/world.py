"""The abstract scheduler's world: requests, streaming sessions and steps in flight over the
model pool. Worlds are immutable and hashable.

The workload is fixed by `Bounds`: all requests but the last are session turns, dealt session
by session, at most `turns` per session (3 requests, 1 session: s100 = (r0, r1), r2 plain; 4
requests, 2 sessions: s100 = (r0, r1), s101 = (r2,), r3 plain; a session left without turns
only opens and closes). Plain requests start WAITING; a session's turns start PENDING and are
submitted in order, one in flight at a time, while the session is OPEN. Request ids count from
0 and session ids from `SESSION_BASE`, so an id of one kind used where the other belongs never
names a live actor. With `nodes` > 0 the scheduler runs a prefix cache of at most `nodes`
nodes, each holding one slot and named by it (`NODE_BASE` + slot id): the tree's shape is
abstracted away, so every request may match every published node, which over-approximates any
real tree. With `nodes` = 0 nothing touches the cache.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.pool import Pool, new_pool
from slotwarden.model.vocabulary import ActorKind

# -- phases of a request, statuses of a session (plain ints: cheap to hash) --------------------
PENDING, WAITING, CANDIDATE, RUNNING, DONE = range(5)
PHASES = ("PENDING", "WAITING", "CANDIDATE", "RUNNING", "DONE")
OPEN, CLOSING, CLOSED = range(3)
STATUSES = ("OPEN", "CLOSING", "CLOSED")

SESSION_BASE = 100
"""The first session id. Request ids are 0 .. requests - 1 (fewer than `SESSION_BASE`)."""

NODE_BASE = 200
"""Cache node ids are `NODE_BASE` + the id of the slot the node holds: never a request's or a
session's id, and never renamed (slot ids are not names)."""


def node_of(slot_id: int) -> int:
    """The id of the cache node that holds (or will hold) slot `slot_id`."""
    return NODE_BASE + slot_id


class Bounds(NamedTuple):
    """The size of the world: slots in the pool, requests, sessions, and overlap on or off."""

    slots: int
    requests: int
    sessions: int
    overlap: bool = False
    turns: int = 2  # at most this many turns per session
    nodes: int = 0  # at most this many cache nodes (slots owned by the prefix cache); 0: no cache
    drafts: int = 0  # speculative decoding: a window holds this many drafts (drafts + 1 slots); 0: off

    def assignment(self) -> tuple:
        """The session id of each request (None: plain), as the module docstring says."""
        if self.requests >= SESSION_BASE:
            raise ValueError(f"at most {SESSION_BASE - 1} requests: session ids start at {SESSION_BASE}")
        n_turns = min(max(self.requests - 1, 0), self.sessions * self.turns)
        return tuple(SESSION_BASE + i // self.turns if i < n_turns else None for i in range(self.requests))

    def __str__(self) -> str:
        text = (
            f"slots={self.slots} requests={self.requests} sessions={self.sessions} "
            f"overlap={'on' if self.overlap else 'off'}"
        )
        text = text if self.turns == 2 else text + f" turns={self.turns}"
        text = text if not self.nodes else text + f" nodes={self.nodes}"
        return text if not self.drafts else text + f" drafts={self.drafts}"


class Request(NamedTuple):
    id: int
    session: int | None  # the session id it is a turn of; None: a plain request
    phase: int  # PENDING, WAITING, CANDIDATE, RUNNING, DONE
    handle: int | None = None  # the slot id it believes it holds
    lent: bool = False  # its slot is borrowed from its session
    ran: bool = False  # it has been in a completed step (it may finish)
    src: int | None = None  # the cached slot it locked to copy from, until its copy step is launched


class Session(NamedTuple):
    id: int
    status: int  # OPEN, CLOSING (close requested while a turn is in flight), CLOSED
    handle: int | None = None  # the slot id it owns
    turn: int | None = None  # the request id of its turn in flight
    turns: tuple = ()  # its requests, in submission order (fixed by the bounds)


class Step(NamedTuple):
    """A step launched on the device and not yet completed."""

    epoch: int
    slots: frozenset  # the slot ids it reads and writes
    requests: frozenset  # the still-running requests whose run it advances
    copies: frozenset = frozenset()  # (request id, cached slot id): copies it performs; unlocked at its fence


class World(NamedTuple):
    pool: Pool
    requests: tuple  # tuple[Request, ...], indexed by id
    sessions: tuple  # tuple[Session, ...], indexed by id - SESSION_BASE
    launched: int  # the newest launched step (relative to `completed`)
    completed: int  # the newest completed step (always 0 once normalised)
    steps: tuple  # tuple[Step, ...], oldest first: launched, not completed
    nodes: int = 0  # the bound on cache nodes (`Bounds.nodes`), fixed for a run
    drafts: int = 0  # the drafts of a speculative window (`Bounds.drafts`), fixed for a run
    windows: frozenset = frozenset()  # (request id, slot id): the window slots each request believes it holds
    behind: frozenset = frozenset()  # request ids whose verified state is not yet copied into their committed slot


def session_of(world: World, sid: int) -> Session:
    """The session with id `sid`."""
    return world.sessions[sid - SESSION_BASE]


def window_of(world: World, rid: int) -> tuple:
    """The window slots request `rid` believes it holds, in id order."""
    return tuple(sorted(i for r, i in world.windows if r == rid)) if world.windows else ()


def cached_ids(world: World) -> tuple:
    """The ids of the slots the prefix cache owns (CACHING or CACHED), in id order."""
    return tuple(i + 1 for i, s in enumerate(world.pool.slots) if LIFECYCLE.spec(s.state).owner is ActorKind.CACHE)


def initial(bounds: Bounds) -> World:
    owners = bounds.assignment()
    requests = tuple(Request(i, s, WAITING if s is None else PENDING) for i, s in enumerate(owners))
    sessions = tuple(
        Session(SESSION_BASE + j, OPEN, turns=tuple(i for i, s in enumerate(owners) if s == SESSION_BASE + j))
        for j in range(bounds.sessions)
    )
    pool = new_pool(bounds.slots, locks=bounds.nodes > 0)
    return World(pool, requests, sessions, 0, 0, (), bounds.nodes, bounds.drafts)


def is_final(world: World) -> bool:
    """Every request done, every session closed, no step in flight, the prefix cache empty."""
    return (
        not world.steps
        and not world.windows
        and not cached_ids(world)
        and all(r.phase == DONE for r in world.requests)
        and all(s.status == CLOSED for s in world.sessions)
    )
