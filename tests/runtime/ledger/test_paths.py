"""The ledger's paths, side by side: a batch of up to `ledger.small` slots is moved a slot at
a time, a larger one by the vectorised numpy kernel, which takes a batch that is one run of
consecutive slots through slices of the columns (the run lane, from `ledger.run_min` slots) and any other by
gathers. Three ledgers, one forced onto each (per-slot; vectorised with the run lane; vectorised
with gathers only), get the same calls; after every call they must agree on the outcome (the
ids, or the error's type and text), every column, the counters, the free list and the flight
recorder, slot by slot. (The model-differential machines, tests/runtime/test_pool_hypothesis.py and
verification/, draw the switch-over point and the run lane too.)"""

from __future__ import annotations

from contextlib import nullcontext

import sys
import numpy as np
import pytest
import slotwarden.runtime.ledger.slots as ledger_slots_module
from hypothesis import given, settings
from hypothesis import strategies as st
from slotwarden.runtime.ledger import compiled
from slotwarden.model.errors import LifecycleError
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, State
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.verification.machines import paths

CAP = 8
actors = st.builds(Actor, st.sampled_from(list(ActorKind)), st.integers(0, 3))
ids = st.lists(st.integers(-1, CAP + 1), min_size=0, max_size=CAP + 1)
ops = st.one_of(
    st.tuples(st.just("alloc"), st.integers(1, CAP), actors),
    st.tuples(
        st.just("apply"),
        st.sampled_from([e for e in Event if e is not Event.ALLOC]),
        actors,
        ids,
        st.sampled_from([NOBODY, 0, 1, 2]),
    ),
    st.tuples(
        st.just("apply"),
        st.sampled_from([e for e in Event if e is not Event.ALLOC]),
        actors,
        ids,
        st.sampled_from([NOBODY, 0, 1, 2]),
    ),
    st.tuples(
        st.just("each"),
        st.sampled_from([Event.ADMIT, Event.ROLLBACK, Event.FINISH, Event.RETRACT, Event.ABORT, Event.CLOSE]),
        ids,
        st.lists(st.integers(0, 3), min_size=0, max_size=CAP + 1),
    ),
    st.tuples(st.just("launch")),
    st.tuples(st.just("fence")),
)


def call(ledger: SlotLedger, op):
    """Run `op`; the outcome as comparable data."""
    try:
        if op[0] == "alloc":
            got = ledger.alloc(op[1], op[2])
        elif op[0] == "apply":
            ids = ledger.held_by(op[2]) if op[3] is None else np.array(op[3], dtype=np.int64)
            got = ledger.apply(op[1], ids, op[2], op[4])
        elif op[0] == "each" and op[2] is None:  # every slot requests 0 and 1 hold, each by its holder (or not)
            held = [(int(s), r ^ op[3]) for r in (0, 1) for s in ledger.held_by(Actor.request(r))]
            ids = np.array([s for s, _ in held] or [1], dtype=np.int64)
            got = ledger.apply_each(op[1], ids, np.array([r for _, r in held] or [0], dtype=np.int64))
        elif op[0] == "each":  # one actor per slot (ids and actors cut to one length)
            ids = np.array(op[2], dtype=np.int64)
            got = ledger.apply_each(
                op[1], ids, np.array(op[3][: ids.size] + [0] * (ids.size - len(op[3])), dtype=np.int64)
            )
        elif op[0] == "launch":
            got = ledger.launch()
        else:
            c, step = ledger.cols, ledger.finished_steps()
            scan = np.flatnonzero((c.state == int(State.RELEASED)) & (c.fence <= step))  # what a fence must free
            got = ledger.fence()
            assert got.tolist() == scan.tolist(), f"the fence freed {got.tolist()}, a scan finds {scan.tolist()}"
    except LifecycleError as err:
        return ("raised", type(err).__name__, str(err))
    return ("ok", None if got is None else np.asarray(got).tolist())


