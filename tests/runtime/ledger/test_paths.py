"""The ledger's paths, side by side: a batch of up to `ledger.small` slots is moved a slot at
a time, a larger one by the vectorised numpy kernel, which takes a batch that is one run of
consecutive slots through slices of the columns (the run lane, from `ledger.run_min` slots) and any other by
gathers. Three ledgers, one forced onto each (per-slot; vectorised with the run lane; vectorised
with gathers only), get the same calls; after every call they must agree on the outcome (the
ids, or the error's type and text), every column, the counters, the free list and the flight
recorder, slot by slot. (The model-differential machines, tests/runtime/pool/test_hypothesis.py and
verification/, draw the switch-over point and the run lane too.)"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pytest
import slotwarden.runtime.ledger.slots as ledger_slots_module
from hypothesis import given, settings
from hypothesis import strategies as st
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event
from slotwarden.runtime.ledger.ledger import SlotLedger
from ledger_paths import CAP, aimed_ops, call, first_difference, ops


@settings(max_examples=60, deadline=None)
@given(st.lists(ops, min_size=1, max_size=30), st.lists(aimed_ops, min_size=1, max_size=40))
def test_both_paths_agree_on_every_call(blind, aimed):
    assert first_difference(blind) is None  # mostly refusals
    assert first_difference(aimed) is None  # mostly accepted moves


def test_a_full_lifecycle_round_agrees():
    r, s = Actor.request(1), Actor.session(7)
    program = [
        ("alloc", 3, r),
        ("apply", Event.ADMIT, r, [1, 2, 3], NOBODY),
        ("apply", Event.PARK, r, [1], 7),
        ("apply", Event.LEND, s, [1], 2),
        ("apply", Event.FINISH, r, [2, 3], NOBODY),
        ("launch",),
        ("fence",),
        ("apply", Event.FINISH, r, [2], NOBODY),
        ("apply", Event.ROLLBACK, Actor.request(2), [1], NOBODY),
    ]
    assert first_difference(program) is None


@pytest.mark.parametrize("broken", ["no last event", "free list kept", "release unfiled"])
def test_a_broken_per_slot_path_is_caught(monkeypatch, broken):
    """The comparison can fail: a per-slot writer that forgets the last event, a per-slot path
    that never gives freed slots back to the free list, or releases the fence never hears of."""
    real = ledger_slots_module.write_slots
    if broken == "no last event":

        def write_slots(mv, table, ids, keys, after, event, actor_id, target, epoch):
            before = [mv.last_event[s] for s in ids]
            real(mv, table, ids, keys, after, event, actor_id, target, epoch)
            for s, b in zip(ids, before):
                mv.last_event[s] = b

        monkeypatch.setattr(ledger_slots_module, "write_slots", write_slots)
    elif broken == "free list kept":
        monkeypatch.setattr(SlotLedger, "_push_slots", lambda self, freed: None)
    else:
        monkeypatch.setattr(
            SlotLedger, "_note_released", lambda self, ids, fence=None, at=None: None
        )  # the vectorised path's filing
    r = Actor.request(1)
    program = [
        ("alloc", 2, r),
        ("apply", Event.ROLLBACK, r, [1, 2], NOBODY),
        ("alloc", 2, r),
        ("apply", Event.ADMIT, r, [3, 4], NOBODY),
        ("apply", Event.FINISH, r, [3, 4], NOBODY),
        ("launch",),
        ("fence",),
    ]
    with pytest.raises(AssertionError) if broken == "release unfiled" else nullcontext():
        assert first_difference(program) is not None


def test_one_junk_id_is_refused_alike():
    """A batch of one id takes the per-slot ledger's inline check (a real slot?) instead of the
    general validation: the pad slot, NOBODY, a negative id and one past the capacity are refused
    with the same errors either way, on a free slot and on a held one."""
    r = Actor.request(1)
    program = [("alloc", 2, r)]
    for bad in (0, NOBODY, -CAP, CAP + 1, 2**40):
        program += [("apply", Event.ADMIT, r, [bad], NOBODY), ("apply", Event.FINISH, r, [bad], NOBODY)]
    assert first_difference(program) is None
    slots = SlotLedger(CAP)
    slots.small = CAP + 1
    assert all(call(slots, op)[0] == "raised" for op in program[1:])


class _Anything(bytes):
    """Bytes that compare equal to any bytes: a known-batch memo that vouches for every batch."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = bytes.__hash__


