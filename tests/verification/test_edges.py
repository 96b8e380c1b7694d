"""verify's edge checks (verification/edges/): each holds on the runtime as it is, and each
fails on broken variants of it: small edits of the runtime's source (`broken`), among them the
mutation campaign's survivors that the check was written to kill."""

from __future__ import annotations


import pytest
from source_edits import broken

from slotwarden.kernels import sample
from slotwarden.model import diagram, document, errors, free, palette
from slotwarden.runtime import config, guard, guarded_allocator, inputs, launch, pool, trace
from slotwarden.runtime.ledger import audit, batch, checks, ledger
from slotwarden.runtime.radix import node, tree
from slotwarden.runtime.scheduler import admission, launching, scheduler
from slotwarden.verification.edges import (
    admission_plan,
    audits,
    batch_lanes,
    conversions,
    free_lanes,
    documents,
    one_slot,
    scheduler_runs,
    trace_format,
    tree_integrity,
    words,
    write_set,
)
from slotwarden.verification.edges.job import EDGE_CHECKS, edge_row, problems_of
from slotwarden.verification.verify.jobs import Row


@pytest.mark.parametrize("name", list(EDGE_CHECKS))
def test_each_check_holds(name):
    row = edge_row(name, Row)
    assert row.ok, row.detail["problems"]


