"""THE slot lifecycle, declared once. Everything in slotwarden reads it from here.

A request takes a free slot (TAKEN) while the batch is built; it rolls back or is admitted
(RUNNING). A running request finishes, is retracted or aborted (RELEASED, FREE at the fence of
the step in flight), or parks its state in its session (PARKED). A session lends its slot to its
next turn (LENT, then LENT_RUNNING); whatever happens to that turn, the slot goes back to the
session, and only the session's close moves it out.

The prefix cache owns slots too: a donated state (CACHING) is matchable (CACHED) only at the
fence of the step that wrote it; requests lock a cached slot to copy from it and never write it;
the cache evicts only an unlocked node. In speculative decoding a request holds a window beside
its committed slot: one slot it took per verified position (DRAFT), written by the verify step
(VERIFYING) and readable only at its fence (VERIFIED). COMMIT copies the accepted position into
the committed slot and gives the window back; ROLLBACK gives it back and never touches it.
"""

from __future__ import annotations

from slotwarden.model.declaration import (
    CLEAR,
    DONATE,
    HAND_OVER,
    KEEP,
    LEND,
    PUBLISH,
    READ_LOCK,
    READ_UNLOCK,
    RELEASE,
    STAMP,
    RETURN,
    TAKE,
    EventSpec,
    Rule,
    StateSpec,
    declare,
)
from slotwarden.model.vocabulary import PAD_SLOT, ActorKind, Event, Group, Relation, State
from slotwarden.model.write_set import Access, Fill, RowKind, RowSpec, declare_write_set

S, E, R, K = State, Event, Relation, ActorKind

STATES = (
    StateSpec(S.FREE, Group.FREE, doc="in the free list, owned by nobody"),
    StateSpec(S.TAKEN, Group.BATCH_OWNED, owner=K.REQUEST, doc="held by a candidate of the batch being built"),
    StateSpec(S.RUNNING, Group.BATCH_OWNED, owner=K.REQUEST, doc="held by a request in the running batch"),
    StateSpec(S.PARKED, Group.SESSION_OWNED, owner=K.SESSION, doc="held by a session between turns"),
    StateSpec(S.LENT, Group.SESSION_OWNED, owner=K.SESSION, lent=True, doc="lent to the session's candidate turn"),
    StateSpec(
        S.LENT_RUNNING, Group.SESSION_OWNED, owner=K.SESSION, lent=True, doc="lent to the session's running turn"
    ),
    StateSpec(S.RELEASED, Group.RELEASED, fenced=True, doc="given back; free once the step in flight is fenced"),
    StateSpec(
        S.CACHING,
        Group.CACHE_OWNED,
        owner=K.CACHE,
        fenced=True,
        doc="donated to a tree node; matchable once the step writing it is fenced",
    ),
    StateSpec(
        S.CACHED,
        Group.CACHE_OWNED,
        owner=K.CACHE,
        shared=True,
        doc="published by a tree node; requests lock it to copy from it",
    ),
    StateSpec(S.DRAFT, Group.BATCH_OWNED, owner=K.REQUEST, doc="one position of its request's speculative window"),
    StateSpec(
        S.VERIFYING,
        Group.BATCH_OWNED,
        owner=K.REQUEST,
        fenced=True,
        doc="written by the verify step in flight; read only once that step is fenced",
    ),
    StateSpec(S.VERIFIED, Group.BATCH_OWNED, owner=K.REQUEST, doc="a verified position's state, not committed"),
)

