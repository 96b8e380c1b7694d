"""The step's write set: the declaration is checked when declared, the properties judge steps,
the model's check refuses a bad step naming row, slot, holder and actor, and each CrossHair proof
fails on a declaration wrong in the way its property forbids."""

import dataclasses
import random

import pytest

from slotwarden.model import proofs
from slotwarden.model.errors import DeclarationError, IllegalStep
from slotwarden.model.launch import check_step
from slotwarden.model.lifecycle import LIFECYCLE, ROWS, WRITE_SET
from slotwarden.model.properties import (
    ids_in_pool,
    pads_to_pad,
    reads_filled,
    reads_held,
    writes_disjoint,
    writes_held,
)
from slotwarden.model.vocabulary import NOBODY, PAD_SLOT, Actor, ActorKind, Relation, Slot, State
from slotwarden.model.write_set import Access, Fill, Row, RowKind, RowSpec, declare_write_set
from slotwarden.verification.crosshair_proofs import prove

TIMEOUT = 300.0
READABLE = (Fill.ZEROED, Fill.COPIED, Fill.WRITTEN)

# slot 1: request 1 runs on it; 2: session 5's, lent to running request 2; 3: parked in session 6;
# 4: cached, request 1 holds a lock on it; 5: free
POOL = (
    Slot(State.RUNNING, 1),
    Slot(State.LENT_RUNNING, 5, 2),
    Slot(State.PARKED, 6),
    Slot(State.CACHED, 9, readers=1),
    Slot(State.FREE),
)
FILLS = (Fill.WRITTEN, Fill.ZEROED, Fill.WRITTEN, Fill.WRITTEN, Fill.STALE)
LOCKS = {4: {1}}
GOOD = (Row(RowKind.REQUEST, 1, 1, 4), Row(RowKind.REQUEST, 2, 2, 2), Row(RowKind.PAD, NOBODY, 0, 0))


def _request_spec(**change):
    return dataclasses.replace(ROWS[0], **change)


def test_the_declared_write_set_accepts_a_good_step():
    check_step(GOOD, POOL, FILLS, LOCKS)
    assert WRITE_SET.pad_slot == PAD_SLOT and Fill.STALE not in WRITE_SET.readable
    for p in (writes_held(GOOD, POOL), writes_disjoint(GOOD), pads_to_pad(GOOD), ids_in_pool(GOOD, 5)):
        assert p
    assert reads_held(GOOD, POOL, LOCKS) and reads_filled(GOOD, FILLS)


@pytest.mark.parametrize(
    "rows, predicate, slot, holder, actor",
    [
        ((Row(RowKind.REQUEST, 1, 3, 3),), lambda r: writes_held(r, POOL), 3, Actor.session(6), Actor.request(1)),
        ((Row(RowKind.REQUEST, 1, 1, 1), Row(RowKind.REQUEST, 1, 1, 1)), writes_disjoint, 1, Actor.request(1),
         Actor.request(1)),
        ((Row(RowKind.PAD, NOBODY, 3, 3),), pads_to_pad, 3, Actor.session(6), None),
        ((Row(RowKind.PAD, NOBODY, -1, -1),), lambda r: ids_in_pool(r, 5), -1, None, None),
        ((Row(RowKind.REQUEST, 1, 1, 6),), lambda r: ids_in_pool(r, 5), 6, None, Actor.request(1)),
        ((Row(RowKind.REQUEST, 2, 2, 4),), lambda r: reads_held(r, POOL, LOCKS), 4, Actor(ActorKind.CACHE, 9),
         Actor.request(2)),
        ((Row(RowKind.REQUEST, 1, 1, 5),), lambda r: reads_held(r, POOL, LOCKS), 5, None, Actor.request(1)),
    ],
    ids=["another's slot", "written twice", "pad aliases a parked slot", "-1 pad", "past the pool",
         "unlocked cache read", "free slot read"],
)  # fmt: skip
def test_the_check_refuses_what_each_property_forbids_and_names_it(rows, predicate, slot, holder, actor):
    assert not predicate(rows)
    with pytest.raises(IllegalStep) as refused:
        check_step(rows, POOL, FILLS, LOCKS)
    e = refused.value
    assert (e.slot_id, e.holder, e.actor) == (slot, holder, actor)
    assert f"row {e.row}" in str(e) and f"slot {slot}" in str(e)


def test_a_stale_first_read_is_refused():
    pool = POOL[:4] + (Slot(State.RUNNING, 7),)  # slot 5 taken by request 7, never zeroed
    rows = (Row(RowKind.REQUEST, 7, 5, 5),)
    assert not reads_filled(rows, FILLS)
    with pytest.raises(IllegalStep, match="stale"):
        check_step(rows, pool, FILLS, LOCKS)
    check_step(rows, pool, FILLS[:4] + (Fill.ZEROED,), LOCKS)


