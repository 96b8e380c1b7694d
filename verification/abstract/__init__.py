"""The abstract scheduler: requests, streaming sessions and overlapped steps over the model pool.

A pure, finite model of the scheduler that the bounded model checker (`checker.py`) explores
breadth-first, in files of one concern each, gathered here under one name:

- `abstract_world`: bounds, requests, sessions, steps, the world, the initial world;
- `abstract_policy`: the scheduler's decisions (`Policy`; mutants override one method);
- `abstract_actions`: the actions, the successors of a world, the memoised model pool;
- `abstract_faults`: the properties judged in every world and on every slot move;
- `abstract_words`: worlds, moves and outcomes as text.

`differential.py` checks that this model and the runtime's scheduler agree on slot ownership.
"""

from __future__ import annotations

from slotwarden.verification.abstract.actions import Action, Move, Outcome, alloc, apply, fence, forget, successors
from slotwarden.verification.abstract.judged import (
    MOVE_PROPERTIES,
    PROPERTIES,
    RUN_PROPERTIES,
    STATE_PROPERTIES,
    move_fault,
    state_fault,
)
from slotwarden.verification.abstract.policy import Alloc, Fire, Policy, req_actor, ses_actor
from slotwarden.verification.abstract.words import describe, show_move, show_slot, show_slots, show_world
from slotwarden.verification.abstract.world import (
    CANDIDATE,
    CLOSED,
    CLOSING,
    DONE,
    OPEN,
    PENDING,
    PHASES,
    RUNNING,
    SESSION_BASE,
    STATUSES,
    WAITING,
    Bounds,
    Request,
    Session,
    Step,
    World,
    initial,
    is_final,
    session_of,
)

__all__ = [
    "Action", "Move", "Outcome", "alloc", "apply", "fence", "forget", "successors",
    "MOVE_PROPERTIES", "PROPERTIES", "RUN_PROPERTIES", "STATE_PROPERTIES", "move_fault", "state_fault",
    "Alloc", "Fire", "Policy", "req_actor", "ses_actor",
    "describe", "show_move", "show_slot", "show_slots", "show_world",
    "CANDIDATE", "CLOSED", "CLOSING", "DONE", "OPEN", "PENDING", "PHASES", "RUNNING", "SESSION_BASE",
    "STATUSES", "WAITING", "Bounds", "Request", "Session", "Step", "World", "initial", "is_final", "session_of",
]  # fmt: skip