EVENTS = (
    EventSpec(E.ALLOC, K.REQUEST, doc="a request takes a free slot (the slot is zeroed)"),
    EventSpec(E.LEND, K.SESSION, target=K.REQUEST, doc="a session lends its slot to its next turn"),
    EventSpec(E.ADMIT, K.REQUEST, doc="the candidate holding the slot joins the running batch"),
    EventSpec(E.ROLLBACK, K.REQUEST, doc="the candidate did not fit; what it took goes back where it came from"),
    EventSpec(E.PARK, K.REQUEST, target=K.SESSION, doc="the turn's state is saved to its session"),
    EventSpec(E.FINISH, K.REQUEST, doc="the request is done"),
    EventSpec(E.RETRACT, K.REQUEST, doc="the request is preempted, to be recomputed"),
    EventSpec(E.ABORT, K.REQUEST, doc="the request is cancelled"),
    EventSpec(E.CLOSE, K.SESSION, doc="the session ends or is reaped"),
    EventSpec(E.FENCE, K.SCHEDULER, doc="the device finished a step"),
    EventSpec(E.INSERT, K.REQUEST, target=K.CACHE, doc="the request donates its state to a prefix-tree node"),
    EventSpec(E.LOCK, K.REQUEST, doc="a request locks a cached slot to copy from it"),
    EventSpec(E.UNLOCK, K.REQUEST, doc="the request's copy is fenced; it lets go of the cached slot"),
    EventSpec(E.EVICT, K.CACHE, doc="the prefix cache drops the node's slot"),
    EventSpec(E.DRAFT, K.REQUEST, doc="a slot the request took becomes one position of its speculative window"),
    EventSpec(E.VERIFY, K.REQUEST, doc="the verify step writes one state per drafted position into the window"),
    EventSpec(E.COMMIT, K.REQUEST, doc="the accepted position's state is copied into the committed slot"),
)

RULES = (
    Rule(S.FREE, E.ALLOC, R.NONE, S.TAKEN, TAKE, "any request may take a free slot"),
    Rule(S.TAKEN, E.ADMIT, R.OWNER, S.RUNNING, KEEP, "the admitted request keeps the slot it took"),
    Rule(S.TAKEN, E.ROLLBACK, R.OWNER, S.FREE, CLEAR, "never used by a step: free at once"),
    Rule(S.TAKEN, E.ABORT, R.OWNER, S.FREE, CLEAR, "never used by a step: free at once"),
    Rule(S.RUNNING, E.FINISH, R.OWNER, S.RELEASED, RELEASE, "a step in flight may still use it: free at its fence"),
    Rule(S.RUNNING, E.RETRACT, R.OWNER, S.RELEASED, RELEASE, "a step in flight may still use it: free at its fence"),
    Rule(S.RUNNING, E.ABORT, R.OWNER, S.RELEASED, RELEASE, "a step in flight may still use it: free at its fence"),
    Rule(S.RUNNING, E.PARK, R.OWNER, S.PARKED, HAND_OVER, "the request keeps no handle"),
    Rule(S.PARKED, E.LEND, R.OWNER, S.LENT, LEND, "the session still owns it; the turn only borrows it"),
    Rule(S.LENT, E.ADMIT, R.BORROWER, S.LENT_RUNNING, KEEP, "the turn runs on its session's slot, only borrowing it"),
    Rule(S.LENT, E.ROLLBACK, R.BORROWER, S.PARKED, RETURN, "a lent slot goes back to its session (PR 21404)"),
    Rule(S.LENT, E.ABORT, R.BORROWER, S.PARKED, RETURN, "a lent slot goes back to its session"),
    Rule(S.LENT_RUNNING, E.FINISH, R.BORROWER, S.PARKED, RETURN, "the turn's state stays with the session"),
    Rule(
        S.LENT_RUNNING,
        E.RETRACT,
        R.BORROWER,
        S.PARKED,
        RETURN,
        "a lent slot goes back to its session; the turn's partial state is no checkpoint (SGLang 40252): "
        "the scheduler retracts a lent turn to free a seat in the running batch",
    ),
    Rule(S.LENT_RUNNING, E.ABORT, R.BORROWER, S.PARKED, RETURN, "a lent slot goes back to its session"),
    Rule(S.PARKED, E.CLOSE, R.OWNER, S.RELEASED, RELEASE, "the session releases exactly what it owns"),
    Rule(S.RELEASED, E.FENCE, R.DUE, S.FREE, CLEAR, "the step that may use it has finished"),
    Rule(
        S.RUNNING,
        E.INSERT,
        R.OWNER,
        S.CACHING,
        DONATE,
        "the request keeps no handle; the step in flight may still write it",
    ),
    Rule(S.CACHING, E.FENCE, R.DUE, S.CACHED, PUBLISH, "published only once its write is fenced (vLLM #56525)"),
    Rule(S.CACHING, E.EVICT, R.OWNER, S.RELEASED, RELEASE, "an aborted write is dropped unread (SGLang #30986)"),
    Rule(S.CACHED, E.LOCK, R.NONE, S.CACHED, READ_LOCK, "any request may read published state"),
    Rule(S.CACHED, E.LOCK, R.READER, S.CACHED, READ_LOCK, "any number of readers, up to the bound"),
    Rule(S.CACHED, E.UNLOCK, R.READER, S.CACHED, READ_UNLOCK, "an unlock needs a lock to undo (SGLang #27147)"),
    Rule(S.CACHED, E.UNLOCK, R.FULL, S.CACHED, READ_UNLOCK, "an unlock needs a lock to undo"),
    Rule(
        S.CACHED,
        E.EVICT,
        R.OWNER,
        S.RELEASED,
        RELEASE,
        "only an unlocked node is evicted (SGLang #27038, LMDeploy #4700)",
    ),
    Rule(S.TAKEN, E.DRAFT, R.OWNER, S.DRAFT, KEEP, "a slot a running request took joins its window"),
    Rule(S.DRAFT, E.VERIFY, R.OWNER, S.VERIFYING, STAMP, "the verify step in flight writes it"),
    Rule(
        S.VERIFYING,
        E.FENCE,
        R.DUE,
        S.VERIFIED,
        PUBLISH,
        "a verified state and the accepted count are read only after the step's fence (vLLM #50021)",
    ),
    Rule(
        S.RUNNING,
        E.COMMIT,
        R.OWNER,
        S.RUNNING,
        KEEP,
        "the accepted state is copied into the committed slot (SGLang #26351)",
    ),
    Rule(S.LENT_RUNNING, E.COMMIT, R.BORROWER, S.LENT_RUNNING, KEEP, "the accepted state is copied into the lent slot"),
    Rule(
        S.VERIFIED,
        E.COMMIT,
        R.OWNER,
        S.RELEASED,
        RELEASE,
        "the window goes back; the copy in flight may still read it: free at its fence",
    ),
    Rule(S.DRAFT, E.ROLLBACK, R.OWNER, S.FREE, CLEAR, "never written: free at once"),
    Rule(
        S.VERIFYING,
        E.ROLLBACK,
        R.OWNER,
        S.RELEASED,
        RELEASE,
        "an abandoned verify: its step still writes the window, never the committed slot",
    ),
    Rule(S.VERIFIED, E.ROLLBACK, R.OWNER, S.FREE, CLEAR, "no step reads a window that is not committed"),
)

