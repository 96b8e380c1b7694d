"""The ledger's run lane (batches that are one run of consecutive slots, or nearly) and the
compiled move, side by side with the other paths: they must agree on every call, and a broken
run lane or compiled move is caught by the same comparison (as in test_paths)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slotwarden.runtime.ledger import compiled
from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime.ledger.ledger import SlotLedger
import ledger_paths
from ledger_paths import SMALL, requests, sessions, CAP, call, first_difference, variants


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

    @property
    def last_run(self):
        return self.mover.last_run


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

        monkeypatch.setattr(ledger_paths, "variants", broken_variants)  # what first_difference calls
        found = first_difference(program)
    assert found is not None
