"""The checker's launch judge: the twin's rows (padding included) and fills, each step property
flagging a step built to break it first, the correct twin passing the same world, and the
write-set mutants caught by the search (a replayable trace) and by random walks."""

import pytest

from slotwarden.model.vocabulary import PAD_SLOT
from slotwarden.model.write_set import Fill, Row, RowKind
from slotwarden.runtime.scheduler.forward import captured_sizes as runtime_sizes
from slotwarden.verification import abstract as A
from slotwarden.verification.abstract import STEP_PROPERTIES, Bounds, Policy, judge_launch
from slotwarden.verification.abstract.actions import perform
from slotwarden.verification.abstract.rows import PAD_ROW, captured_sizes, fills, step_rows
from slotwarden.verification.checker.search import check
from slotwarden.verification.checker.simulate import simulate
from slotwarden.verification.mutants.history import MUTANTS
from slotwarden.model.registry import LAUNCH, PROPERTIES
from slotwarden.verification.selftest import STEP_WORLD, bad_step, step_world


WORLD = STEP_WORLD  # two running requests, each on its own slot, each already run in a completed step


def test_the_twin_pads_to_the_runtimes_captured_sizes():
    assert all(captured_sizes(n) == runtime_sizes(n) for n in range(1, 40))
    world = A.initial(Bounds(slots=3, requests=4, sessions=0))
    for kind in ("take", "admit"):
        for rid in range(3):
            world = perform(world, Policy(), kind, rid).world
    running = [r for r in world.requests if r.phase == A.RUNNING]
    rows = step_rows(world, running)
    assert rows[:3] == tuple(Row(RowKind.REQUEST, r.id, r.handle, r.handle) for r in running) and rows[3:] == (PAD_ROW,)
    assert PAD_ROW.write == PAD_ROW.source == PAD_SLOT and judge_launch(world, Policy()) is None


def test_a_taken_slot_is_zeroed_until_a_launched_step_writes_it():
    world = A.initial(Bounds(slots=2, requests=1, sessions=0))
    world = perform(world, Policy(), "take", 0).world
    assert fills(world) == (Fill.ZEROED, Fill.STALE) and fills(world, zeroes=False) == (Fill.STALE, Fill.STALE)
    world = perform(perform(world, Policy(), "admit", 0).world, Policy(), "launch").world
    assert fills(world, zeroes=False) == (Fill.WRITTEN, Fill.STALE)


@pytest.mark.parametrize("prop", sorted(STEP_PROPERTIES) + ["reads_current"], ids=str)
def test_every_step_property_flags_a_step_built_to_break_it(prop):
    world = step_world(prop)
    assert judge_launch(world._replace(behind=frozenset()), Policy()) is None  # the twin's own rows pass
    found = judge_launch(world, bad_step(prop))
    assert found is not None and found[0] == prop, found
    if LAUNCH in PROPERTIES[prop].checks:  # the launch check judges it: it refuses the rows
        assert "the launch check refuses rows" in found[1]


@pytest.mark.parametrize(
    "mutant",
    [m for m in MUTANTS if m.policy is not None and set(m.checker_catch) <= set(STEP_PROPERTIES)],
    ids=lambda m: m.name,
)
def test_each_write_set_mutant_is_caught_at_a_launch_with_its_rows_named(mutant):
    r = check(mutant.bounds, mutant.policy())
    assert r.violation is not None and r.violation.property in mutant.checker_catch
    assert r.violation.trace[-1].startswith("launch") and "rows [" in r.violation.message
    assert check(mutant.bounds).ok  # the correct twin on the same bounds


def test_random_walks_judge_launches_too():
    mutant = {m.name: m for m in MUTANTS}["reused_slot_not_zeroed"]
    walk = simulate(mutant.bounds, mutant.policy(), seconds=5, walks=200)
    assert walk.violation is not None and walk.violation.property == "reads_filled"
    assert simulate(mutant.bounds, seconds=5, walks=200).violation is None


def test_the_test_bounds_reach_a_padded_launch_and_condensed_rows(monkeypatch):
    from slotwarden.verification.checker import goals
    from slotwarden.verification.checker.bounds import TEST_BOUNDS

    reached = check(TEST_BOUNDS[-1]).goals
    assert {"padded_launch", "rows_condensed"} <= reached
    assert "rows_condensed" not in check(TEST_BOUNDS[-1]._replace(overlap=False)).goals  # no step in flight at a launch
    monkeypatch.setattr(goals, "padded", lambda n, max_running: n)  # the broken variant: a twin that never pads
    assert "padded_launch" not in check(TEST_BOUNDS[-1]).goals
