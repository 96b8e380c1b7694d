"""The three derived forms of the declaration must agree on every move.

For every state, event, actor kind and relation the actor can stand in to a slot of that state
(and, for events with a target, with and without one) this builds a representative slot and
actor and asks the `transitions` machine, `step` and the compiled table what happens. All three
must give the same verdict (legal or not) and the same next record.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from slotwarden.model.declaration import Lifecycle, Source, relation_of, relations_for
import torch

from slotwarden.model.errors import IllegalMove, LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.machine import SlotMachine
from slotwarden.model.step import step
from slotwarden.model.table import ILLEGAL, Table, compile_table
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Actor, ActorKind, Event, Relation, Slot, State
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.verification.machines import paths

OWNER_ID, BORROWER_ID, STRANGER_ID, TARGET_ID, FENCE_AT, EPOCH = 1, 2, 9, 3, 5, 7


class Case(NamedTuple):
    slot: Slot
    event: Event
    actor: Actor
    relation: Relation
    target: int


class Verdict(NamedTuple):
    case: Case
    machine: Slot | None  # None: illegal
    step: Slot | None
    table: Slot | None

    @property
    def agrees(self) -> bool:
        return self.machine == self.step == self.table


LOCKS = {Relation.READER: 1, Relation.FULL: MAX_READERS, Relation.PINNED: 1}
"""The lock count of a shared slot that puts its actor in each relation (others: none)."""


def representative(lifecycle: Lifecycle, state: State, relation: Relation = Relation.NONE) -> Slot:
    spec = lifecycle.spec(state)
    return Slot(
        state,
        OWNER_ID if spec.owner is not None else NOBODY,
        BORROWER_ID if spec.lent else NOBODY,
        FENCE_AT if spec.fenced else 0,
        LOCKS.get(relation, 0) if spec.shared else 0,
    )


def actor_for(kind: ActorKind, relation: Relation) -> Actor:
    ids = {
        Relation.OWNER: OWNER_ID,
        Relation.BORROWER: BORROWER_ID,
        Relation.NONE: STRANGER_ID,
        Relation.DUE: FENCE_AT,
        Relation.EARLY: FENCE_AT - 1,
        Relation.READER: STRANGER_ID,
        Relation.FULL: STRANGER_ID,
        Relation.PINNED: OWNER_ID,
    }
    return Actor(kind, ids[relation])


def cases(lifecycle: Lifecycle = LIFECYCLE) -> Iterator[Case]:
    """Every (state, event, actor kind, relation[, target present]) combination."""
    for spec in lifecycle.states:
        for event in Event:
            targets = (TARGET_ID, NOBODY) if lifecycle.event(event).target is not None else (NOBODY,)
            for kind in ActorKind:
                for relation in relations_for(spec, kind):
                    slot = representative(lifecycle, spec.state, relation)
                    actor = actor_for(kind, relation)
                    assert relation_of(spec, slot, actor) is relation
                    for target in targets:
                        yield Case(slot, event, actor, relation, target)


def by_table(table: Table, case: Case) -> Slot | None:
    """The next record as a batched kernel computes it from the compiled table."""
    s, e, a = case.slot.state, case.event, case.actor
    if table.actor_kind[e] != a.kind or (table.has_target[e] and case.target < 0):
        return None
    code = table.next_state[s][e][case.relation]
    if code == ILLEGAL:
        return None

    def field(column, old, cleared):
        return {
            Source.KEEP: old,
            Source.ACTOR: a.id,
            Source.TARGET: case.target,
            Source.EPOCH: EPOCH,
            Source.CLEAR: cleared,
        }[Source(column[s][e][case.relation])]

    return Slot(
        State(code),
        field(table.owner_from, case.slot.owner, NOBODY),
        field(table.borrower_from, case.slot.borrower, NOBODY),
        field(table.fence_from, case.slot.fence, 0),
        case.slot.readers + {Source.INC: 1, Source.DEC: -1}.get(Source(table.readers_from[s][e][case.relation]), 0)
        if Source(table.readers_from[s][e][case.relation]) is not Source.CLEAR
        else 0,
    )


def _or_none(fn) -> Slot | None:
    try:
        return fn()
    except IllegalMove:
        return None


def judge(lifecycle: Lifecycle = LIFECYCLE) -> list[Verdict]:
    """The verdict of each derived form on every case."""
    table = compile_table(lifecycle)
    verdicts = []
    for case in cases(lifecycle):
        machine = SlotMachine(lifecycle, case.slot)
        verdicts.append(
            Verdict(
                case,
                _or_none(lambda: machine.fire(case.event, case.actor, case.target, EPOCH)),
                _or_none(lambda: step(case.slot, case.event, case.actor, case.target, EPOCH, lifecycle)),
                by_table(table, case),
            )
        )
    return verdicts


# -- the runtime's own code path -----------------------------------------------------------------
class RuntimeVerdict(NamedTuple):
    """What a real `SlotLedger` did with one case, next to what `step()` says."""

    case: Case
    check: str  # "strict" or "off"
    free_list: bool  # the pool's ledger (its own free list) or the guard's (no free list)
    model: Slot | None  # None: illegal
    runtime: Slot | None  # None: refused (strict) or marked ILLEGAL by the table (off)
    problem: str  # "" when the runtime did what the model says
    path: str = "slot"  # the ledger's path: per-slot ("slot"), as built ("compiled"), numpy ("vector"), "python"

    @property
    def agrees(self) -> bool:
        return not self.problem


_PATHS_DISAGREE = object()  # a model verdict no move has: the runtime's own paths disagreed

PATHS = {"slot": "per-slot", "compiled": "compiled", "vector": "numpy", "python": "compiled python"}
"""The ledger's code paths (`paths.PATHS`), by the names the verdicts use: the per-slot path,
the ledger as built (its lane, `runtime.ledger.ledger_lane`, then its compiled move), the numpy
kernel (`look_up`/`write`), and the Python over the compiled move without the lane."""


def _runtime_ledger(case: Case, check: str, free_list: bool, make, path: str = "slot"):
    """A one-slot ledger whose slot 1 holds `case.slot`, `EPOCH` steps launched and finished
    (a release waits for step `EPOCH`; a fence of any step up to it is allowed)."""
    ledger = make(1, check=check, free_list=free_list)
    paths.use(ledger, PATHS[path])
    for _ in range(EPOCH):
        ledger.launch()
    ledger.fence()
    ledger.plant(1, case.slot)  # on the free list exactly when FREE
    return ledger


def by_runtime(case: Case, check: str, free_list: bool, make=None, path: str = "slot") -> RuntimeVerdict:
    """Run `case` through a real `SlotLedger` (`make`, default `SlotLedger`): the pool's
    `alloc` for an ALLOC with a free list, `apply` (the compiled per-event tables and
    `runtime.ledger.transition.look_up`/`write`) for everything else. Compare next state, owner,
    borrower, fence, lock count and the verdict with `step()`; a refusal must change nothing, and the
    free list must stay the set of FREE slots."""
    make = make or SlotLedger
    model = _or_none(lambda: step(case.slot, case.event, case.actor, case.target, EPOCH))
    ledger = _runtime_ledger(case, check, free_list, make, path)
    before = ledger.snapshot()
    refused = None
    try:
        if case.event is Event.ALLOC and free_list:
            if case.slot.state is State.FREE:
                got = ledger.alloc(1, case.actor)
                refused = None if got is not None and got.tolist() == [1] else "alloc handed out no slot 1"
            else:  # the pool allocs by count from its free list: a held slot cannot be named
                problem = "" if model is None else "legal alloc of a held slot"
                return RuntimeVerdict(case, check, free_list, model, None, problem, path)
        else:
            ledger.apply(case.event, [1], case.actor, case.target)
    except LifecycleError as exc:
        refused = f"{type(exc).__name__}: {exc.reason if hasattr(exc, 'reason') else exc}".splitlines()[0]
    except RuntimeError as exc:  # the ledger's paths disagree with each other (a refusal, and a finding)
        refused = f"RuntimeError: {exc}"
        model = _PATHS_DISAGREE
    code = int(ledger.cols.state[1])
    runtime = None if refused or code == ILLEGAL else ledger.record(1)
    problems = []
    if model is _PATHS_DISAGREE:
        problems.append(f"runtime paths disagree ({refused})")
        model = None
    elif (model is None) != (runtime is None):
        problems.append(
            f"model {'refuses' if model is None else 'allows'}, "
            f"runtime {'refuses (' + refused + ')' if refused else 'allows'}"
        )
    elif model is not None and model != runtime:
        problems.append(f"model gives {model}, runtime {runtime}")
    if refused:
        after = ledger.snapshot()
        if any(not _same(before[k], after[k]) for k in before):
            problems.append("a refused move changed the ledger")
    elif runtime is not None and check == "strict":
        audit = ledger.audit()
        if not audit.free_list_ok:
            problems.append("; ".join(audit.problems))
    return RuntimeVerdict(case, check, free_list, model, runtime, "; ".join(problems), path)


def _same(a, b) -> bool:
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def runtime_cases(lifecycle: Lifecycle = LIFECYCLE) -> Iterator[tuple[Case, str, bool]]:
    """Every case with check strict (pool and guard ledgers). With check off the ledger trusts
    the caller on who fires (actor kind, a target present), so only the cases where the
    caller is right are compared: the table must still give the model's verdict."""
    for case in cases(lifecycle):
        for free_list in (True, False):
            yield case, "strict", free_list
            spec = lifecycle.event(case.event)
            if case.actor.kind is spec.actor and not (spec.target is not None and case.target < 0):
                yield case, "off", free_list


def judge_runtime(make=None, lifecycle: Lifecycle = LIFECYCLE) -> list[RuntimeVerdict]:
    """The runtime's verdict on every case (see `by_runtime`), down each of the ledger's paths."""
    return [
        by_runtime(case, check, free_list, make, path)
        for case, check, free_list in runtime_cases(lifecycle)
        for path in PATHS
    ]
