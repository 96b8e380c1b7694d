"""The shipped Hypothesis machines, run against our pool, an engine allocator behind the
guard, and the scheduler (with and without overlap)."""

from hypothesis import settings

from slotwarden.verification.machines import GuardMachine, PoolMachine, SchedulerMachine

PoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
GuardMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
SchedulerMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)

TestPool = PoolMachine.TestCase
TestGuard = GuardMachine.TestCase
TestScheduler = SchedulerMachine.TestCase


# -- the machines can fail ---------------------------------------------------------------------
import torch  # noqa: E402

from slotwarden.model.vocabulary import Actor  # noqa: E402
from slotwarden.runtime.scheduler.scheduler import Scheduler  # noqa: E402
from slotwarden.verification.machines.campaign import Budget, run_machine  # noqa: E402
from slotwarden.verification.machines import GuardUnderTest, SESSION_IDS, TensorFreeList, machine_for  # noqa: E402


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


# -- the prefix cache in the pool machine --------------------------------------------------------
import pytest  # noqa: E402

from slotwarden.model import pool as model_pool  # noqa: E402
from slotwarden.model.vocabulary import Event  # noqa: E402
from slotwarden.verification.machines import PoolMachine, StatePoolUnderTest  # noqa: E402


class Pick:
    """Stands in for Hypothesis's `data` when a test drives the machine's rules by hand."""

    def __init__(self, *values):
        self.values = list(values)

    def draw(self, strategy, label=None):
        return self.values.pop(0)


def _cache_round(machine):
    """Donate slot 1, publish it at the fence, two readers lock it, one unlocks, evict refused
    while locked, the last unlock, then the eviction and its fence."""
    machine.setup(capacity=3, path="compiled")
    machine.donate(rid=1, node=2001)
    machine.fence(back=0)
    assert machine.model.slots[0].state.name == "CACHED"
    machine.lock(Pick(1), rid=2)
    machine.lock(Pick(1), rid=3)
    machine.agrees_with_the_model()
    machine.unlock(Pick((2, 1)))
    machine.evict(Pick(1))  # refused by both: r3 still holds a lock
    assert machine.model.slots[0].readers == 1
    machine.unlock(Pick((3, 1)))
    machine.agrees_with_the_model()
    machine.evict(Pick(1))
    machine.fence(back=0)
    machine.agrees_with_the_model()
    assert machine.model.slots[0].state.name == "FREE"


def test_the_pool_machine_runs_the_cache_rules():
    _cache_round(PoolMachine())


def test_the_pool_machine_checks_locks_match(monkeypatch):
    # a lock record that forgets nothing on unlock: the counts no longer match who holds a lock
    relock = model_pool.relock

    def keeps_locks(pool, event, ids, actor):
        return pool.locks if event is Event.UNLOCK else relock(pool, event, ids, actor)

    monkeypatch.setattr(model_pool, "relock", keeps_locks)
    with pytest.raises(AssertionError, match="locks held"):
        _cache_round(PoolMachine())


class EvictsPinnedPool(StatePoolUnderTest):
    """LMDeploy #4700 in a pool: eviction goes by another count, so a locked node's slot is
    dropped anyway (its locks are let go first, anonymously)."""

    def fire(self, event, ids, actor, target=-1):
        if event is Event.EVICT:
            for i in ids:
                for _ in range(self.pool.ledger.record(i).readers):  # the ledger's count, past the lock record
                    self.pool.ledger.apply(Event.UNLOCK, [i], Actor.request(1))
        super().fire(event, ids, actor, target)


def test_the_pool_machine_catches_an_eviction_of_a_locked_slot():
    class Machine(PoolMachine):
        under_test = EvictsPinnedPool

    r = run_machine("evicts pinned", Machine, Budget(300, 40), 0, shrink=False)
    assert not r.passed and "the model refuses" in r.error, r.error


@pytest.mark.parametrize("small", [0, 6])
def test_an_unpublished_write_evicted_under_a_later_step_waits_for_that_step(small):
    # found by the pool machine: a CACHING slot (filed for the fence of step 0) evicted while
    # step 1 is in flight waits for step 1; the fence of step 0 must leave it alone, on the
    # vectorised path too
    pool = StatePoolUnderTest(1)
    pool.pool.ledger.small = small
    ids = pool.alloc(1, Actor.request(1))
    pool.fire(Event.ADMIT, ids, Actor.request(1))
    pool.fire(Event.INSERT, ids, Actor.request(1), 2001)
    pool.launch()
    pool.fire(Event.EVICT, ids, Actor.cache(2001))
    pool.fence(0)
    assert pool.records()[0].state.name == "RELEASED" and pool.records()[0].fence == 1
    pool.fence(1)
    assert pool.records()[0].state.name == "FREE"