@pytest.mark.parametrize("broken", ["one-slot alloc writes no owner", "known batch vouches for anything"])
def test_a_broken_fast_lane_is_caught(broken):
    """The comparison covers the fast lanes: the per-slot ledger's inline one-slot alloc (its
    field list emptied: the slot is taken with no owner), and the vectorised ledger's memo of
    the last batch known real and distinct (one that vouches for any batch of its length lets a
    duplicate through, so a refusal names the wrong reason)."""
    r = Actor.request(1)
    if broken == "one-slot alloc writes no owner":
        program = [("alloc", 1, r), ("apply", Event.ADMIT, r, [1], NOBODY)]

        def breaks(slots, vectors):
            slots._alloc_writes = ()
    else:
        program = [("apply", Event.ROLLBACK, r, [1, 1], NOBODY)]

        def breaks(slots, vectors):
            vectors._known = _Anything(bytes(16))

    assert first_difference(program) is None
    assert first_difference(program, breaks) is not None


def test_a_batch_like_the_known_one_is_still_checked():
    """The vectorised ledger remembers the last batch it found real and distinct (or handed out)
    and skips the checks for the very same ids: a batch of the same length with other ids (a
    duplicate, an id past the capacity, the pad slot) is checked as ever, with the per-slot
    ledger's errors. (Fails when the memo is trusted on the length alone.)"""
    r = Actor.request(1)
    program = [("alloc", 2, r)]
    for bad in ([1, 1], [2, CAP + 1], [0, 1], [2, 1]):
        program += [("apply", Event.ADMIT, r, bad, NOBODY)]
    assert first_difference(program) is None


def lifecycle_program(rng, length: int = 60) -> list:
    """A random run that mostly makes legal moves: every event is fired by an actor that holds
    slots (the owner or the borrower of a random held slot), on all it holds or on one slot."""
    ledger, program = SlotLedger(CAP), []
    for _ in range(length):
        held = (np.flatnonzero(ledger.cols.owner[1:] != NOBODY) + 1).tolist()
        roll = rng.random()
        if roll < 0.25 or not held:
            op = ("alloc", rng.randint(1, 3), Actor.request(rng.randint(0, 3)))
        elif roll < 0.35:
            op = (rng.choice(["launch", "fence"]),)
        else:
            s = rng.choice(held)
            rec = ledger.record(s)
            if rec.borrower != NOBODY and rng.random() < 0.5:
                actor = Actor.request(rec.borrower)
            else:
                actor = Actor(ActorKind(int(ledger._owner_kind[int(rec.state)])), rec.owner)
            event = rng.choice([e for e in Event if e not in (Event.ALLOC, Event.FENCE)])
            mine = ledger.held_by(actor).tolist()
            ids = mine if rng.random() < 0.7 else [s]
            target = rng.randint(0, 3) if event in (Event.PARK, Event.LEND) else NOBODY
            op = ("apply", event, actor, ids, target)
        program.append(op)
        call(ledger, op)
    return program


def test_both_paths_agree_on_random_lifecycles():
    import random

    rng = random.Random(7)
    accepted = 0
    for _ in range(30):
        program = lifecycle_program(rng)
        assert first_difference(program) is None
        check = SlotLedger(CAP)
        accepted += sum(call(check, op)[0] == "ok" and op[0] == "apply" for op in program)
    assert accepted > 200  # the programs do exercise accepted moves, not only refusals
