"""verify's edge check "ledger records" (verification/edges/ledger_records.py) holds on the runtime
as it is and fails on each mutation survivor it was written for: the mutant's edit applied to
the source of its function (`broken`, as in test_edges.py). The event tables are cached per
lifecycle and their views per table: a variant that edits how they are built starts from empty
caches, and leaves them empty for the real code to fill again."""

from __future__ import annotations

import pytest
from source_edits import broken

from slotwarden.runtime.ledger import audit, checks, compiled, locks, queries, recorder, tables
from slotwarden.verification.edges import ledger_records
from slotwarden.verification.edges.job import problems_of

VARIANTS = {  # mutant -> (owner, function, old, new, words of a problem)
    "the recorder hands out the kept ids themselves (writable where a path kept a list)": (
        recorder,
        "_entry",
        "ids = _read_only(ids_of(ids))",
        "ids = ids_of(ids)",
        "can be written through its ids",
    ),
    "recorder.py AndWithOr:0 (the first state before read as every slot's)": (
        recorder,
        "_entry",
        "if states.size and (states == states[0]).all()",
        "if states.size or (states == states[0]).all()",
        "not RUNNING, TAKEN, TAKEN",
    ),
    "the recorder keeps a shared state before as an array where a path kept one per slot": (
        recorder,
        "_entry",
        "before = int(states[0]) if states.size and (states == states[0]).all() else _read_only(states)",
        "before = _read_only(states)",
        "not one int",
    ),
    "audit.py NumberReplacer:6 (nine undeclared slots named)": (
        audit.Integrity,
        "audit",
        "undeclared.tolist()[:8]",
        "undeclared.tolist()[:9]",
        "the first 8 of them",
    ),
    "audit.py Lt_IsNot:1 (an undeclared last event made an Event)": (
        audit,
        "_event_or_int",
        "int(code) < len(Event)",
        "int(code) is not len(Event)",
        "raises ValueError",
    ),
    "checks.py NotEq_IsNot:1 (the first id named as the duplicate)": (
        checks.Checks,
        "_ids",
        "dup = self._stamp[arr] != seq",
        "dup = self._stamp[arr] is not seq",
        "twice, not",
    ),
    "locks.py Is_LtE:0 (a long lock batch refused as an unlock)": (
        locks.Locks,
        "lock_batch",
        "if event is Event.UNLOCK:",
        "if event <= Event.UNLOCK:",
        "a lock batch of 256 ids",
    ),
    "queries.py TrueWithFalse:0 (state_of refuses an empty batch)": (
        queries.Queries,
        "state_of",
        "allow_empty=True",
        "allow_empty=False",
        "state_of of an empty",
    ),
    "recorder.py NumberReplacer:4 (batches numbered two apart)": (
        recorder.FlightRecorder,
        "record",
        "self.seq += 1",
        "self.seq += 2",
        "three batches recorded",
    ),
    "tables.py AddNot:24 (the batch lanes clear stray fields)": (
        tables,
        "_sources",
        "if table.unused:",
        "if not table.unused:",
        "(numpy, mixed)",
    ),
    "tables.py BitOr_LShift:2 (fence and lock count not held clear)": (
        tables,
        "_unused",
        "| (READERS if not spec.shared else 0)",
        "<< (READERS if not spec.shared else 0)",
        "rollback (per-slot)",
    ),
    "tables.py FalseWithTrue:0 (the event tables writable)": (
        tables,
        "compile_events",
        "cols.setflags(write=False)",
        "cols.setflags(write=True)",
        "can be written",
    ),
    "tables.py FalseWithTrue:2 (the write sources writable)": (
        tables,
        "_sources",
        "row.setflags(write=False)",
        "row.setflags(write=True)",
        "can be written",
    ),
}


@pytest.fixture
def fresh_tables(monkeypatch):
    """The tables and their per-table views built anew while the test runs, and again after it."""
    for name in ("PLAIN", "WRITES", "_SOURCES"):
        monkeypatch.setattr(tables, name, {})
    tables.compile_events.cache_clear()
    yield
    tables.compile_events.cache_clear()


def test_the_check_holds():
    assert problems_of(ledger_records) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_check_fails_on_each_survivor(variant, monkeypatch, fresh_tables):
    owner, name, old, new, words = VARIANTS[variant]
    broken(monkeypatch, owner, name, old, new)
    found = problems_of(ledger_records)
    assert any(words in p for p in found), found


def test_the_check_fails_where_the_recorded_actors_can_change(monkeypatch):
    """recorder.py ReplaceTrueWithFalse:0 (`@dataclass(frozen=False)` on `Actors`): the actors
    of a per-slot batch can be rewritten, and (eq without frozen) are no longer hashable."""
    monkeypatch.setattr(recorder.Actors, "__setattr__", object.__setattr__)
    monkeypatch.setattr(recorder.Actors, "__hash__", None)
    found = problems_of(ledger_records)
    assert any("not hashable" in p for p in found), found
    assert any("can be rewritten" in p for p in found), found


def test_the_check_fails_where_the_recorders_default_depth_differs(monkeypatch):
    """recorder.py NumberReplacer:0 (`depth: int = 513`): a flight recorder made without a depth
    keeps one batch more than a ledger's, made without one."""
    monkeypatch.setattr(recorder.FlightRecorder.__init__, "__defaults__", (513,))
    assert any("default depth 513" in p for p in problems_of(ledger_records))


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled move is not built here")
def test_the_check_fails_where_a_refusal_code_is_misnamed(monkeypatch):
    """compiled.py NumberReplacer:5 (`REFUSED = 1`, TWICE's number): a refused move's code no
    longer decodes to its name."""
    monkeypatch.setattr(compiled, "REFUSED", 1)
    found = problems_of(ledger_records)
    assert any("a finish of FREE slots [3, 4] decodes to (0, 2), not (0, 1) (REFUSED)" in p for p in found), found
