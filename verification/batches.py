"""The runtime agreement over many-slot batches: `SlotLedger.apply` against `step()` slot by slot.

For every declared rule but ALLOC on the pool's ledger (it takes a count there), the rule's
representative record (`agreement.representative`) is planted on a ledger of `CAPACITY` slots
and a batch larger than the ledger's per-slot size is fired on it by the rule's actor, down
each of the ledger's batched paths (the ledger as built, its lane first; the Python over the
compiled move in runs and slot by slot, where it is built; and numpy): one run of consecutive slots, several runs,
a scattered order, a run with one slot of another owner, and a run with one slot in each
other state. The runtime must
give what `step()` gives applied slot by slot: the same final columns of every slot, or, when
`step()` refuses any slot, a typed refusal (a `LifecycleError`) with nothing changed.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

import numpy as np

from slotwarden.model.errors import IllegalMove, LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.step import step
from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.verification.agreement import EPOCH, TARGET_ID, _same, actor_for, representative
from slotwarden.verification.machines import paths

CAPACITY = 24
RUN = tuple(range(3, 11))
SHAPES = {  # name -> the batch's ids (every one holds the rule's record, but for a mixed run)
    "one run": RUN,
    "several runs": (2, 3, 4, 5, 9, 10, 11, 12, 17, 18, 19, 20),
    "scattered": (19, 3, 11, 7, 22, 1, 14),
}
ODD = 7  # the slot of a mixed run that differs
OTHER_OWNER = 4  # its owner in a run mixed in owner (no actor of `agreement.actor_for` has id 4)
BATCH_PATHS = ("compiled", "compiled python", "compiled slot by slot", "numpy")


class BatchCase(NamedTuple):
    shape: str  # "one run", "several runs", "scattered", "mixed owner", "mixed state: S"
    records: dict  # slot -> its planted record (the others FREE)
    ids: tuple
    event: Event
    actor: Actor
    target: int


class BatchVerdict(NamedTuple):
    case: BatchCase
    path: str
    free_list: bool
    problem: str  # "" when the runtime did what step() slot by slot does

    @property
    def agrees(self) -> bool:
        return not self.problem

    def __str__(self) -> str:
        c = self.case
        return (
            f"{c.event.name} by {c.actor} on {c.shape} {list(c.ids)} [{self.path}, "
            f"{'pool' if self.free_list else 'guard'}]: {self.problem}"
        )


def batch_cases(free_list: bool, lifecycle=LIFECYCLE) -> Iterator[BatchCase]:
    for spec in lifecycle.states:
        for rule in lifecycle.rules_from(spec.state):
            if rule.event is Event.ALLOC and free_list:
                continue
            kind = lifecycle.event(rule.event).actor
            actor, record = actor_for(kind, rule.by), representative(lifecycle, spec.state, rule.by)
            target = TARGET_ID if lifecycle.event(rule.event).target is not None else NOBODY
            for shape, ids in SHAPES.items():
                yield BatchCase(shape, dict.fromkeys(ids, record), ids, rule.event, actor, target)
            if record.owner != NOBODY:
                mixed = dict.fromkeys(RUN, record) | {ODD: record._replace(owner=OTHER_OWNER)}
                yield BatchCase("mixed owner", mixed, RUN, rule.event, actor, target)
            for other in lifecycle.states:
                if other.state is not spec.state:
                    odd = representative(lifecycle, other.state, rule.by)
                    mixed = dict.fromkeys(RUN, record) | {ODD: odd}
                    yield BatchCase(f"mixed state: {other.state.name}", mixed, RUN, rule.event, actor, target)


def expected(case: BatchCase) -> dict | None:
    """Every slot's record after `step()` slot by slot, or None if it refuses any slot."""
    after = {}
    try:
        for s in case.ids:
            after[s] = step(case.records[s], case.event, case.actor, case.target, EPOCH, LIFECYCLE, s)
    except IllegalMove:
        return None
    return after


def by_batch(case: BatchCase, path: str, free_list: bool, make=None) -> BatchVerdict:
    ledger = (make or SlotLedger)(CAPACITY, check="strict", free_list=free_list)
    paths.use(ledger, path)
    for _ in range(EPOCH):
        ledger.launch()
    ledger.fence()
    for s, rec in case.records.items():
        ledger.plant(s, rec)
    want = expected(case)
    before, records = ledger.snapshot(), _records(ledger)
    try:
        ledger.apply(case.event, np.array(case.ids, dtype=np.int64), case.actor, case.target)
    except LifecycleError as exc:
        if want is not None:
            return BatchVerdict(case, path, free_list, f"step() allows it, the runtime refuses ({type(exc).__name__})")
        after = ledger.snapshot()
        changed = [k for k in before if not _same(before[k], after[k])]
        return BatchVerdict(case, path, free_list, f"a refused batch changed {changed}" if changed else "")
    except RuntimeError as exc:  # the compiled move and the numpy path disagree
        return BatchVerdict(case, path, free_list, f"the runtime's paths disagree: {exc}")
    if want is None:
        return BatchVerdict(case, path, free_list, "step() refuses a slot of it, the runtime moved the batch")
    got, want = _records(ledger), records | want
    wrong = [f"slot {s}: step() gives {want[s]}, runtime {got[s]}" for s in got if got[s] != want[s]]
    audit = ledger.audit()
    problems = wrong[:3] + ([] if audit.free_list_ok else list(audit.problems))
    return BatchVerdict(case, path, free_list, "; ".join(problems))


def _records(ledger) -> dict:
    return {s: ledger.record(s) for s in range(1, CAPACITY + 1)}


def judge_batches(make=None) -> list[BatchVerdict]:
    """Every batch case down every batched path of the pool's and the guard's ledgers."""
    available = BATCH_PATHS if SlotLedger(1).mover is not None else ("numpy",)
    return [
        by_batch(case, path, free_list, make)
        for free_list in (True, False)
        for case in batch_cases(free_list)
        for path in available
    ]


def covers(verdicts: list[BatchVerdict]) -> dict:
    """How many cases of each kind were judged, and how many of them the model refused."""
    out: dict = {}
    for v in verdicts:
        kind = v.case.shape.split(":")[0]
        n, refused = out.get(kind, (0, 0))
        out[kind] = (n + 1, refused + (expected(v.case) is None))
    return out
