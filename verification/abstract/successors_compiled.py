"""The abstract scheduler's successors in C (`verification/abstract/_successors.c`), for the
correct policy.

`compiled_successors(root, policy, overlap)` gives a function world -> the list of outcomes
`actions.successors(world, policy, overlap)` yields (equal, of the same record types, in the same
order), or None for a world it does not expand: one where the model refuses a move, one with
speculative windows (`Bounds.drafts` > 0), or of another shape. The caller then asks the Python.
Every slot move is still the model's: the C reads the memo tables of `memo` and calls their
Python on a miss, so a declaration mutant's model is obeyed; it remembers their answers by the
identity of the arguments, and forgets them whenever `memo.forget` has run. It is None where the
extension is not built, where the policy changes any decision the C restates (`POLICY`: a
mutant), where `actions` has changed any part the C restates (`ACTIONS`, `_Txn`, `_BY_PHASE`), or
where the workload does not fit the C tables.
"""

from __future__ import annotations

from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Actor, ActorKind, Event, State
from slotwarden.verification.abstract import actions, memo
from slotwarden.verification.abstract.actions import Action, Move, Outcome
from slotwarden.verification.abstract.policy import Policy, req_actor, ses_actor
from slotwarden.verification.abstract.world import (
    CLOSED,
    CLOSING,
    DONE,
    NODE_BASE,
    OPEN,
    PHASES,
    SESSION_BASE,
    Request,
    Session,
    Step,
    World,
)

try:
    from slotwarden.verification.abstract._successors import Successors
except ImportError:  # built without a C compiler: the successors are the Python's
    Successors = None

RECORDS = (  # the records the C side reads and builds, in its order, with the fields it assumes
    (World, ("pool", "requests", "sessions", "launched", "completed", "steps", "nodes", "drafts", "windows", "behind")),
    (Request, ("id", "session", "phase", "handle", "lent", "ran", "src")),
    (Session, ("id", "status", "handle", "turn", "turns")),
    (Step, ("epoch", "slots", "requests", "copies")),
    (Move, ("slot_id", "before", "event", "actor", "after")),
    (Outcome, ("action", "world", "moves", "error")),
    (Action, ("kind", "id", "slot")),
)
EVENTS = ("ALLOC", "LEND", "ADMIT", "ROLLBACK", "PARK", "FINISH", "RETRACT", "ABORT", "CLOSE", "LOCK", "UNLOCK",
          "INSERT", "EVICT", "FENCE")  # fmt: skip
KINDS = ("submit", "take", "match", "admit", "rollback", "finish", "donate", "retract", "abort", "evict", "launch",
         "complete", "close")  # fmt: skip
POLICY = (  # the decisions of `Policy` the C restates
    "release_epoch", "take_events", "admit_events", "can_rollback", "rollback_events", "finish_events",
    "handle_after_park", "requeued_at_fence", "can_retract", "retract_events", "abort_events", "turn_after_abort",
    "close_events", "can_match", "match_events", "unmatch_events", "launch_events", "copy_done_events", "can_donate",
    "donate_events", "can_evict", "evict_events",
)  # fmt: skip
ACTIONS = (  # the parts of `actions` the C restates
    "_submit", "_take", "_match", "_admit", "_rollback", "_finish", "_donate", "_evict", "_retract", "_abort",
    "_close", "_launch", "_complete", "_attempt", "successors", "_shifted", "_renewed", "apply", "alloc", "fence",
)  # fmt: skip
TXN = ("__init__", "fire", "set_request", "put_request", "session", "set_session", "leave_steps", "turn_over", "close",
       "freeze")  # fmt: skip

_ORIGINAL = (
    {name: getattr(Policy, name) for name in POLICY},
    {name: getattr(actions, name) for name in ACTIONS},
    {name: getattr(actions._Txn, name) for name in TXN},
    dict(actions._BY_PHASE),
)


def restated() -> bool:
    """Whether `actions` (its actions, its transaction, its table of actions by phase) and the
    model's memo functions it calls are still the ones the C restates."""
    return (
        all(getattr(actions, n) is f for n, f in _ORIGINAL[1].items())
        and all(getattr(actions._Txn, n) is f for n, f in _ORIGINAL[2].items())
        and actions._BY_PHASE == _ORIGINAL[3]
        and (actions.apply, actions.alloc, actions.fence) == (memo.apply, memo.alloc, memo.fence)
        and all(record._fields == fields for record, fields in RECORDS)
    )


def correct(policy) -> bool:
    """Whether every decision of `policy` the C restates is the correct policy's own."""
    return all(getattr(getattr(policy, n), "__func__", None) is f for n, f in _ORIGINAL[0].items())


def compiled_successors(root: World, policy, overlap: bool):
    """The compiled successors of the workload of `root` under `policy` (`Successors.expand`), or None."""
    if Successors is None or not correct(policy) or not restated():
        return None
    cache_owned = frozenset(spec.state for spec in LIFECYCLE.states if spec.owner is ActorKind.CACHE)
    try:
        bound = Successors(
            tuple(record for record, _ in RECORDS),
            tuple(Event[name] for name in EVENTS),
            KINDS,
            (memo._APPLY, memo._ALLOC, memo._FENCE, actions._SHIFTED),
            (memo.apply, memo.alloc, memo.fence, actions._shifted),
            tuple(req_actor(r) for r in root.requests),
            tuple(ses_actor(s) for s in root.sessions),
            Actor.cache,
            Actor.fence,
            State.CACHED,
            cache_owned,
            NOBODY,
            tuple(range(len(PHASES))),
            (OPEN, CLOSING, CLOSED),
            SESSION_BASE,
            NODE_BASE,
            MAX_READERS,
            bool(overlap),
            memo.FORGOTTEN,
        )
    except ValueError:  # a workload beyond the C tables: expanded in Python
        return None
    assert DONE == len(PHASES) - 1
    return bound.expand