LIFECYCLE = declare("slot lifecycle", STATES, EVENTS, RULES)

# A launched step addresses the state through its batch rows: a request's row writes the slot it
# runs on and reads it and, for a copy, a cached slot it has locked; a padding row reads and
# writes only the pad slot; a slot is read only once zeroed, copied into or written since taken.
ROWS = (
    RowSpec(
        RowKind.REQUEST,
        K.REQUEST,
        writes=(
            Access(S.RUNNING, R.OWNER, "the slot it runs on"),
            Access(S.LENT_RUNNING, R.BORROWER, "its session's slot, lent to it"),
            Access(S.DRAFT, R.OWNER, "a slot of its window: a verify row writes one position's state"),
        ),
        reads=(
            Access(S.RUNNING, R.OWNER, "the slot it runs on"),
            Access(S.LENT_RUNNING, R.BORROWER, "its session's slot, lent to it"),
            Access(S.CACHED, R.READER, "a published cached slot it holds a lock on: a copy's source"),
            Access(S.CACHED, R.FULL, "the same, at the lock bound"),
            Access(S.DRAFT, R.OWNER, "a slot of its window: the position before, written by the same step"),
        ),
        doc="a request of the running batch",
    ),
    RowSpec(RowKind.PAD, None, pad_only=True, doc="pads the batch to a captured size (a CUDA graph's)"),
)

WRITE_SET = declare_write_set(LIFECYCLE, ROWS, pad_slot=PAD_SLOT, readable=(Fill.ZEROED, Fill.COPIED, Fill.WRITTEN))
