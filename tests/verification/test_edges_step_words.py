"""verify's edge check "step and words" (verification/edges/step_words.py) holds on the runtime
and the model as they are and fails on each mutation survivor it was written for: the mutant's
edit applied to the source of its function (`broken`, as in test_edges.py), or to the default
argument it changes."""

from __future__ import annotations

import pytest
from source_edits import broken

from slotwarden.model import declaration, errors, properties
from slotwarden.model import launch as model_launch
from slotwarden.runtime import inputs, launch
from slotwarden.runtime.pool import StatePool
from slotwarden.verification.edges import step_words
from slotwarden.verification.edges.job import problems_of

VARIANTS = {  # mutant -> (owner, function, old, new, words of a problem)
    "declaration.py Is_Eq:9 (plain-int states reach)": (
        declaration,
        "_reachable",
        "if r.source is here and",
        "if r.source == here and",
        "declare takes State members only",
    ),
    "errors.py Is_IsNot:7 (a pad row's words for a request's row)": (
        errors.IllegalStep,
        "_describe",
        'who = "a pad row" if self.actor is None else',
        'who = "a pad row" if self.actor is not None else',
        "without the words",
    ),
    "model/launch.py Eq_GtE:0 (every holder nobody)": (
        model_launch,
        "holder",
        "slot.owner == NOBODY",
        "slot.owner >= NOBODY",
        "held by request 1",
    ),
    "properties.py Eq_GtE:15 (authority: a lend to a later request)": (
        properties,
        "authority",
        "and after.borrower == target",
        "and after.borrower >= target",
        "authority: a lend to request 7 that leaves the slot lent to request 9 is judged True",
    ),
    "properties.py Eq_GtE:20 (handles_follow: a higher owner)": (
        properties,
        "handles_follow",
        "after.owner == before.owner)",
        "after.owner >= before.owner)",
        "handles_follow: a lend that hands the slot to session 9 is judged True",
    ),
    "properties.py Eq_GtE:6 (conserved: a free list naming more)": (
        properties,
        "conserved",
        "and set(free) == free_ids",
        "and set(free) >= free_ids",
        "conserved: a free list naming a taken slot too is judged True",
    ),
    "properties.py GtE_Eq:5 (evict_unlocked: only at the step's fence)": (
        properties,
        "evict_unlocked",
        "and after.fence >= epoch",
        "and after.fence == epoch",
        "fenced after the step in flight is judged False",
    ),
    "inputs.py LtE_IsNot:15 (a long array taken as it is)": (
        inputs,
        "ids",
        "if limit is None or value.size <= limit:",
        "if limit is None or value.size is not limit:",
        "an admit_each of 5 ids",
    ),
    "inputs.py NotEq_IsNot:1 (sizes past 256)": (
        inputs,
        "actor_ids",
        "or value.size != n",
        "or value.size is not n",
        "alloc_each of 300 requests",
    ),
    "launch.py AddNot:16 (duplicates refused when there are none)": (
        launch,
        "check_step",
        "if twice.size:",
        "if not twice.size:",
        "two distinct writes by their holder is refused (ValueError)",
    ),
    "launch.py Gt_Eq:0 (no duplicate scan past one write)": (
        launch,
        "check_step",
        "if written.size > 1:",
        "if written.size == 1:",
        "a slot written twice is not refused",
    ),
    "launch.py BitOr_Mod:1 (no request rows: bad % real)": (
        launch,
        "_faults",
        "return bad | real",
        "return bad % real",
        "a request row, on a write set of pad rows is not refused",
    ),
    "launch.py BitAnd_FloorDiv:6 (real // inside)": (
        launch,
        "_faults",
        "locked = real & inside",
        "locked = real // inside",
        "the check warns",
    ),
    "launch.py Eq_Gt:10 (non-empty ids converted to int64)": (
        launch,
        "_ints",
        "if arr.size == 0:",
        "if arr.size > 0:",
        "float ids is not refused",
    ),
    "pool.py NotEq_LtE:2 (a loan left unnamed)": (
        StatePool,
        "_why_unreadable",
        "rec.borrower != NOBODY",
        "rec.borrower <= NOBODY",
        "does not name the loan",
    ),
}
DEFAULTS = {  # mutant -> (function, its mutated defaults, words of a problem)
    "errors.py NumberReplacer:14 (a value shown in 61 characters)": (errors._show, (61,), "not in its first 60"),
    "pool.py NumberReplacer:6 (a history of 9 moves)": (StatePool.history, (9,), "history of slot 6 has 9 moves"),
}


def test_the_check_holds():
    assert problems_of(step_words) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_check_fails_on_each_survivor(variant, monkeypatch):
    owner, name, old, new, words = VARIANTS[variant]
    broken(monkeypatch, owner, name, old, new)
    found = problems_of(step_words)
    assert any(words in p for p in found), found


@pytest.mark.parametrize("variant", list(DEFAULTS))
def test_the_check_fails_on_each_changed_default(variant, monkeypatch):
    function, defaults, words = DEFAULTS[variant]
    monkeypatch.setattr(function, "__defaults__", defaults)
    found = problems_of(step_words)
    assert any(words in p for p in found), found


def test_an_empty_step_is_refused_on_the_changed_empty_case(monkeypatch):
    broken(monkeypatch, launch, "_ints", "if arr.size == 0:", "if arr.size > 0:")
    assert any("an empty step is refused (BadInput)" in p for p in problems_of(step_words))
