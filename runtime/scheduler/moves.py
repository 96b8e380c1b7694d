"""The seam: the scheduler's policy hooks, the one place the history mutants override.

Each hook makes one decision of the scheduler and fires its pool events. `Scheduler` implements
them; the batch builder (`admission.py`) and the scheduler's own steps call them, never the pool
directly for these decisions, so a mutant that overrides one hook changes that decision
everywhere. The checker's twin has the same decisions as `Policy` methods
(verification/abstract/policy.py).
"""

from __future__ import annotations

from typing import Protocol


class Moves(Protocol):
    """What the batch builder needs of the seam (the scheduler implements every hook)."""

    def rollback_candidate(self, req) -> None:
        """A candidate that took its slot does not fit: give back exactly what it took."""

    def release_retracted(self, req) -> None:
        """A running request is preempted: its slot goes back where it came from."""

    def turn_retracted(self, s, req, lent: bool) -> None:
        """Session `s`'s turn `req` was retracted (on its lent slot if `lent`)."""

    def fence_finished(self) -> None:
        """Fence every step the device has finished."""

    def cache_match(self, req) -> None:
        """A plain candidate locks its longest cached prefix, if any."""

    def cache_forget(self, req) -> None:
        """A candidate gives its unused match back."""

    def cache_copy(self, req) -> None:
        """An admitted candidate copies its matched state into its fresh slot."""

    def cache_awaits(self, req) -> bool:
        """Whether a parallel-sampling sibling still waits for its group's prompt state."""

    def cache_evict(self, n: int = 1) -> int:
        """Evict up to `n` unlocked cached nodes; how many were."""