def state(ledger: SlotLedger):
    snap = ledger.snapshot()
    recorded = [
        (
            e.seq,
            e.event,
            e.actor,
            e.target,
            e.epoch,
            e.ids.tolist(),
            np.broadcast_to(e.before, e.ids.shape).tolist(),
            e.after.tolist(),
        )
        for e in ledger.recorder.entries
    ]
    columns = {k: v.tolist() for k, v in snap.items() if k != "counters"}
    return columns, snap["counters"], ledger.free_list().tolist(), recorded


def variants(small: int = 0, run_min: int = 2) -> list[SlotLedger]:
    """One ledger per path (`small`: where each switches to its batch path; `run_min`: where
    the numpy run lane starts): the compiled move with its run loops, the compiled move a slot
    at a time, the numpy path with its run lane, the numpy path with gathers only."""
    ledgers = [SlotLedger(CAP) for _ in range(4)]
    for ledger, path in zip(ledgers, ("compiled", "compiled slot by slot", "numpy", "numpy")):
        paths.use(ledger, path)
        ledger.small = small
    ledgers[2].run_min, ledgers[3].run_min = run_min, CAP + 1  # the run lane for every run, or never
    return ledgers


def first_difference(program, breaks=None) -> str | None:
    """Where a per-slot ledger and one of each batch path (`variants`: compiled, compiled a slot
    at a time, numpy with the run lane, numpy with gathers) first disagree on `program` (None:
    never). `breaks(slots, vectors)`, if given, breaks the per-slot or the numpy-run one first
    (to show that this can fail)."""
    slots = SlotLedger(CAP)
    slots.small = CAP + 1
    ledgers = [slots, *variants()]
    if breaks is not None:
        breaks(slots, ledgers[3])
    names = ("per-slot", "compiled", "compiled a slot at a time", "numpy run lane", "numpy gathers")
    for i, op in enumerate(program):
        got = [call(ledger, op) for ledger in ledgers]
        if any(g != got[0] for g in got):
            return f"op {i} {op}: " + ", ".join(f"{n} {g}" for n, g in zip(names, got))
        states = [state(ledger) for ledger in ledgers]
        if any(st_ != states[0] for st_ in states):
            return f"op {i} {op}: the ledgers differ after it"
    return None


# ops aimed at what the ledger holds: `None` ids mean every slot the actor holds when the op runs
requests, sessions = st.builds(Actor.request, st.integers(0, 1)), st.builds(Actor.session, st.integers(0, 1))
allocs = st.tuples(st.just("alloc"), st.integers(1, 3), requests)
aimed_ops = st.one_of(
    allocs,
    allocs,
    allocs,
    st.tuples(
        st.just("apply"),
        st.sampled_from([Event.ADMIT, Event.ROLLBACK, Event.FINISH, Event.RETRACT, Event.ABORT]),
        requests,
        st.none(),
        st.just(NOBODY),
    ),
    st.tuples(st.just("apply"), st.just(Event.PARK), requests, st.none(), st.integers(0, 1)),
    st.tuples(st.just("apply"), st.just(Event.LEND), sessions, st.none(), st.integers(0, 1)),
    st.tuples(st.just("apply"), st.just(Event.CLOSE), sessions, st.none(), st.just(NOBODY)),
    st.tuples(
        st.just("each"),
        st.sampled_from([Event.ADMIT, Event.ROLLBACK, Event.FINISH, Event.RETRACT, Event.ABORT]),
        st.none(),
        st.sampled_from([0, 0, 1]),  # 1: each slot named with the other request (to be refused)
    ),
    st.tuples(st.just("launch")),
    st.tuples(st.just("fence")),
)


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


# -- the switch-over point: batches of small - 1, small, small + 1 slots and a large one ------
SMALL = 3
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


