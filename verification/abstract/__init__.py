"""The abstract scheduler: requests, streaming sessions and overlapped steps over the model pool.

A pure, finite model of the scheduler that the bounded model checker (`checker.search`) explores
breadth-first, in modules of one concern each, gathered here under one name:

- `world`: bounds, requests, sessions, steps, the world, the initial world;
- `policy`: the scheduler's decisions (`Policy`; mutants override one method);
- `actions`: the actions and the successors of a world;
- `memo`: the model pool's operations, memoised;
- `rows`: the rows of a launched step as the scheduler builds them, and each slot's fill;
- `judged`: the properties the checker judges in every world, on every slot move and launch;
- `words`: worlds, moves and outcomes as text.

`differential` checks that this model and the runtime's scheduler agree on slot ownership.
"""

from __future__ import annotations

from slotwarden.verification.abstract.actions import Action, Move, Outcome, successors
from slotwarden.verification.abstract.memo import alloc, apply, fence, forget
from slotwarden.verification.abstract.judged import (
    MOVE_PROPERTIES,
    PROPERTIES,
    RUN_PROPERTIES,
    STATE_PROPERTIES,
    STEP_PROPERTIES,
    judge_launch,
    judge_move,
    judge_world,
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
    "MOVE_PROPERTIES", "PROPERTIES", "RUN_PROPERTIES", "STATE_PROPERTIES", "STEP_PROPERTIES", "judge_launch",
    "judge_move", "judge_world",
    "Alloc", "Fire", "Policy", "req_actor", "ses_actor",
    "describe", "show_move", "show_slot", "show_slots", "show_world",
    "CANDIDATE", "CLOSED", "CLOSING", "DONE", "OPEN", "PENDING", "PHASES", "RUNNING", "SESSION_BASE",
    "STATUSES", "WAITING", "Bounds", "Request", "Session", "Step", "World", "initial", "is_final", "session_of",
]  # fmt: skip
