"""verify's edge check "ledger fast paths" (verification/edges/ledger_fast_paths.py) holds on the
runtime as it is and fails on each mutation survivor it was written for: the mutant's edit
applied to the source of its function (`broken`, as in test_edges.py)."""

from __future__ import annotations

import pytest
from source_edits import broken

from slotwarden.runtime.ledger import batch, compiled, ledger, transition
from slotwarden.verification.edges import ledger_fast_paths
from slotwarden.verification.edges.job import problems_of

VARIANTS = {  # mutant -> (owner, function, old, new, words of a problem)
    "batch.py IsNot_Is:9 (a view of the ledger's memory not detached)": (
        batch.BatchPath,
        "_detached",
        "array.base is not None and",
        "array.base is None and",
        "a view of the owner column",
    ),
    "ledger.py NumberReplacer:30 (a run read from its second id)": (
        ledger.SlotLedger,
        "_alloc_batch",
        "first = ring.item(0)",
        "first = ring.item(1)",
        "runs from one slot",
    ),
    "ledger.py NumberReplacer:72 (an early fence names 9 slots)": (
        ledger.SlotLedger,
        "_refused_here",
        "ids.tolist()[:8]",
        "ids.tolist()[:9]",
        "other slots than the first 8",
    ),
    "ledger.py NotEq_Is:1 (the free list's states not checked)": (
        ledger.SlotLedger,
        "_alloc_batch",
        "self.cols.state[where].tobytes() != _FREE_BYTE * n",
        "self.cols.state[where].tobytes() is _FREE_BYTE * n",
        "holding the running slot 2",
    ),
    "ledger.py TrueWithFalse:0 (the write's mark dropped before the ring advances)": (
        ledger.SlotLedger,
        "_alloc_batch",
        "dup=False, hold=True",
        "dup=False, hold=False",
        "the ledger answers",
    ),
    "transition.py AddNot:31 (the state/event word written where there is none)": (
        transition,
        "write",
        "if cols.code is not None:",
        "if not cols.code is not None:",
        "without a state/event word",
    ),
    "transition.py Add_RShift:4 (a mixed look-up loses the FULL bit)": (
        transition,
        "look_up_mixed",
        "(count == 0) * IDLE + (count >= MAX_READERS) * FULL",
        "(count == 0) * IDLE >> (count >= MAX_READERS) * FULL",
        "locked 255 times",
    ),
    "transition.py LtE_Lt:1 (a fence counted due only before its step)": (
        transition,
        "look_up",
        "np.count_nonzero(fence <= actor_id)",
        "np.count_nonzero(fence < actor_id)",
        "waiting for steps 2, 2, 3",
    ),
}
NEEDS_KERNEL = {"ledger.py TrueWithFalse:0 (the write's mark dropped before the ring advances)"}


def test_the_check_holds():
    assert problems_of(ledger_fast_paths) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_check_fails_on_each_survivor(variant, monkeypatch):
    if variant in NEEDS_KERNEL and not compiled.AVAILABLE:
        pytest.skip("the compiled move is not built here")
    owner, name, old, new, words = VARIANTS[variant]
    broken(monkeypatch, owner, name, old, new)
    found = problems_of(ledger_fast_paths)
    assert any(words in p for p in found), found
