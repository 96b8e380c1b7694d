"""The ledger's layout: nothing outside `runtime/ledger/` reads a private member of a ledger
(the pool, the guard and the harnesses use its public face), and every part of the ledger reads
only attributes declared where a reader finds them (`LedgerState`'s annotations, or a method of
one of the part's own bases)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from slotwarden.runtime.ledger import ledger_lane, audit, batch, checks, ledger, locks, queries, raw, ring, slots, state

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("runtime", "kernels", "model", "verification", "slotwarden")
OUTSIDE = ("runtime/ledger/", "verification/mutants/seeded.py")  # the ledger itself; seeded bugs patch it


def _ends_in_ledger(node: ast.AST, aliases: set) -> bool:
    """Whether `node` names a ledger: `ledger`, `x.ledger`, `x._ledger`, or a name bound to one."""
    if isinstance(node, ast.Name):
        return node.id in ("ledger", "_ledger") or node.id in aliases
    return isinstance(node, ast.Attribute) and node.attr in ("ledger", "_ledger")


def private_reads(source: str) -> list[tuple[int, str]]:
    """(line, text) of every `<a ledger>._member` in `source` (dunders aside)."""
    tree = ast.parse(source)
    aliases = set()
    for node in ast.walk(tree):  # names bound to a ledger: `led = self.ledger`
        if isinstance(node, ast.Assign) and _ends_in_ledger(node.value, set()):
            aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return [
        (node.lineno, ast.unparse(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and _ends_in_ledger(node.value, aliases)
    ]


def test_the_scan_finds_a_private_read():
    code = "def f(pool):\n    led = pool.ledger\n    return pool.ledger._count, led._ring, ledger._here()\n"
    assert [text for _, text in private_reads(code)] == ["pool.ledger._count", "led._ring", "ledger._here"]
    assert private_reads("def f(pool):\n    return pool.ledger.check_thread(), pool._ledger_ok\n") == []


def test_nothing_outside_the_ledger_reads_its_private_members():
    found = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(OUTSIDE):
                continue
            found += [f"{rel}:{line}: {text}" for line, text in private_reads(path.read_text())]
    assert not found, "private ledger members read outside runtime/ledger/:\n" + "\n".join(found)


PARTS = [
    ring.FreeRing,
    checks.Checks,
    slots.SlotPath,
    batch.BatchPath,
    queries.Queries,
    locks.Locks,
    audit.Integrity,
    raw.RawMoves,
    ledger.SlotLedger,
]


def _declared(cls) -> set:
    names = set(dir(cls))
    for base in cls.__mro__:
        names |= set(getattr(base, "__annotations__", {}))
    return names


def _self_attributes(cls) -> set:
    tree = ast.parse(inspect.getsource(cls))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
    }


@pytest.mark.parametrize("part", PARTS, ids=lambda c: c.__name__)
def test_each_part_reads_only_what_its_bases_declare(part):
    assert issubclass(part, state.LedgerState)
    undeclared = _self_attributes(part) - _declared(part)
    assert not undeclared, f"{part.__name__} reads {sorted(undeclared)}, declared in none of its bases"


def test_the_state_declares_every_attribute_it_sets():
    made = ledger.SlotLedger(4)
    bound = (
        set(ledger_lane.BOUND) if ledger_lane.is_bound(made) else set()
    )  # the lane's methods, bound over the class's
    assert set(vars(made)) - bound == set(state.LedgerState.__annotations__)
