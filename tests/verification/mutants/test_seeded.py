"""Every seeded runtime fault is caught by a stage of `verify`; faults leave nothing behind."""

import pytest

import torch

from slotwarden.runtime.scheduler import admission
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.verification.machines.continuity import continuation, recording, replay
from slotwarden.verification.machines import MODEL
from slotwarden.verification.verify.jobs import LEVELS, RUNTIME_LEVELS, seeded_bug_stages
from slotwarden.verification.mutants.seeded import SEEDED_BUGS, SeededBug, hunt

QUICK = seeded_bug_stages(RUNTIME_LEVELS["quick"], LEVELS["quick"], 0)


@pytest.mark.parametrize("fault", SEEDED_BUGS, ids=[f.name for f in SEEDED_BUGS])
def test_each_fault_is_caught_by_its_stage(fault):
    originals = [getattr(owner, name) for owner, name, _ in fault.patches]
    catch = hunt(fault, {name: QUICK[name] for name in fault.stages})
    assert catch.caught, f"{fault.name} escaped {catch.tried}"
    assert catch.stage in fault.stages and catch.error
    assert [getattr(owner, name) for owner, name, _ in fault.patches] == originals  # restored


def test_the_six_faults_of_the_record_are_in_the_catalogue():
    names = {f.name for f in SEEDED_BUGS}
    assert {
        "ledger_skips_owner_check",
        "retract_lent_by_finish",
        "copy_into_foreign_slot",
        "no_duplicate_check",
        "lend_zeroes_state",
        "retract_turn_not_stale",
    } <= names
    assert len(names) == len(SEEDED_BUGS) >= 9


def test_an_escaping_fault_is_reported_as_escaped():
    ran = []
    stages = {"a": lambda: ran.append("a") or "", "b": lambda: ran.append("b") or ""}
    catch = hunt(SeededBug("nothing", "changes nothing", (), ("b",)), stages)
    assert not catch.caught and catch.tried == ("b", "a") and ran == ["b", "a"]


def test_a_fault_is_restored_when_its_stage_raises():
    fault = next(f for f in SEEDED_BUGS if f.name == "retract_turn_not_stale")
    original = Scheduler.turn_retracted
    with pytest.raises(RuntimeError):
        with fault.applied():
            assert Scheduler.turn_retracted is not original
            raise RuntimeError("a stage crashed")
    assert Scheduler.turn_retracted is original
    assert admission.pick_victim.__module__ == "slotwarden.runtime.scheduler.admission"


def retracted_turn_scenario():
    """Two slots, one seat: session A parks a slot, A's second turn runs on it (lent), a plain
    request starves for the seat and retracts the turn (a free slot is there, a seat is not);
    then both finish, retracting each other in turn. Returns (A's turn, the tokens A's session
    fed before it, the slot state when it finished, whether the turn was retracted)."""
    sched = build(
        MODEL, slots=2, cls=recording(Scheduler), token_budget=4, chunk_size=2, max_running=1, retract_after=1
    )
    a = sched.open_session()
    first = sched.requests[sched.submit([1, 2], 2, session=a)]  # kept: ended requests leave the table
    sched.run(50)
    history = [1, 2] + first.output
    turn = sched.requests[sched.submit([4, 5, 9, 30], 6, session=a)]
    sched.step()
    sched.submit([3, 7], 3)  # waits for the one seat
    retractions = []
    for _ in range(60):
        retractions += sched.step().retracted
        if turn.done:
            break
    return turn, history, sched.at_release.get(turn.rid), turn.rid in retractions


def test_a_correct_session_turn_retraction_keeps_continuity_and_the_faults_do_not():
    """The control: the scheduler's own retraction of a session turn (RETRACT, the session
    marked stale, the turn fed again from the transcript with the tokens it had made) keeps
    tokens and state equal to the transcript's reference; the two faulty retractions do not."""
    control = SeededBug("correct", "", (), ())
    for fault, should_hold in [(control, True)] + [(f, False) for f in SEEDED_BUGS if f.name.startswith("retract_")]:
        with fault.applied():
            req, history, state, retracted = retracted_turn_scenario()
        assert retracted and req.done and req.finish_reason == "length", fault.name
        context = history + [4, 5, 9, 30]
        want_state, _ = replay(tuple(context + req.output[:-1]))
        holds = req.output == continuation(context, req.output) and all(map(torch.equal, state, want_state))
        assert holds is should_hold, fault.name
