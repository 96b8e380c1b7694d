"""verify's edge check "ledger paths" (verification/edges/ledger_paths.py) holds on the runtime
as it is and fails on each mutation survivor it was written for: the mutant's edit applied to
the source of its function (`broken`, as in test_edges.py)."""

from __future__ import annotations

import pytest
from source_edits import broken

from slotwarden.model.machine import SlotMachine
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.ledger import checks, compiled, ledger, locks, recorder, slots, transition
from slotwarden.verification.edges import ledger_paths
from slotwarden.verification.edges.job import problems_of

VARIANTS = {  # mutant -> (owner, function, old, new, words of a problem)
    "ledger.py Eq_Gt:0 (the inline alloc for n > 1)": (
        ledger.SlotLedger,
        "alloc",
        "if n == 1 and self.small",
        "if n > 1 and self.small",
        "alloc(2)",
    ),
    "slots.py ReplaceAndWithOr:2 (a free list pushed without one)": (
        slots.SlotPath,
        "_apply_slots",
        "_FREE in after and self.has_free_list",
        "_FREE in after or self.has_free_list",
        "no free list",
    ),
    "ledger.py Delete_Not:8 (bad ids not refused first)": (
        ledger.SlotLedger,
        "_refused_here",
        "if not checked and",
        "if checked and",
        "naming slot 99",
    ),
    "locks.py FalseWithTrue:0 (the record's refusal dropped)": (
        locks.Locks,
        "_table_refuses",
        "\n    return False",
        "\n    return True",
        "holding no lock",
    ),
    "transition.py Eq_GtE:31 (an unlock counted as a lock)": (
        transition,
        "write_slots",
        "if src == _INC:  # the lock count, below MAX_READERS: the FULL bit refuses the rest",
        "if src >= _INC:  # the lock count, below MAX_READERS: the FULL bit refuses the rest",
        "one each given back",
    ),
    "checks.py AddNot:3 (the other refused slots miscounted)": (
        checks.Checks,
        "_check_batch",
        'batch)" if more else ""',
        'batch)" if not more else ""',
        "a finish of the free slots",
    ),
    "recorder.py Eq_LtE:0 (a slot's history holds lower slots')": (
        recorder.FlightRecorder,
        "history",
        "e.ids == slot",
        "e.ids <= slot",
        "slot 2's history",
    ),
    "config.py ReplaceOrWithAnd:2 (empty or listed conv_dims)": (
        PoolConfig,
        "__post_init__",
        "or not self.conv_dims",
        "and not self.conv_dims",
        "conv_dims=()",
    ),
    "machine.py NumberReplacer:4 (a trigger's default epoch)": (
        SlotMachine,
        "_effect",
        'kw.get("epoch", 0)',
        'kw.get("epoch", 1)',
        "finish by its trigger",
    ),
}


def test_the_check_holds():
    assert problems_of(ledger_paths) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_check_fails_on_each_survivor(variant, monkeypatch):
    owner, name, old, new, words = VARIANTS[variant]
    broken(monkeypatch, owner, name, old, new)
    found = problems_of(ledger_paths)
    assert any(words in p for p in found), found


def test_the_check_fails_where_the_compiled_move_is_said_missing(monkeypatch):
    """compiled.py IsNot_Is:0 (`AVAILABLE = Mover is None`): AVAILABLE no longer says whether
    the extension is in use."""
    monkeypatch.setattr(compiled, "AVAILABLE", not compiled.AVAILABLE)
    assert any("the compiled move" in p for p in problems_of(ledger_paths))
