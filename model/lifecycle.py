"""THE slot lifecycle, declared once. Everything in slotwarden reads it from here.

A request takes a free slot (TAKEN) while the batch builder considers it; it either does not fit
and rolls back, or is admitted (RUNNING). A running request finishes, is retracted or aborted
(RELEASED, FREE at the fence of the step in flight), or, at the end of a session's first turn,
parks its state in the session (PARKED). A session lends its parked slot to its next turn
(LENT, then LENT_RUNNING once admitted); whatever happens to that turn, the slot goes back to
the session. Only the owning session's close moves a session-owned slot out of the session.
"""

from __future__ import annotations

from .declaration import CLEAR, HAND_OVER, KEEP, LEND, RELEASE, RETURN, TAKE, EventSpec, Rule, StateSpec, declare
from .vocabulary import ActorKind, Event, Group, Relation, State

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
)

LIFECYCLE = declare("slot lifecycle", STATES, EVENTS, RULES)
