"""The declaration mutants' runtime check: a listed equivalent mutant under which a history
mutant's runtime half gives another verdict is not equivalent, and the row says so."""

import pytest

from slotwarden.model.declaration import declare
from slotwarden.model.errors import IllegalMove
from slotwarden.model.lifecycle import EVENTS, LIFECYCLE, STATES
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.machines.scheduler import machine_for
from slotwarden.verification.mutants import equivalent, runtime_checks
from slotwarden.verification.mutants.declaration import mutants
from slotwarden.verification.mutants.runtime import LentRollbackFrees, RollbackFreesAdmitted, RollbackFreesAdmittedTurn

FINISH_FROM_LENT = "LENT_RUNNING --FINISH [BORROWER]: also from LENT"
ROLLBACK_FROM_RUNNING = "LENT --ROLLBACK [BORROWER]: also from LENT_RUNNING"
TRULY_EQUIVALENT = "TAKEN --ADMIT [OWNER]: fence from CLEAR"


def _lifecycle(name):
    (m,) = [m for m in mutants() if m.name == name]
    return declare(m.name, STATES, EVENTS, m.rules)


@pytest.fixture(scope="module")
def witnesses():
    out = {}
    for name, cls in (
        ("lent_rollback_frees", LentRollbackFrees),
        ("rollback_frees_admitted_turn", RollbackFreesAdmittedTurn),
        ("rollback_frees_admitted", RollbackFreesAdmitted),
    ):
        machine = machine_for(cls)
        found = run_machine(name, machine, Budget(500, 40), 0, shrink=False)
        out[name] = runtime_checks.witness(name, machine, found, 40)
    return out


def test_a_ledger_obeys_the_mutant_only_inside_the_block():
    mutant = _lifecycle(FINISH_FROM_LENT)
    with runtime_checks.runtime_declared_as(mutant):
        assert SlotLedger(2).lifecycle is mutant
    assert SlotLedger(2).lifecycle is LIFECYCLE


def test_each_claimed_kill_is_borne_out_by_its_witness(witnesses):
    for mutant, by in equivalent.KILLED_AT_RUNTIME.items():
        w = witnesses[by]
        assert w.verdict.startswith("IllegalMove")
        assert runtime_checks.rejudge(w, _lifecycle(mutant)), mutant
        assert runtime_checks.rejudge_listed(by, w).ok


def test_the_witness_is_the_same_under_a_truly_equivalent_mutant(witnesses):
    for w in witnesses.values():
        assert runtime_checks.rejudge(w, _lifecycle(TRULY_EQUIVALENT)) == ""


def test_a_mutant_listed_as_equivalent_that_a_witness_kills_fails_the_row(witnesses, monkeypatch):
    """The old list had FINISH also from LENT as equivalent: the seed bug's witness refutes it."""
    monkeypatch.setitem(equivalent.EQUIVALENT, FINISH_FROM_LENT, "the same move under another event's name")
    monkeypatch.delitem(equivalent.KILLED_AT_RUNTIME, FINISH_FROM_LENT)
    runtime_checks._listed.cache_clear()
    try:
        r = runtime_checks.rejudge_listed("lent_rollback_frees", witnesses["lent_rollback_frees"])
    finally:
        runtime_checks._listed.cache_clear()
    assert not r.ok and list(r.not_equivalent) == [FINISH_FROM_LENT]


def test_a_false_claim_of_a_runtime_kill_fails_the_row(witnesses, monkeypatch):
    monkeypatch.setitem(equivalent.KILLED_AT_RUNTIME, TRULY_EQUIVALENT, "rollback_frees_admitted_turn")
    runtime_checks._listed.cache_clear()
    try:
        r = runtime_checks.rejudge_listed("rollback_frees_admitted_turn", witnesses["rollback_frees_admitted_turn"])
    finally:
        runtime_checks._listed.cache_clear()
    assert r.unproved == (TRULY_EQUIVALENT,)


def test_under_the_mutant_the_seed_bugs_finish_goes_through():
    """Why the runtime half differs: it refuses by event name."""

    def lent_slot(ledger):
        (slot,) = ledger.alloc(1, Actor.request(1)).tolist()
        ledger.apply(Event.ADMIT, [slot], Actor.request(1))
        ledger.apply(Event.PARK, [slot], Actor.request(1), target=0)
        ledger.apply(Event.LEND, [slot], Actor.session(0), target=2)
        return slot

    plain = SlotLedger(4)
    slot = lent_slot(plain)
    with pytest.raises(IllegalMove):
        plain.apply(Event.FINISH, [slot], Actor.request(2))
    with runtime_checks.runtime_declared_as(_lifecycle(FINISH_FROM_LENT)):
        mutated = SlotLedger(4)
    slot = lent_slot(mutated)
    mutated.apply(Event.FINISH, [slot], Actor.request(2))
