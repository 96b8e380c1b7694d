"""The ledger's paths at the switch-over point (batches of small - 1, small, small + 1 slots and a
large one) and over a prefix-cache round: the per-slot and the batch paths must agree on every
call, as in test_paths."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event
from slotwarden.runtime.ledger.ledger import SlotLedger
from ledger_paths import SMALL, CAP, call, state, variants


# -- the switch-over point: batches of small - 1, small, small + 1 slots and a large one ------
sizes = st.sampled_from([SMALL - 1, SMALL, SMALL + 1, CAP])


@st.composite
def sized_program(draw):
    """Allocs of the sizes around the switch-over, then events on every slot an actor holds
    (batches of those sizes) or on a prefix of them."""
    program = []
    for _ in range(draw(st.integers(4, 24))):
        kind = draw(st.sampled_from(["alloc", "alloc", "apply", "apply", "apply", "launch", "fence"]))
        if kind == "alloc":
            program.append(("alloc", draw(sizes), Actor.request(draw(st.integers(0, 1)))))
        elif kind == "apply":
            event = draw(st.sampled_from([e for e in Event if e is not Event.ALLOC]))
            actor = draw(st.sampled_from([Actor.request(0), Actor.request(1), Actor.session(0), Actor.session(1)]))
            target = draw(st.sampled_from([NOBODY, 0, 1]))
            program.append(("apply", event, actor, None, target, draw(st.sampled_from([None, SMALL, SMALL + 1]))))
        else:
            program.append((kind,))
    return program


def call_sized(ledger: SlotLedger, op):
    if op[0] == "apply" and len(op) == 6:
        held = ledger.held_by(op[2])
        ids = held if op[5] is None else held[: op[5]]
        return call(ledger, ("apply", op[1], op[2], ids.tolist() or [1], op[4]))
    return call(ledger, op)


@settings(max_examples=40, deadline=None)
@given(sized_program())
def test_the_switch_over_point_agrees_with_both_paths(program):
    """A ledger switching at `SMALL` (and to the run lane from `SMALL + 1`) against one that
    only moves a slot at a time and one that only vectorises (the run lane for every run): the
    same outcome, columns, free list and recorder after every call."""
    ledgers = [SlotLedger(CAP) for _ in range(2)] + variants(SMALL, SMALL + 1)
    ledgers[0].small, ledgers[1].small = SMALL, CAP + 1
    ledgers[1].mover = None
    for i, op in enumerate(program):
        outcomes = [call_sized(led, op) for led in ledgers]
        assert all(o == outcomes[0] for o in outcomes), f"op {i} {op}: {outcomes}"
        states = [state(led) for led in ledgers]
        assert all(s == states[0] for s in states), f"op {i} {op}: the ledgers differ after it"


def test_a_prefix_cache_round_agrees_on_both_paths_and_the_switch_over():
    """The cache's events (the lock count read and written) on batches below and above the
    switch-over: insert, publish at the fence, locks by several requests (equal and unequal
    counts), an eviction refused while locked, unlocks, the eviction, the fence that frees."""
    r1, node = Actor.request(1), Actor(ActorKind.CACHE, 7)
    every, half = [1, 2, 3, 4, 5, 6], [2, 4, 6]
    program = [
        ("alloc", 6, r1),
        ("apply", Event.ADMIT, r1, every, NOBODY),
        ("apply", Event.INSERT, r1, every, 7),
        ("launch",),
        ("fence",),
        ("apply", Event.LOCK, Actor.request(2), every, NOBODY),
        ("apply", Event.LOCK, Actor.request(3), half, NOBODY),
        ("apply", Event.LOCK, Actor.request(4), every, NOBODY),  # counts 2 and 3: a mixed batch
        ("apply", Event.EVICT, node, every, NOBODY),  # refused: locked
        ("apply", Event.UNLOCK, Actor.request(2), every, NOBODY),
        ("apply", Event.UNLOCK, Actor.request(3), half, NOBODY),
        ("apply", Event.UNLOCK, Actor.request(4), every, NOBODY),
        ("apply", Event.UNLOCK, Actor.request(4), every, NOBODY),  # refused: no lock left
        ("apply", Event.EVICT, node, every, NOBODY),
        ("launch",),
        ("fence",),
    ]
    ledgers = [SlotLedger(CAP) for _ in range(2)] + variants(SMALL, SMALL + 1)
    ledgers[0].small, ledgers[1].small = SMALL, CAP + 1
    outcomes = []
    for i, op in enumerate(program):
        got = [call(led, op) for led in ledgers]
        assert all(g == got[0] for g in got), f"op {i} {op}: {got}"
        states = [state(led) for led in ledgers]
        assert all(s == states[0] for s in states), f"op {i} {op}: the ledgers differ after it"
        outcomes.append(got[0][0])
    assert outcomes.count("raised") == 2 and ledgers[0].available() == CAP
