"""The edge checks as rows of `slotwarden verify` (stage "edges"): one row per check, failing
with its first problems named."""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from slotwarden.verification.edges import (
    admission_plan,
    audits,
    batch_lanes,
    conversions,
    declarations,
    documents,
    free_lanes,
    free_paths,
    guard_step,
    ledger_fast_paths,
    ledger_paths,
    ledger_records,
    one_slot,
    scheduler_paths,
    scheduler_runs,
    step_words,
    trace_format,
    tree_integrity,
    words,
    write_set,
)

EDGE_CHECKS = {  # name -> (module, what its row says)
    "trace format": (
        trace_format,
        "runtime traces replay clean; lines and header round-trip; {n} bad lines refused by line and fault",
    ),
    "conversions": (
        conversions,
        "{n} ids, actors, targets, counts, steps at their edges: converted, or refused in words, nothing changed",
    ),
    "one-slot lanes": (
        one_slot,
        "apply_one (compiled, hooked, per-slot) and apply_each (compiled, numpy) = apply, move by move",
    ),
    "batch lanes": (
        batch_lanes,
        "many-slot batches and fences: compiled = numpy = batched numpy = runs from 2, call by call",
    ),
    "free lanes": (
        free_lanes,
        "the drop-in allocator: compiled = numpy lane, frees by the free rule, refusals change nothing",
    ),
    "free paths": (
        free_paths,
        "the drop-in's lane bound (subclasses keep theirs); usual frees of 1 and 3 skip the general path; "
        "undeclared states refused; a fence hands this free's slots first, in order",
    ),
    "refusals in words": (
        words,
        "illegal moves, copies and bad ids name slot, state, owner, event and actor; errors pickle",
    ),
    "scheduler runs": (
        scheduler_runs,
        "counters = steps made; a generation bump a leave; run() and NotIdle; sampling ids, seeds and one prefill; "
        "failed steps; session state",
    ),
    "audits": (
        audits,
        "ledger and guard audits flag each broken ledger and lying engine; engine allocs and configs refused",
    ),
    "admission plan": (
        admission_plan,
        "take_fresh_slots = the loop alone: same reports, slots and results, step by step",
    ),
    "documents": (documents, "the diagrams draw exactly the rules; docs/ is what the declaration generates"),
    "tree integrity": (
        tree_integrity,
        "check() passes on built trees and flags {n} broken ones; refusals typed and named",
    ),
    "ledger paths": (
        ledger_paths,
        "compiled move in use where built; allocs of n; no free list kept; bad ids first; lock record; words; configs",
    ),
    "write set": (
        write_set,
        "check_step refuses what the model refuses, at its row and slot, on {n} steps; accepted ones keep the six",
    ),
    "model refusals": (
        declarations,
        "{n} malformed lifecycles and write sets refused in words; the abstract pool's bad moves; lookup = rules",
    ),
    "ledger fast paths": (
        ledger_fast_paths,
        "view ids read as copies; early-fence words; corrupt free list refused; interrupted allocs refuse after; "
        "runs from one slot; mixed look-ups keep FULL and per-slot fences; kernel without a state/event word",
    ),
    "ledger records": (
        ledger_records,
        "audit names 8 undeclared, leaks' last events; twice-named slot; long lock batch; empty state_of; "
        "recorder seqs, depth, actors; stray fields kept on every lane; tables read-only; kernel codes by name; "
        "records read back in one form",
    ),
    "step and words": (
        step_words,
        "declare takes State members; values cut at 60; step rows' actor and holder; check_step on each lane: "
        "twice-written, empty, float ids, no warnings, pad-only write sets; 300 actor ids; long batches by length; "
        "history; loans; properties on hand-built moves",
    ),
    "scheduler paths": (
        scheduler_paths,
        "pool defaults; cache stats; tree bound > 256, evicted inner nodes, edge words; SIGINT at step's boundary; "
        "decode failure; a victim that frees a slot; pool faults = fault-free run; captured sizes; request identity",
    ),
    "guard step": (
        guard_step,
        "GuardedAllocator.check_step refuses what the model refuses, at its row and slot, on {n} steps",
    ),
}
SIZES = {
    "trace format": lambda: len(trace_format.BAD_LINES) + len(trace_format.BAD_HEADERS),
    "conversions": lambda: len(conversions.CASES),
    "tree integrity": lambda: len(tree_integrity.BREAKS),
    "write set": lambda: write_set.STEPS,
    "guard step": lambda: guard_step.STEPS,
    "model refusals": lambda: len(declarations.FAULTS) + len(declarations.ROW_FAULTS),
}


def problems_of(module) -> list[str]:
    """`module.problems()`; a check that raises has found a problem: the exception, with where."""
    try:
        return module.problems()
    except Exception as e:  # noqa: BLE001 (a runtime that raises where the check expected an answer)
        where = traceback.extract_tb(e.__traceback__)[-1]
        return [f"raised {type(e).__name__}: {str(e)[:200]} (at {Path(where.filename).name}:{where.lineno})"]


def edge_row(name: str, row: type):
    """The row of check `name` (verify's `Row` type is `row`)."""
    start = time.perf_counter()
    module, text = EDGE_CHECKS[name]
    found = problems_of(module)
    text = text.format(n=SIZES.get(name, lambda: 0)())
    if found:
        text = f"FAILED ({len(found)}): " + "; ".join(found[:2])
    return row("edges", name, not found, time.perf_counter() - start, text[:300], {"problems": found[:20]})
