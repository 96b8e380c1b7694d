"""The shipped Hypothesis machines, run against our pool, an engine allocator behind the
guard, and the scheduler (with and without overlap)."""

from hypothesis import settings

from slotwarden.verification.stateful import GuardMachine, PoolMachine, SchedulerMachine

PoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
GuardMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
SchedulerMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)

TestPool = PoolMachine.TestCase
TestGuard = GuardMachine.TestCase
TestScheduler = SchedulerMachine.TestCase


# -- the machines can fail ---------------------------------------------------------------------
import torch  # noqa: E402

from slotwarden.model.vocabulary import Actor  # noqa: E402
from slotwarden.runtime.scheduler import Scheduler  # noqa: E402
from slotwarden.verification.campaign import Budget, run_machine  # noqa: E402
from slotwarden.verification.stateful import GuardUnderTest, SESSION_IDS, TensorFreeList, machine_for  # noqa: E402


class LifoFreeList(TensorFreeList):
    """An engine allocator that hands freed slots out first (not the model's FIFO order)."""

    def free(self, free_index):
        self.free_slots = torch.cat((free_index, self.free_slots))


class LifoGuard(GuardUnderTest):
    def __init__(self, capacity):
        super().__init__(capacity)
        self.engine = self.guard.allocator = LifoFreeList(capacity)


def test_the_guard_machine_checks_the_engine_free_list():
    """The free list of any pool that exposes one is compared with the model's."""

    class Machine(GuardMachine):
        under_test = LifoGuard

    r = run_machine("lifo guard", Machine, Budget(100, 30), 0, shrink=False)
    assert not r.passed and "free list" in r.error


class ParksIntoTheRequestId(Scheduler):
    """Parks a finished turn's slot with the session named by the request's id: masked
    whenever the two ids happen to be equal."""

    def release_finished(self, req):
        if req.session is None or req.lent:
            return super().release_finished(req)
        self.pool.park([req.slot], Actor.request(req.rid), req.rid)
        self.sessions[req.session].slot = req.slot


def test_session_ids_never_equal_request_ids_so_a_mixed_up_id_is_caught():
    Machine = machine_for(ParksIntoTheRequestId)
    r = run_machine("mixed ids", Machine, Budget(50, 20), 0, shrink=False)
    assert not r.passed
    sched = machine_for(Scheduler)()
    sched.setup(slots=1, overlap=False, budget=3, chunk=16, max_running=4, retract_after=None, features=set())
    assert sched.sched.open_session() == SESSION_IDS.start
