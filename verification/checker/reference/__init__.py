"""Today's checker, kept as it was made: its breadth-first search (`reference.search.check`),
its successor function (`reference.actions`) and its codec (`reference.symmetry`), verbatim but
for their imports. The peer that `slotwarden bench checker` times the checker against and that
tests/verification/checker/test_reference.py compares it with (the same states, transitions,
depth and verdict); nothing else calls it."""

from slotwarden.verification.checker.reference.search import check

__all__ = ["check"]