# -- the run lane: batches that are one run of consecutive slots, or nearly ------------------
@st.composite
def run_ids(draw):
    """A run first..first+n-1 around the switch-over sizes, or a near-run: two ids swapped, a
    duplicate inside, the last id one past (a gap), reversed, a run that crosses the capacity or
    starts at the pad slot."""
    n = draw(st.sampled_from([1, 2, SMALL, SMALL + 1, CAP - 1, CAP]))
    first = draw(st.integers(0, CAP))
    ids = list(range(first, first + n))
    shape = draw(st.sampled_from(["run", "run", "swap", "dup", "gap", "reversed"]))
    if shape == "swap" and n >= 2:
        i = draw(st.integers(0, n - 2))
        ids[i], ids[i + 1] = ids[i + 1], ids[i]
    elif shape == "dup" and n >= 2:
        i = draw(st.integers(1, n - 1))
        ids[i] = ids[i - 1]
    elif shape == "gap":
        ids[-1] += 1
    elif shape == "reversed":
        ids.reverse()
    return ids


run_ops = st.one_of(
    st.tuples(st.just("alloc"), st.sampled_from([1, 2, SMALL, SMALL + 1, CAP - 1, CAP]), requests),
    st.tuples(
        st.just("apply"),
        st.sampled_from([Event.ADMIT, Event.ROLLBACK, Event.FINISH, Event.ABORT, Event.PARK, Event.CLOSE]),
        st.one_of(requests, sessions),
        run_ids(),
        st.sampled_from([NOBODY, 0, 1]),
    ),
    st.tuples(
        st.just("each"),
        st.sampled_from([Event.ADMIT, Event.ROLLBACK, Event.FINISH, Event.ABORT]),
        run_ids(),
        st.lists(st.integers(0, 1), min_size=CAP, max_size=CAP),
    ),
    st.tuples(st.just("launch")),
    st.tuples(st.just("fence")),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(run_ops, min_size=1, max_size=30))
def test_runs_and_near_runs_agree_on_every_path(program):
    """Batches shaped as runs and near-runs, of every size around the switch-overs, on
    allocated runs (the free ring hands out runs, and wraps): the three ledgers agree."""
    assert first_difference(program) is None


def run_program():
    """Runs allocated, moved and fenced, and near-runs that must be refused (a duplicate inside
    a run, a run past the capacity, one from the pad slot) or checked slot by slot (two ids
    swapped, a gap, a reversed run)."""
    r, q = Actor.request(1), Actor.request(2)
    return [
        ("alloc", 4, r),  # 1..4: a run
        ("alloc", 3, q),  # 5..7
        ("apply", Event.ADMIT, r, [1, 2, 3, 4], NOBODY),
        ("apply", Event.FINISH, r, [1, 2, 3, 3], NOBODY),  # a duplicate inside: refused
        ("apply", Event.FINISH, r, [1, 2, 4, 4], NOBODY),  # span as a run's, a duplicate: refused
        ("apply", Event.FINISH, q, [6, 7, 8, 9], NOBODY),  # past the capacity: refused
        ("apply", Event.FINISH, q, [0, 1, 2], NOBODY),  # from the pad slot: refused
        ("apply", Event.ADMIT, q, [5, 7, 6], NOBODY),  # swapped: accepted by gathers
        ("apply", Event.FINISH, q, [5, 6, 8], NOBODY),  # a gap, slot 8 free: refused
        ("apply", Event.FINISH, r, [2, 3, 4, 5], NOBODY),  # a run, the last slot another's: refused
        ("apply", Event.FINISH, r, [1, 2, 3, 4], NOBODY),
        ("apply", Event.FINISH, q, [7, 6, 5], NOBODY),  # reversed
        ("launch",),
        ("fence",),  # the due slots: one run 1..7
        ("alloc", 5, r),  # 8, then 1..4 (the ring wraps)
        ("apply", Event.ROLLBACK, r, [1, 2, 3, 4, 8], NOBODY),
        ("alloc", CAP, q),
        ("apply", Event.ROLLBACK, q, list(range(1, CAP + 1)), NOBODY),
    ]


def test_a_run_program_agrees_and_is_refused_where_it_must():
    program = run_program()
    assert first_difference(program) is None
    ledger = SlotLedger(CAP)
    ledger.small = 0
    outcomes = [call(ledger, op)[0] for op in program]
    assert outcomes.count("raised") == 6, outcomes


