"""The concurrency contract: a pool, its ledger and a guard are single-threaded. The first
thread to call one owns it; a call from another thread raises `WrongThread` before touching
anything, so two threads racing alloc/rollback can no longer put one id on the free list twice.
`adopt()` hands the ledger over."""

import sys
import threading

import pytest

from slotwarden.model.errors import LifecycleError, WrongThread
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.pool import StatePool

from engines import TensorFreeList

CFG = PoolConfig(num_slots=8, layers=1, conv_dims=(4,), heads=1, head_dim=2, state_size=2)


def churn(pool: StatePool, rid: int, rounds: int, failures: dict, start: threading.Barrier) -> None:
    actor = Actor.request(rid)
    start.wait()  # both threads alive before either calls: distinct thread ids, a real race
    try:
        for _ in range(rounds):
            ids = pool.alloc(2, actor)
            if ids is not None:
                pool.rollback(ids, actor)
    except Exception as e:  # noqa: BLE001 - the test sorts them out
        failures[rid] = e


def test_two_threads_racing_alloc_and_rollback_get_a_typed_error_not_a_corrupt_free_list():
    pool = StatePool(CFG)
    failures: dict = {}
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows at once
    try:
        start = threading.Barrier(2)
        threads = [threading.Thread(target=churn, args=(pool, rid, 300, failures, start)) for rid in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert len(failures) == 1, failures  # one thread owns the pool; the other was refused at its first call
    (err,) = failures.values()
    assert isinstance(err, WrongThread) and isinstance(err, LifecycleError)
    assert "single-threaded" in str(err) and "adopt()" in str(err)
    with pytest.raises(WrongThread):
        pool.audit()  # the test's thread is not the owner either
    pool.ledger.adopt()
    free = pool.ledger.free_list().tolist()
    assert sorted(free) == list(range(1, 9)), free  # no id twice, none lost
    assert pool.audit(set(), set()).clean


def test_adopt_hands_a_pool_over_to_another_thread():
    pool = StatePool(CFG)
    ids = pool.alloc(1, Actor.request(1))  # this thread owns the pool now
    seen: dict = {}

    def worker():
        try:
            pool.admit(ids, Actor.request(1))
        except WrongThread as e:
            seen["refused"] = e
        pool.ledger.adopt()
        pool.admit(ids, Actor.request(1))
        seen["state"] = pool.state_of(ids)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert "refused" in seen and [s.name for s in seen["state"]] == ["RUNNING"]
    with pytest.raises(WrongThread):
        pool.finish(ids, Actor.request(1))


def test_the_guard_is_single_threaded_too():
    engine = TensorFreeList(4)
    guard = LedgerGuard(engine, 4)
    guard.alloc(1, Actor.request(1))
    seen = []

    def worker():
        for call in (
            lambda: guard.alloc(1, Actor.request(2)),
            lambda: guard.fire(Event.ROLLBACK, [1], Actor.request(1)),
            guard.fence,
        ):
            try:
                call()
            except WrongThread:
                seen.append(True)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [True, True, True]
    assert engine.free_slots.tolist() == [2, 3, 4]  # the engine was never asked


def _outputs(results) -> dict:
    return {rid: list(r.output) for rid, r in results.items()}


def test_a_scheduler_call_from_another_thread_is_refused_and_leaves_it_usable():
    """Old code: the pool refused step() with WrongThread, then the fault handler audited the
    pool from the same wrong thread, got WrongThread again and broke the scheduler for good."""
    from slotwarden.kernels.layer import TinyMambaConfig
    from slotwarden.runtime.scheduler.build import build

    def workload():
        s = build(TinyMambaConfig(layers=1), slots=2, max_running=2, prefix_cache=True)
        s.submit([1, 2, 3], 4)
        s.submit_n([1, 2, 3, 4], 3, 2, temperature=1.0, seed=3)
        return s

    want = _outputs(workload().run())
    s = workload()
    got = {r.rid: r for r in s.step().finished}
    errors = []

    def other():
        for call in (s.step, lambda: s.submit([5], 1), s.run, lambda: s.abort(0)):
            try:
                call()
            except Exception as e:  # noqa: BLE001 - the test sorts them out
                errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 4 and all(isinstance(e, WrongThread) for e in errors), errors
    assert s.broken is None
    got.update(s.run())
    assert _outputs(got) == want
    s.check_audit()