VARIANTS = {  # id -> (module whose problems() must see it, owner, function, old, new, words of a problem)
    "a batched step check blind to pad rows off the pad slot": (
        write_set,
        launch,
        "_faults",
        "padded & ((ids != pad) | (src != pad))",
        "padded & (ids != ids)",
        "steps: first",
    ),
    # mutation survivors (verification/reports/mutation-triage.txt)
    "trace header of another format read (trace.py NotEq_Eq:1)": (
        trace_format,
        trace,
        "parse_json",
        'obj["slotwarden_trace"] != FORMAT',
        'obj["slotwarden_trace"] == FORMAT',
        "format",
    ),
    "parser limit not a refused line (trace.py ExceptionReplacer:2)": (
        trace_format,
        trace,
        "parse_json",
        "except ValueError as exc:",
        "except ZeroDivisionError as exc:",
        "Exceeds",
    ),
    "ids below int64 on the fast path (inputs.py GtE_LtE:5)": (
        conversions,
        inputs,
        "ids",
        "min(value) >= ID_MIN",
        "min(value) <= ID_MIN",
        "ids below int64",
    ),
    "the pad slot's reason (checks.py Eq_Lt:13)": (
        words,
        checks.Checks,
        "_ids",
        "if bad == 0",
        "if bad < 0",
        "slot 0 is the pad slot",
    ),
    "steps counted two a step (launching.py; scheduler.py NumberReplacer:38 before it moved)": (
        scheduler_runs,
        launching.Launching,
        "_launch",
        'self._tally["steps"] += 1',
        'self._tally["steps"] += 2',
        "counters",
    ),
    "a leave of the running batch bumps generation by 2 (scheduler.py NumberReplacer:50)": (
        scheduler_runs,
        scheduler.Scheduler,
        "_leave",
        "req.generation += 1",
        "req.generation += 2",
        "one bump a leave",
    ),
    "a retraction bumps generation by 2 (admission.py NumberReplacer:40)": (
        scheduler_runs,
        admission.BatchBuilder,
        "_requeue",
        "req.generation += 1",
        "req.generation += 2",
        "one bump a leave",
    ),
    "a lone sample gets a prompt request (scheduler.py Gt_GtE:0)": (
        scheduler_runs,
        scheduler.Scheduler,
        "submit_n",
        "if n > 1:",
        "if n >= 1:",
        "submit_n(n=1",
    ),
    "the prompt request not marked shared (scheduler.py TrueWithFalse:0)": (
        scheduler_runs,
        scheduler.Scheduler,
        "submit_n",
        "lead.shared = True",
        "lead.shared = False",
        "results for",
    ),
    "the plan passes a session turn (admission.py ReplaceBreakWithContinue:3)": (
        admission_plan,
        admission.BatchBuilder,
        "take_fresh_slots",
        "req.session is not None:\n            break",
        "req.session is not None:\n            continue",
        "session turns between plain requests",
    ),
    # the escaped classes and other plain edits
    "the plan passes a candidate that does not fit": (
        admission_plan,
        admission.BatchBuilder,
        "take_fresh_slots",
        "if n > budget:\n            break",
        "if n > budget:\n            continue",
        "a short request behind one that does not fit",
    ),
    "the plan takes one more than the seats": (
        admission_plan,
        admission.BatchBuilder,
        "take_fresh_slots",
        "len(planned) >= min(seats, free)",
        "len(planned) > min(seats, free)",
        "seats and budget",
    ),
    "siblings share one seed": (
        scheduler_runs,
        scheduler.Scheduler,
        "submit_n",
        "sibling_seed(seed, i), rid",
        "sibling_seed(seed, 0), rid",
        "sibling 1",
    ),
    "a copy into a slot the actor does not hold": (
        words,
        pool.StatePool,
        "copy",
        'self._require_mine(dst_ids, actor, "copy into")',
        "pass",
        "IllegalCopy",
    ),
    "a trace line without its target": (
        trace_format,
        trace.TraceLine,
        "to_json",
        '"target": None if self.target == NOBODY else self.target',
        '"target": None',
        "unclean",
    ),
    "a trace line's ids parsed as one": (
        trace_format,
        trace,
        "parse",
        "(int(ids),) if ids.isdigit()",
        "(int(ids[0]),) if ids",
        "trace",
    ),
    "NOBODY accepted as an actor": (
        conversions,
        inputs,
        "actor",
        "if ident == NOBODY:",
        "if False:",
        "NOBODY as an actor",
    ),
    "a uint64 batch above int64 wrapped": (
        conversions,
        inputs,
        "ids",
        "dtype.itemsize == 8 and (arr > ID_MAX).any()",
        "False",
        "uint64 id above int64",
    ),
    "an illegal move's text without its owner": (
        words,
        errors.IllegalMove,
        "_describe",
        ", owner {owner}{lent}",
        "{lent}",
        "owner",
    ),
    "a long value rendered whole": (words, errors, "_size", "return len(value), unit", "return None", "long list"),
    "apply_one's hook never called": (
        one_slot,
        ledger.SlotLedger,
        "_move_one",
        "before_write(Batch(ids, keys, before, after))",
        "pass",
        "before_write saw",
    ),
    "apply_each's numpy path unchecked": (
        one_slot,
        ledger.SlotLedger,
        "apply_each",
        'if self.check == "strict":',
        "if False:",
        "raised ValueError",
    ),
    "a forward failure ends no request": (
        scheduler_runs,
        launching.Launching,
        "_fail",
        "if not req.done:",
        "if False:",
        "raised NotIdle",
    ),
    "the session reaper never closes": (
        scheduler_runs,
        scheduler.Scheduler,
        "_reap_sessions",
        "self._close_now(s)",
        "pass",
        "raised NotIdle",
    ),
    "run() loses what it gathered when it raises": (
        scheduler_runs,
        scheduler.Scheduler,
        "run",
        "self.outbox[:0] = results.values()",
        "pass",
        "lost a result",
    ),
    "a diagram that loses the last transition of each event": (
        documents,
        diagram,
        "_moves",
        "for t in transitions:",
        "for t in transitions[:-1]:",
        "the diagram's edges",
    ),
    "a seed-bug picture without its refused move": (
        documents,
        diagram,
        "mermaid_flow",
        "for r in refuse:",
        "for r in ():",
        "seed bug",
    ),
    "the lifecycle page drifts from the declaration": (
        documents,
        document,
        "lifecycle_markdown",
        'return "\\n".join(',
        'return "\\n\\n".join(',
        "docs/lifecycle.md",
    ),
    "ink by the wrong threshold": (documents, palette, "ink", ">= 140", ">= 10", "the ink on"),
    "a free mapping that accepts a borrower's free of a lent slot (model/free.py)": (
        free_lanes,
        free,
        "free_rules",
        "group in TOWARD_FREE",
        "group in TOWARD_FREE + (Group.SESSION_OWNED,)",
        "the seed bug: the borrower frees it: ok",
    ),
    "the compiled free lane keeps the engine's slot": (
        free_lanes,
        guarded_allocator.GuardedAllocator,
        "_free_one_move",
        "self.guard.allocator.free, free_index",
        "lambda ids: None, free_index",
        "compiled lane",
    ),
    "an owner left on a FREE slot unaudited": (
        audits,
        audit.Integrity,
        "audit",
        "if astray.size:",
        "if False:",
        "an owner on a FREE slot",
    ),
    "a FREE slot missing from the engine unaudited": (
        audits,
        guard.LedgerGuard,
        "audit",
        "if missing.size:",
        "if False:",
        "a FREE slot missing",
    ),
    "an engine's list alloc not given back": (
        audits,
        guard.LedgerGuard,
        "_refuse_shape",
        "self.allocator.free(torch.as_tensor(ids, dtype=torch.int64).reshape(-1))",
        "pass",
        "a list",
    ),
    "a conv window of no columns accepted": (
        audits,
        config.PoolConfig,
        "__post_init__",
        "if self.conv_kernel < 2:",
        "if self.conv_kernel < 1:",
        "conv_kernel=1",
    ),
    "fit counts the pad slot as a slot": (
        audits,
        config.PoolConfig,
        "fit",
        "budget_bytes // probe.bytes_per_slot() - 1",
        "budget_bytes // probe.bytes_per_slot()",
        "fit of",
    ),
    "the numpy lane keeps freed slots off the free list": (
        batch_lanes,
        batch.BatchPath,
        "_settle",
        "frees = self.has_free_list and event is not _ALLOC",
        "frees = False",
        "numpy",
    ),
    "tombstones pile up unchecked": (
        tree_integrity,
        node,
        "check_node",
        "if x.slot is None and len(x.children) < 2:",
        "if False:",
        "one child",
    ),
    "the slot index not checked": (
        tree_integrity,
        tree.RadixTree,
        "check",
        "if held != self._by_slot or",
        "if",
        "slot index",
    ),
    "the lock bound not enforced": (
        tree_integrity,
        tree.RadixTree,
        "lock",
        "x.locks >= self.max_readers",
        "x.locks > self.max_readers",
        "past the bound",
    ),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_check_fails_on_its_broken_variants(variant, monkeypatch):
    check, owner, name, old, new, words_ = VARIANTS[variant]
    broken(monkeypatch, owner, name, old, new)
    found = problems_of(check)
    assert any(words_ in p for p in found), found


def test_sibling_seed_is_the_kernels():
    assert scheduler.sibling_seed is sample.sibling_seed  # the variant above edits the call the check judges


def test_the_documents_check_kills_a_renumbered_property(monkeypatch):
    """registry.py NumberReplacer:37 (the rule number shown with locks_match's words)."""
    import dataclasses

    from slotwarden.model import registry

    renumbered = dataclasses.replace(registry.PROPERTIES["locks_match"], number=12)
    monkeypatch.setitem(registry.PROPERTIES, "locks_match", renumbered)
    assert any("docs/lifecycle.md differs" in p for p in problems_of(documents))
