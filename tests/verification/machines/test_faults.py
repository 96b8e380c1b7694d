"""The fault machines (verification/machines/faults.py): the contract holds on the runtime as it
is, and each broken variant below fails the machine at a small budget: (a) the contract's judge
without its handle check, (b) a candidate that keeps a slot its faulted alloc may not have zeroed,
(c) the same slot kept when a second fault strikes before the recovery's rollback, unzeroed."""

import pytest

from slotwarden.model.vocabulary import Actor, State
from slotwarden.runtime.scheduler import contract
from slotwarden.runtime.scheduler.admission import BatchBuilder
from slotwarden.runtime.scheduler.build import build
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.runtime.scheduler.errors import SchedulerBroken
from slotwarden.verification.machines.faults import CachedFaultMachine, Fault, FaultMachine, PoolFaults, refusals
from slotwarden.verification.machines.shared import MODEL
from slotwarden.verification.verify import jobs

BUDGET = Budget(100, 25)


def test_the_runtime_keeps_the_contract_under_pool_call_faults():
    for machine, budget in ((FaultMachine, BUDGET), (CachedFaultMachine, Budget(30, 25))):
        r = run_machine("faults", machine, budget, 0, shrink=False)
        assert r.passed, f"{machine.__name__}: {r.error}\n{r.trace}"


def test_a_second_fault_in_the_recovery_breaks_the_scheduler_and_it_refuses_every_call():
    """A fault after alloc, then one after the rollback that gives the slot back: the request's
    handle names a slot the pool no longer gives it, so the judge breaks the scheduler."""
    sched = build(MODEL, slots=2)
    faults = PoolFaults(sched.pool)
    sched.submit([1, 2, 3], 2)
    faults.plan = [[Fault("alloc", 1, "after", RuntimeError), Fault(None, 1, "after", KeyboardInterrupt)]]
    faults.arm_next()
    with pytest.raises(KeyboardInterrupt, match="after pool.rollback"):
        sched.step()
    assert "request 0 thinks it holds 1, the pool says []" in str(sched.broken)
    for name, call in refusals(sched):
        with pytest.raises(SchedulerBroken):
            call()
    assert faults.log == ["RuntimeError after pool.alloc", "KeyboardInterrupt after pool.rollback"]


def test_a_second_fault_before_the_recoverys_rollback_leaves_a_kept_slot_zeroed_when_taken():
    """A fault after alloc (the slot moved, its zeroing unconfirmed: filled with garbage), then one
    before the rollback that would give it back: the request keeps the slot, and its next step
    zeroes it first, so its tokens are those of a fault-free run."""
    clean = build(MODEL, slots=2)
    first = clean.submit([1, 2, 3], 2)
    want = clean.run()[first].output
    sched = build(MODEL, slots=2)
    faults = PoolFaults(sched.pool)
    rid = sched.submit([1, 2, 3], 2)
    faults.plan = [[Fault("alloc", 1, "after", RuntimeError), Fault("rollback", 1, "before", KeyboardInterrupt)]]
    faults.arm_next()
    with pytest.raises(KeyboardInterrupt, match="before pool.rollback"):
        sched.step()
    assert sched.broken is None and sched.pool.held_by(Actor.request(rid)).numel() == 1  # kept
    assert sched.run()[rid].output == want
    assert faults.log == ["RuntimeError after pool.alloc", "KeyboardInterrupt before pool.rollback"]


def _keep_unzeroed(monkeypatch):
    """Broken: a slot kept from a recovery a second fault cut short is used as it is."""
    original = BatchBuilder.take_slot

    def take_slot(self, req):
        req.unzeroed = False
        return original(self, req)

    monkeypatch.setattr(BatchBuilder, "take_slot", take_slot)


def test_without_zeroing_the_kept_slot_the_second_fault_changes_the_tokens(monkeypatch):
    _keep_unzeroed(monkeypatch)
    with pytest.raises(AssertionError, match="=="):  # the garbage in the slot gives other tokens
        test_a_second_fault_before_the_recoverys_rollback_leaves_a_kept_slot_zeroed_when_taken()
    r = run_machine("keeps a slot unzeroed after two faults", FaultMachine, Budget(200, 25), 0, shrink=False)
    assert not r.passed and "transcript" in r.error, r.error


def test_without_the_handle_check_a_fault_leaves_a_scheduler_out_of_step_and_the_machine_fails(monkeypatch):
    monkeypatch.setattr(contract, "handle_problems", lambda sched: [])
    r = run_machine("no handle check", FaultMachine, BUDGET, 0, shrink=False)
    assert not r.passed
    assert "IllegalMove" in r.error or "handle" in r.error, r.error


def test_a_candidate_keeping_a_slot_its_faulted_alloc_may_not_have_zeroed_is_caught(monkeypatch):
    """Broken: after an alloc fault (`take_slot`, `take_fresh_slots`) the candidate keeps the TAKEN
    slot the pool says it holds, instead of giving it back (admission.py: "its zeroing may not
    have run"). Its tokens and state then differ from the transcript's replay."""
    original = BatchBuilder._adopt

    def adopt_without_giving_back(self, req):
        state = original(self, req)
        return None if state is State.TAKEN else state  # the callers' rollback of a TAKEN slot never runs

    monkeypatch.setattr(BatchBuilder, "_adopt", adopt_without_giving_back)
    r = run_machine("keeps an unzeroed slot", FaultMachine, BUDGET, 0, shrink=False)
    assert not r.passed
    assert "transcript" in r.error, r.error


def test_the_fault_job_is_in_the_default_run():
    names = [(stage, name) for stage, name, _ in jobs.jobs(jobs.LEVELS["default"], 1.0, 0, None)]
    assert ("contract", "pool-call faults") in names
