"""CrossHair confirms every contracted function of the model, finds the real bug when the
lifecycle is declared wrong (a rolled-back lent slot going to FREE, as in SGLang PR 21404), and
each proof fails on a declaration wrong in the way its property forbids."""

import dataclasses

import pytest

from slotwarden.model import proofs
from slotwarden.model.declaration import CLEAR, KEEP, RETURN, Source, declare
from slotwarden.model.lifecycle import EVENTS, RULES, STATES
from slotwarden.model.vocabulary import Event, Relation, State
from slotwarden.verification.crosshair_proofs import prove

TIMEOUT = 300.0


@pytest.mark.proof
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


def test_crosshair_finds_the_freed_lent_slot_in_one_move():
    result = prove("session_kept", wrong_lifecycle(), timeout=TIMEOUT)
    assert result.verdict == "POST_FAIL", result.message
    assert "Event.ROLLBACK" in result.message and "State.LENT" in result.message, result.message


def _changed(source, event, **change):
    return tuple(dataclasses.replace(r, **change) if (r.source, r.event) == (source, event) else r for r in RULES)


def _also_from(source, like):
    base = next(r for r in RULES if (r.source, r.event) == like)
    return RULES + (dataclasses.replace(base, source=source),)


def _rule(source, event):
    return next(r for r in RULES if (r.source, r.event) == (source, event))


WRONG_FOR = {  # proof: a declaration wrong in the way its property forbids
    "authority": _changed(State.PARKED, Event.LEND, by=Relation.NONE),  # any session lends a parked slot
    "borrow_safe": _also_from(State.LENT_RUNNING, (State.PARKED, Event.CLOSE)),  # close while lent to a running turn
    "handles_follow": _changed(State.RUNNING, Event.PARK, effect=RETURN),  # the request keeps its handle after PARK
    "parks_what_ran": _also_from(State.TAKEN, (State.RUNNING, Event.PARK)),  # a turn that never ran is parked
    "release_waits": _changed(State.RUNNING, Event.FINISH, effect=CLEAR),  # a release that waits for no step
    "fence_respected": _also_from(State.RUNNING, (State.TAKEN, Event.ROLLBACK)),  # a running slot freed at once
    "conserved": _changed(  # a rolled-back candidate's slot is free yet still names its owner
        State.TAKEN, Event.ROLLBACK, effect=_rule(State.TAKEN, Event.ROLLBACK).effect._replace(owner=RETURN.owner)
    ),
    "quiescent": tuple(
        r for r in RULES if (r.source, r.event) != (State.TAKEN, Event.ABORT)
    ),  # a candidate cannot let go
    "freed_once": _also_from(State.RELEASED, (State.FREE, Event.ALLOC)),  # a released slot taken before its fence
    "exclusive": _changed(  # a taken slot carries the epoch as a fence
        State.FREE, Event.ALLOC, effect=_rule(State.FREE, Event.ALLOC).effect._replace(fence=Source.EPOCH)
    ),
    "cache_read_only": RULES
    + (  # a request reading a cached slot finishes (releases) it
        dataclasses.replace(_rule(State.RUNNING, Event.FINISH), source=State.CACHED, by=Relation.READER),
    ),
    "evict_unlocked": _changed(State.CACHED, Event.EVICT, by=Relation.PINNED),  # a locked node is evicted (#27038)
    "lock_counted": RULES + (dataclasses.replace(_rule(State.CACHED, Event.UNLOCK), by=Relation.NONE),),  # #27147
    "reads_published": _also_from(State.CACHING, (State.CACHED, Event.LOCK)),  # a lock on unpublished state (#56525)
}


@pytest.mark.parametrize("name", list(WRONG_FOR))
def test_each_proof_fails_on_a_declaration_its_property_forbids(name):
    wrong = declare(f"wrong for {name}", STATES, EVENTS, WRONG_FOR[name])
    result = prove(name, wrong, timeout=TIMEOUT)
    assert result.verdict == "POST_FAIL", result.message


LOCKED_CACHE_WRONG = {  # quiescence from a cached record with locks held, declared wrong
    "an unlock that does not decrement": _changed(State.CACHED, Event.UNLOCK, effect=KEEP),
    "an unlock at the bound that does not decrement": tuple(
        dataclasses.replace(r, effect=KEEP)
        if (r.source, r.event, r.by) == (State.CACHED, Event.UNLOCK, Relation.FULL)
        else r
        for r in RULES
    ),
    "a locked cached slot that can never be unlocked": tuple(
        r for r in RULES if (r.source, r.event) != (State.CACHED, Event.UNLOCK)
    ),
}


@pytest.mark.parametrize("name", list(LOCKED_CACHE_WRONG))
def test_quiescence_covers_cached_records_with_locks_held(name):
    """Each declaration still lets go of an unlocked cached slot, so a proof that starts only
    from records with no locks (a `Slot` built without its lock count) confirms it."""
    wrong = declare(name, STATES, EVENTS, LOCKED_CACHE_WRONG[name])
    result = prove("quiescent", wrong, timeout=TIMEOUT)
    assert result.verdict == "POST_FAIL", result.message


@pytest.mark.proof
def test_every_one_move_proof_at_once_is_confirmed_over_all_paths():
    from slotwarden.verification.crosshair_proofs import prove_moves

    results = prove_moves(timeout=TIMEOUT)
    assert [r.name for r in results] == list(proofs.MOVE_PROOFS)
    assert all(r.confirmed and r.message.startswith("Confirmed over all paths.") for r in results), results


def test_every_one_move_proof_at_once_fails_and_names_the_proof_that_fails(monkeypatch):
    """The conjunction does not confirm the wrong declaration of PR 21404; then each one-move
    proof runs alone (stood in for here: each is shown failing above) and names the broken one."""
    from slotwarden.verification import crosshair_proofs as C

    alone = []

    def one(name, lifecycle, timeout):
        alone.append(name)
        return C.ProofResult(name, "", "POST_FAIL" if name == "session_kept" else "CONFIRMED", 0.0, "")

    monkeypatch.setattr(C, "prove", one)
    results = C.prove_moves(wrong_lifecycle(), timeout=TIMEOUT)
    assert alone == list(proofs.MOVE_PROOFS)
    assert [r.name for r in results if not r.confirmed] == ["session_kept"]


def test_the_one_move_proofs_range_over_exactly_the_well_formed_records():
    """`record_of` builds every well-formed record (from its own fields, or their negatives),
    and from any ints only records that `exclusive` allows, bar a lock count out of range."""
    from itertools import product

    from slotwarden.model.lifecycle import LIFECYCLE
    from slotwarden.model.properties import exclusive
    from slotwarden.model.vocabulary import MAX_READERS
    from slotwarden.verification.mutants.fast_checks import records

    for state in State:
        for r in records(LIFECYCLE, state):
            assert proofs.record_of(state, r.owner, r.borrower, r.fence, r.readers, LIFECYCLE) == r
            assert proofs.record_of(state, -r.owner, -r.borrower, -r.fence, r.readers, LIFECYCLE) == r
        for o, b, f, n in product((-3, -1, 0, 5), repeat=4):
            built = proofs.record_of(state, o, b, f, n, LIFECYCLE)
            in_range = 0 <= n <= MAX_READERS or not LIFECYCLE.spec(state).shared
            assert exclusive(built, LIFECYCLE) == in_range, built