def test_every_accepted_random_step_keeps_every_property():
    """The proofs' claim, sampled over many rows at once: what the check accepts keeps each."""
    rng = random.Random(5)
    states = [s.state for s in LIFECYCLE.states] + [State.RUNNING] * 4 + [State.LENT_RUNNING] * 2
    accepted = 0
    for _ in range(20000):
        pool = tuple(
            Slot(s, rng.randrange(3) if LIFECYCLE.spec(s).owner else NOBODY,
                 rng.randrange(3) if LIFECYCLE.spec(s).lent else NOBODY, 0,
                 rng.randrange(2) if LIFECYCLE.spec(s).shared else 0)
            for s in rng.choices(states, k=4)
        )  # fmt: skip
        fills = tuple(rng.choices(list(Fill), k=4))
        locks = {i: {rng.randrange(3)} for i in range(1, 5)}
        rows = []
        for _ in range(rng.randrange(1, 4)):
            write = rng.randrange(-1, 6)
            rows.append(Row(rng.choice(list(RowKind)), rng.randrange(3), write, rng.choice((write, rng.randrange(6)))))
        rows = tuple(rows)
        try:
            check_step(rows, pool, fills, locks)
        except IllegalStep:
            continue
        accepted += 1
        assert writes_held(rows, pool) and writes_disjoint(rows) and pads_to_pad(rows) and ids_in_pool(rows, 4)
        assert reads_held(rows, pool, locks) and reads_filled(rows, fills)
    assert accepted > 300


@pytest.mark.parametrize(
    "rows, why",
    [
        ((ROWS[0], ROWS[0]), "declared twice"),
        ((_request_spec(writes=(Access(State.RUNNING, Relation.BORROWER),)),), "relation"),
        ((RowSpec(RowKind.PAD, ActorKind.REQUEST, pad_only=True),), "only the pad slot"),
        ((RowSpec(RowKind.REQUEST, None),), "kind of its actor"),
        ((RowSpec(7, ActorKind.REQUEST),), "unknown row kind"),
    ],
)
def test_a_malformed_write_set_is_refused_when_declared(rows, why):
    with pytest.raises(DeclarationError, match=why):
        declare_write_set(LIFECYCLE, rows, PAD_SLOT, READABLE)
    with pytest.raises(DeclarationError, match="not a slot id"):
        declare_write_set(LIFECYCLE, ROWS, "0", READABLE)


def _with(rows=ROWS, pad=PAD_SLOT, readable=READABLE):
    return declare_write_set(LIFECYCLE, rows, pad, readable)


PARKED_ANYBODY = Access(State.PARKED, Relation.NONE)
RUNNING_ANYBODY = Access(State.RUNNING, Relation.NONE)
VERIFIED_OWN = Access(State.VERIFIED, Relation.OWNER)  # its own window's verified state, not committed
ALIASING_PAD = RowSpec(RowKind.PAD, ActorKind.REQUEST, (Access(State.RUNNING, Relation.OWNER),),
                       (Access(State.RUNNING, Relation.OWNER),))  # fmt: skip

WRONG_FOR = {  # proof: a write-set declaration wrong in the way its property forbids
    "writes_held": _with((_request_spec(writes=ROWS[0].writes + (PARKED_ANYBODY,),
                                        reads=ROWS[0].reads + (PARKED_ANYBODY,)), ROWS[1])),  # a parked slot (#13151)
    "writes_disjoint": _with(pad=1),  # the pad slot is a real slot: two pad rows write it
    "pads_to_pad": _with((ROWS[0], ALIASING_PAD)),  # a dummy row on a live request's slot (TensorRT-LLM #13151)
    "ids_in_pool": _with(pad=NOBODY),  # PADDING_SLOT_ID = -1 used as an index (vLLM #43810)
    "reads_held": _with((_request_spec(reads=ROWS[0].reads + (RUNNING_ANYBODY,)), ROWS[1])),  # (vLLM #53142)
    "reads_filled": _with(readable=READABLE + (Fill.STALE,)),  # a reused slot never zeroed (vLLM #56524)
    "reads_committed": _with((_request_spec(reads=ROWS[0].reads + (VERIFIED_OWN,)), ROWS[1])),  # (vLLM #56531)
}  # fmt: skip


def test_every_step_property_has_a_proof_and_a_wrong_declaration():
    assert set(WRONG_FOR) == {n for n, f in proofs.PROOFS.items() if f.__module__.endswith(".launch")}


@pytest.mark.parametrize("name", list(WRONG_FOR))
def test_each_step_proof_fails_on_a_write_set_its_property_forbids(name):
    result = prove(name, timeout=TIMEOUT, write_set=WRONG_FOR[name])
    assert result.verdict == "POST_FAIL", result.message
    assert proofs.STEP_SUBJECT[0] is WRITE_SET  # put back
