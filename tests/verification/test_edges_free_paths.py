"""verify's edge check "free paths" (verification/edges/free_paths.py) holds on the runtime as it
is and fails on each mutation survivor it was written for: the mutant's edit applied to the
source of its function (`broken`, as in test_edges.py)."""

from __future__ import annotations

import pytest
from source_edits import broken

from slotwarden.runtime import guard_tables, guarded_allocator
from slotwarden.runtime.ledger import lane
from slotwarden.verification.edges import free_paths
from slotwarden.verification.edges.job import problems_of

GA = guarded_allocator.GuardedAllocator
VARIANTS = {  # mutant -> (owner, function, old, new, words of a problem)
    "guard_tables.py Eq_Is:2 (no state's keys are one move)": (
        guard_tables,
        "_one_move",
        "ok = free_event[kind, s, rel] == event",
        "ok = free_event[kind, s, rel] is event",
        "rollback of 3 slots took the general path",
    ),
    "guarded_allocator.py AddNot:4 (the lane bound only with LANE off)": (
        GA,
        "__init__",
        "if self.LANE else None",
        "if not self.LANE else None",
        "LANE = False has the compiled lane bound",
    ),
    "guarded_allocator.py Is_NotEq:1 (the lane's free bound over a subclass's own)": (
        GA,
        "__init__",
        "cls.free is GuardedAllocator.free",
        "cls.free != GuardedAllocator.free",
        "a subclass's own free and alloc ran",
    ),
    "guarded_allocator.py GtE_Lt:0 (every declared state declined)": (
        GA,
        "_free_one_move",
        "if state >= len(events):",
        "if state < len(events):",
        "compiled lane: a rollback of 1 slots took the general path",
    ),
    "guarded_allocator.py FalseWithTrue:3 (an undeclared state's free accepted)": (
        GA,
        "_free_one_move",
        "if state >= len(events):\n        return False",
        "if state >= len(events):\n        return True",
        "in no declared state was accepted",
    ),
    "guarded_allocator.py Is_IsNot:10 (the array lane frees one slot of many)": (
        GA,
        "_free_arrays",
        "if ids is None:",
        "if ids is not None:",
        "numpy lane: a rollback of 3 slots took the general path",
    ),
    "guarded_allocator.py Is_NotEq:9 (a fence hands this free's first slot only first)": (
        guarded_allocator,
        "_as_ids",
        "type(ids) is int",
        "type(ids) != int",
        "want this free's",
    ),
}
NEEDS_LANE = {"guarded_allocator.py AddNot:4 (the lane bound only with LANE off)"}


def test_the_check_holds():
    assert problems_of(free_paths) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_check_fails_on_each_survivor(variant, monkeypatch):
    if variant in NEEDS_LANE and lane.Lane is None:
        pytest.skip("the compiled lane is not built here")
    owner, name, old, new, words = VARIANTS[variant]
    broken(monkeypatch, owner, name, old, new)
    found = problems_of(free_paths)
    assert any(words in p for p in found), found
