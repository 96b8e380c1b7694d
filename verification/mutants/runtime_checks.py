"""The declaration mutants' runtime check: a mutant counts as equivalent only if the runtime
half of every history mutant gives the same verdict under it.

The runtime refuses moves by event name, so a rule copied to another state under its own event
(FINISH also from LENT) can let a buggy scheduler's call through that the checks over the model
alone call harmless. Each history mutant's runtime half (its Hypothesis machine hunting the
buggy scheduler) runs once under the declaration, and its failing example is kept with the
(state, event) pairs its run asked the ledger about. A declaration mutant that changes one of
those pairs has the example replayed on a runtime whose ledger obeys the mutant
(`runtime_declared_as`): a different verdict (no error, or another error type) kills it. The
liveness mutants are not replayed: their examples end only at the machine's step limit.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from slotwarden.model.declaration import Lifecycle, declare
from slotwarden.model.lifecycle import EVENTS, STATES
from slotwarden.model.vocabulary import Event, State
from slotwarden.runtime.ledger.state import LedgerState
from slotwarden.verification.machines.campaign import CampaignResult, replay
from slotwarden.verification.mutants.equivalent import EQUIVALENT, KILLED_AT_RUNTIME
from slotwarden.verification.mutants.fast_checks import changed


@contextmanager
def runtime_declared_as(lifecycle: Lifecycle):
    """Within the block, every ledger built without naming its lifecycle (the scheduler's pool
    included) obeys `lifecycle` instead of the declaration."""
    defaults = LedgerState.__init__.__kwdefaults__
    saved = defaults["lifecycle"]
    defaults["lifecycle"] = lifecycle
    try:
        yield
    finally:
        defaults["lifecycle"] = saved


@contextmanager
def _asking(into: set):
    """Record the (state, event) pair of every slot a ledger move names, read before the move,
    through every public move of `SlotLedger` (an ALLOC asks about FREE; a FENCE about each
    state that waits for one)."""
    from slotwarden.runtime.ledger.ledger import SlotLedger

    saved = {name: getattr(SlotLedger, name) for name in ("apply", "apply_one", "apply_each", "alloc", "alloc_each")}
    saved["fence"] = SlotLedger.fence

    def states(ledger, ids) -> list:
        try:
            return [State(int(ledger.cols.state[i])) for i in np.asarray(ids, dtype=np.int64).reshape(-1)]
        except (IndexError, ValueError, TypeError):  # an id the ledger refuses: its refusal is the verdict
            return []

    def on_ids(name):
        def noting(self, event, ids, *a, **kw):
            into.update((s, Event(event)) for s in states(self, [ids] if name == "apply_one" else ids))
            return saved[name](self, event, ids, *a, **kw)

        return noting

    def on_alloc(name):
        def noting(self, *a, **kw):
            into.add((State.FREE, Event.ALLOC))
            return saved[name](self, *a, **kw)

        return noting

    def on_fence(self, *a, **kw):
        into.update((State(s), Event.FENCE) for s in self._waits)
        return saved["fence"](self, *a, **kw)

    for name in ("apply", "apply_one", "apply_each"):
        setattr(SlotLedger, name, on_ids(name))
    for name in ("alloc", "alloc_each"):
        setattr(SlotLedger, name, on_alloc(name))
    SlotLedger.fence = on_fence
    try:
        yield
    finally:
        for name, method in saved.items():
            setattr(SlotLedger, name, method)


def _kind(error: str) -> str:
    """A replay's verdict: the error's type and first line (where the bug was caught), or
    'passes'."""
    return error or "passes"


class Witness(NamedTuple):
    name: str  # the history mutant
    machine: type  # its Hypothesis machine
    blob: str  # its failing example (`campaign.replay`)
    steps: int  # the step budget the example was found with
    verdict: str  # the error type the example raises under the declaration
    asked: frozenset  # the (state, event) pairs the example's run asked the ledger about


def witness(name: str, machine: type, found: CampaignResult, steps: int) -> Witness | None:
    """`found`'s failing example as a witness (None for a machine that passed): replayed once
    under the declaration, noting what it asks the ledger."""
    if found.passed or not found.blob:
        return None
    asked: set = set()
    with _asking(asked):
        again = replay(machine, found.blob, steps)
    return Witness(name, machine, found.blob, steps, _kind(again.error), frozenset(asked))


def rejudge(w: Witness, lifecycle: Lifecycle) -> str:
    """'' when `w`'s example gives the same verdict on a runtime obeying `lifecycle` (or asks
    about no pair the mutant changes); otherwise how it differs."""
    if not set(changed(lifecycle)) & w.asked:
        return ""
    with runtime_declared_as(lifecycle):
        r = replay(w.machine, w.blob, w.steps)
    if _kind(r.error) == w.verdict:
        return ""
    now = _kind(r.error)
    return f"the runtime half of history mutant {w.name} gives {now} under it, {w.verdict} under the declaration"


class Rejudged(NamedTuple):
    replayed: int  # listed mutants whose changed pairs the witness asks about
    not_equivalent: dict  # {listed equivalent: how the witness's verdict differs under it}
    unproved: tuple  # the mutants said to be killed by this witness (`KILLED_AT_RUNTIME`) it does not kill

    @property
    def ok(self) -> bool:
        return not self.not_equivalent and not self.unproved


@lru_cache(maxsize=1)
def _listed() -> tuple:
    from slotwarden.verification.mutants.declaration import mutants

    named = set(EQUIVALENT) | set(KILLED_AT_RUNTIME)
    return tuple((m.name, declare(m.name, STATES, EVENTS, m.rules)) for m in mutants() if m.name in named)


def rejudge_listed(name: str, w: Witness | None) -> Rejudged:
    """History mutant `name`'s witness `w` replayed under every mutant listed as equivalent and
    every one said to be killed by it."""
    claims = tuple(m for m, by in KILLED_AT_RUNTIME.items() if by == name)
    if w is None:
        return Rejudged(0, {}, claims)
    found = {m: rejudge(w, lc) for m, lc in _listed() if m in EQUIVALENT or m in claims}
    replayed = sum(bool(set(changed(lc)) & w.asked) for m, lc in _listed() if m in found)
    wrong = {m: how for m, how in found.items() if how and m in EQUIVALENT}
    return Rejudged(replayed, wrong, tuple(m for m in claims if not found[m]))
