"""verify's edge check "model refusals" (verification/edges/declarations.py) holds on the model
as it is and fails on each broken variant: one refusal of the declaration, the write set or the
abstract pool taken out of its source (`broken`, as in test_edges.py), or a lookup that lies."""

from __future__ import annotations

import pytest
from source_edits import broken

from slotwarden.model import declaration, errors, pool, table, write_set
from slotwarden.verification.edges import declarations, words
from slotwarden.verification.edges.job import problems_of

VARIANTS = {  # id -> (owner, function, old, new, words of a problem)
    "duplicate rules accepted": (declaration, "declare", "if key in table:", "if False:", "duplicate rule is accepted"),
    "unreachable states accepted": (declaration, "declare", "if unreachable:", "if False:", "unreachable states is"),
    "any relation accepted": (
        declaration,
        "declare",
        "if r.by not in relations_for(specs[r.source], kind):",
        "if False:",
        "an impossible relation is accepted",
    ),
    "an effect from any source": (declaration, "declare", "if src not in allowed:", "if False:", "wrong source"),
    "an undeclared initial state": (
        declaration,
        "declare",
        "if initial not in specs:",
        "if False:",
        "undeclared initial state is refused in other words",
    ),
    "a twice-declared state kept": (declaration, "_index", "if k in found:", "if False:", "declared twice is"),
    "a pad row that addresses slots": (
        write_set,
        "declare_write_set",
        "if r.pad_only and (r.actor is not None or r.writes or r.reads):",
        "if r.pad_only and r.actor is not None:",
        "a pad row with an access",
    ),
    "the old state test (a TypeError)": (
        write_set,
        "declare_write_set",
        "if not isinstance(a.state, State) or",
        "if a.state not in State or",
        "raises TypeError",
    ),
    "any fill readable": (write_set, "declare_write_set", "if not isinstance(f, Fill):", "if False:", "unknown fill"),
    "a bool pad slot": (
        write_set,
        "declare_write_set",
        "or isinstance(pad_slot, bool)",
        "",
        "pad slot that is no int is accepted",
    ),
    "a second lock recorded": (
        pool,
        "relock",
        "if ((actor.id, i) in locks) is (event is Event.LOCK):",
        "if False:",
        "a second lock",
    ),
    "a bool id taken": (pool, "check_ids", "isinstance(i, bool) or ", "", "an id that is a bool"),
    "an alloc of no slot": (pool, "alloc", "if n < 1:", "if False:", "an alloc of no slot"),
    "unlocks that keep the lock": (
        pool,
        "relock",
        "return tuple(p for p in locks if p[0] != actor.id or p[1] not in ids)",
        "return locks",
        "leaves the lock recorded",
    ),
    "a lookup off by one relation": (
        table,
        "lookup",
        "table.next_state[state][event][relation]",
        "table.next_state[state][event][relation - 1]",
        "lookup(",
    ),
}


def test_the_check_holds():
    assert problems_of(declarations) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_check_fails_on_its_broken_variants(variant, monkeypatch):
    owner, name, old, new, words_ = VARIANTS[variant]
    broken(monkeypatch, owner, name, old, new)
    found = problems_of(declarations)
    assert any(words_ in p for p in found), found


def test_a_declare_that_refuses_the_declared_lifecycle_is_a_problem():
    def refusing(name, states, events, rules, initial=None):
        raise errors.DeclarationError("no")

    assert any("raised DeclarationError" in p for p in problems_of_call(lambda: declarations.problems(refusing)))


def problems_of_call(call) -> list[str]:
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - the edge's row turns a raise into a problem (problems_of)
        return [f"raised {type(e).__name__}"]


def test_words_pickle_an_illegal_step_and_name_its_row(monkeypatch):
    assert problems_of(words) == []
    broken(monkeypatch, errors, "_rebuild_step", "row=row", "row=row + 1")  # a round trip that moves the row
    assert any("IllegalStep after pickling" in p for p in problems_of(words))


def test_words_read_a_hand_made_illegal_step(monkeypatch):
    broken(monkeypatch, errors.IllegalStep, "__str__", 'return "illegal step"', "raise")
    assert any("IllegalStep" in p or "raised" in p for p in problems_of(words))
