"""The words of the slot lifecycle: states, events, actors and how an actor relates to a slot.

These enums are only names. What may happen between them is declared once, in
`slotwarden.model.lifecycle`; everything else (the `transitions` machine, `step`, the dense
table the runtime compiles onto a device, the diagrams) is derived from that declaration.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

NOBODY = -1
"""The owner/borrower field of a slot that has none. Never a valid actor id, never returned."""

PAD_SLOT = 0
"""The pad slot: a scratch slot outside the lifecycle, the only slot a padding row addresses."""

MAX_READERS = 255
"""The bound of a cached slot's lock count (it fits a uint8 column): a lock at the bound is refused."""


class State(IntEnum):
    """Where a slot is in its lifecycle (the pad slot and sentinels are outside the machine)."""

    FREE = 0
    TAKEN = 1  # batch-owned: a candidate of the batch being built took it
    RUNNING = 2  # batch-owned: its request was admitted to the running batch
    PARKED = 3  # session-owned: between turns, nobody borrows it
    LENT = 4  # session-owned: lent to the session's candidate turn
    LENT_RUNNING = 5  # session-owned: lent to the session's admitted, running turn
    RELEASED = 6  # given back; may still be used by a step on the device until its fence
    CACHING = 7  # cache-owned: donated to a prefix-tree node, not matchable until its write is fenced
    CACHED = 8  # cache-owned: published; any number of requests may lock it to read (copy) it
    DRAFT = 9  # batch-owned: one position of its request's speculative window, not yet written
    VERIFYING = 10  # batch-owned: written by the verify step in flight; unreadable until its fence
    VERIFIED = 11  # batch-owned: a verified position's state, never committed state itself


class Group(IntEnum):
    """The five groups of states (free, owned by the batch, owned by a session, released, owned
    by the prefix cache); each `State` belongs to one."""

    FREE = 0
    BATCH_OWNED = 1
    SESSION_OWNED = 2
    RELEASED = 3
    CACHE_OWNED = 4


class Event(IntEnum):
    """Everything that can happen to a slot."""

    ALLOC = 0  # a request takes a free slot
    LEND = 1  # a session lends its parked slot to its next turn
    ADMIT = 2  # the batch builder admits the candidate holding the slot to the running batch
    ROLLBACK = 3  # the candidate did not fit: give back what it took, to where it came from
    PARK = 4  # a turn's state is saved to its session: the request hands its slot over
    FINISH = 5  # the request is done
    RETRACT = 6  # the request is preempted and will be recomputed
    ABORT = 7  # the request is cancelled, at any point
    CLOSE = 8  # the session ends (or is reaped)
    FENCE = 9  # the device finished a step: released slots it may have used become free
    INSERT = 10  # a request donates its slot's state to a prefix-tree node
    LOCK = 11  # a request locks a cached slot to read it (copy-on-write source)
    UNLOCK = 12  # the request is done reading the cached slot
    EVICT = 13  # the prefix cache drops a node's slot
    DRAFT = 14  # a slot a running request took becomes one position of its speculative window
    VERIFY = 15  # the verify step writes one state per drafted position into the window
    COMMIT = 16  # the accepted position's state is copied into the committed slot; the window goes back


class ActorKind(IntEnum):
    """Who fires events."""

    REQUEST = 0
    SESSION = 1
    SCHEDULER = 2  # fires fences; its id is the step (epoch) the device has finished
    CACHE = 3  # the prefix cache; its id is the tree node that owns the slot


class Relation(IntEnum):
    """How the actor firing an event relates to the slot: the owner rule's vocabulary."""

    NONE = 0  # no claim on the slot
    OWNER = 1  # the actor owns the slot
    BORROWER = 2  # the slot is lent to the actor (a request) by its owning session
    DUE = 3  # a fence at or past the step the released slot waits for
    EARLY = 4  # a fence for a step before the one the released slot waits for
    READER = 5  # a request on a cached slot that some request has locked (lock count 1..MAX-1)
    FULL = 6  # a request on a cached slot whose lock count is at its bound MAX_READERS
    PINNED = 7  # the owning node of a cached slot that is locked: it may not evict it


class Slot(NamedTuple):
    """One slot's record: its state, its owner, the request it is lent to, while RELEASED
    (or CACHING) the step whose fence frees (or publishes) it, and while CACHED how many
    locks readers hold on it. Unused fields hold `NOBODY` (fence, readers: 0)."""

    state: State
    owner: int = NOBODY
    borrower: int = NOBODY
    fence: int = 0
    readers: int = 0


# read once: an enum member look-up costs a call, and these constructors are on hot paths
_REQUEST, _SESSION, _SCHEDULER, _CACHE = ActorKind.REQUEST, ActorKind.SESSION, ActorKind.SCHEDULER, ActorKind.CACHE


class Actor(NamedTuple):
    """Who fires an event: a request id, a session id, or the scheduler with a finished step."""

    kind: ActorKind
    id: int

    @classmethod
    def request(cls, rid: int) -> "Actor":
        return cls(_REQUEST, rid)

    @classmethod
    def session(cls, sid: int) -> "Actor":
        return cls(_SESSION, sid)

    @classmethod
    def fence(cls, step: int) -> "Actor":
        return cls(_SCHEDULER, step)

    @classmethod
    def cache(cls, node: int) -> "Actor":
        return cls(_CACHE, node)

    def __str__(self) -> str:
        return f"{self.kind.name.lower()} {self.id}"


FREE_SLOT = Slot(State.FREE)
