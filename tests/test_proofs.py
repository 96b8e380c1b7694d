"""CrossHair confirms every contracted function of the model, and finds the real bug when the
lifecycle is declared wrong (a rolled-back lent slot going to FREE, as in SGLang PR 21404)."""

import dataclasses

import pytest

from slotwarden.model import proofs
from slotwarden.model.declaration import CLEAR, declare
from slotwarden.model.lifecycle import EVENTS, RULES, STATES
from slotwarden.model.vocabulary import Event, State
from slotwarden.verification.crosshair_proofs import prove

TIMEOUT = 300.0


@pytest.mark.parametrize("name", list(proofs.PROOFS))
def test_every_proof_is_confirmed_over_all_paths(name):
    result = prove(name, timeout=TIMEOUT)
    assert result.verdict == "CONFIRMED", result.message
    assert result.message == "Confirmed over all paths."


def wrong_lifecycle():
    """The lifecycle with the bug of PR 21404: a rolled-back lent slot goes back to FREE."""
    rules = tuple(
        dataclasses.replace(r, dest=State.FREE, effect=CLEAR)
        if (r.source, r.event) == (State.LENT, Event.ROLLBACK)
        else r
        for r in RULES
    )
    return declare("lent rollback frees", STATES, EVENTS, rules)


def test_crosshair_finds_the_freed_lent_slot_as_an_event_sequence():
    result = prove("session_kept_over_runs", wrong_lifecycle(), timeout=TIMEOUT)
    assert result.verdict == "POST_FAIL", result.message
    # the counterexample is the run the engine took: the session lends, the candidate rolls back
    assert "prove_session_kept_over_runs(Event.LEND, 0, Event.ROLLBACK, 2)" in result.message, result.message


def test_crosshair_finds_the_freed_lent_slot_in_one_move():
    result = prove("session_kept", wrong_lifecycle(), timeout=TIMEOUT)
    assert result.verdict == "POST_FAIL", result.message
    assert "Event.ROLLBACK" in result.message and "State.LENT" in result.message, result.message