@pytest.mark.parametrize("broken", ["skips the last slot", "trusts the span", "no memo of the run"])
def test_a_broken_run_lane_is_caught(monkeypatch, broken):
    """The comparison covers the run lane: one whose slice leaves out the last slot of the run
    (neither checked nor written), one that takes any batch spanning first..first+n-1 for a
    run (a duplicate or a swap inside passes as the run), and a known-batch memo that keeps
    the slice of another batch."""
    from slotwarden.runtime.ledger.batch import BatchPath

    real = BatchPath._run
    if broken == "skips the last slot":

        def run(self, ids):
            at = real(self, ids)
            return None if at is None else slice(at.start, at.stop - 1)

    elif broken == "trusts the span":

        def run(self, ids):
            n = ids.size
            if n < 2 or n < self.run_min or ids.item(n - 1) - ids.item(0) != n - 1 or ids.item(0) < 1:
                return None
            return slice(ids.item(0), ids.item(0) + n) if ids.item(n - 1) <= self.capacity else None

    if broken == "no memo of the run":

        def breaks(slots, vectors):  # after every alloc, the memo holds the slice of another run
            alloc_batch = vectors._alloc_batch

            def wrong_memo(*args):
                out = alloc_batch(*args)
                vectors._known_run = slice(2, 2 + SMALL + 1)
                return out

            vectors._alloc_batch = wrong_memo

        r = Actor.request(1)
        program = [("alloc", SMALL + 1, r), ("apply", Event.ADMIT, r, list(range(1, SMALL + 2)), NOBODY)]
        assert first_difference(program) is None
    else:
        monkeypatch.setattr(BatchPath, "_run", run)
        program, breaks = run_program(), None
    try:
        found = first_difference(program, breaks)
    except Exception as err:  # a broken lane may also trip over its own short slice
        found = repr(err)
    assert found is not None


# -- the compiled move: a broken one is caught by the same comparison ---------------------------
class _Wrapped:
    """A `Mover` whose calls pass through `change(args)` first (a broken variant of the kernel)."""

    def __init__(self, mover, change):
        self.mover, self.change = mover, change

    def move(self, *args):
        return self.mover.move(*self.change(list(args)))


def _no_duplicate_check(args):
    args[9] = False
    return args


def _skips_the_last_slot(args):
    ids = args[1]
    if ids.size > 1:
        args[1] = ids[:-1].copy()
        args[5:7] = [None if a is None else a[:-1] for a in args[5:7]]
        args[7] = None if args[7] is None else args[7][:-1]
        if type(args[2]) is not int:
            args[2] = args[2][:-1].copy()
    return args


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled move is not built here")
@pytest.mark.parametrize("broken", ["no duplicate check", "skips the last slot", "owner bit never read"])
def test_a_broken_compiled_move_is_caught(monkeypatch, broken):
    """The comparison covers the compiled move: one that never checks for a slot named twice,
    one that leaves out the last slot of a batch, and one built from probes that never read
    the owner bit (any request may finish, park or roll back another's slot)."""
    program = run_program() + [
        ("alloc", 3, Actor.request(1)),
        ("apply", Event.ROLLBACK, Actor.request(2), [1, 2, 3], NOBODY),  # another's slots: refused
        ("apply", Event.ROLLBACK, Actor.request(1), [1, 2, 2], NOBODY),  # a duplicate: refused
    ]
    assert first_difference(program) is None
    if broken == "owner bit never read":
        real = compiled.packed

        def packed(tables):
            rows, probes = real(tables)
            return rows, probes & ~np.uint8(compiled.OWN)

        monkeypatch.setattr(compiled, "packed", packed)
        try:
            found = first_difference(program)
        except RuntimeError as err:  # the ledger's own cross-check: the numpy path allows what it refused
            found = repr(err)
        assert "disagree" in found or "differ" in found, found
    else:
        change = _no_duplicate_check if broken == "no duplicate check" else _skips_the_last_slot
        real_variants = variants

        def broken_variants(*args):
            ledgers = real_variants(*args)
            ledgers[0].mover = _Wrapped(ledgers[0].mover, change)
            return ledgers

        monkeypatch.setattr(sys.modules[__name__], "variants", broken_variants)
        found = first_difference(program)
    assert found is not None
