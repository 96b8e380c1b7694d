"""The public API: `build()` sizes the pool from the layer and refuses a pool that does not fit
it; `session_state`, `counters` and `run()`; the names `slotwarden` re-exports."""

import dataclasses
import subprocess
import sys

import pytest
import torch

import slotwarden
from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.model.vocabulary import State
from slotwarden.runtime.scheduler import scheduler as scheduler_module
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.scheduler.scheduler import Scheduler, StepFailed
from slotwarden.runtime.scheduler.errors import NoSessionState, SessionBusy, SessionClosed, UnknownSession
from slotwarden.runtime.scheduler.shapes import PoolMismatch, pool_config

from scheduling import MODEL, fresh_state

SMALL = TinyMambaConfig(layers=1, d_model=8, heads=1, head_dim=4, dstate=4, dtype=torch.float64)


# -- build --------------------------------------------------------------------------------------
def test_build_sizes_the_pool_from_the_layer():
    sched = build(SMALL, slots=3)
    conv_shape, ssm_shape = sched.model.state_shapes(3)
    assert [tuple(t.shape) for t in sched.pool.conv] == [conv_shape] and tuple(sched.pool.ssm.shape) == ssm_shape
    assert sched.pool.conv[0].dtype == sched.pool.ssm.dtype == torch.float64
    rid = sched.submit([1, 2, 3], 2)
    assert len(sched.run()[rid].output) == 2


MISFITS = {
    "layers": dict(layers=2),
    "conv_dims": dict(conv_dims=(5,)),
    "conv_kernel": dict(conv_kernel=3),
    "heads": dict(heads=2),
    "head_dim": dict(head_dim=5),
    "state_size": dict(state_size=5),
    "conv_dtype": dict(conv_dtype=torch.float32),
    "ssm_dtype": dict(ssm_dtype=torch.float32),
}


@pytest.mark.parametrize("field", MISFITS)
def test_a_pool_that_does_not_fit_the_layer_is_refused_at_construction(field):
    """Each field alone: named by `build` and by a Scheduler built by hand, before any step."""
    cfg = dataclasses.replace(pool_config(SMALL, 2), **MISFITS[field])
    with pytest.raises(PoolMismatch, match=f"{field}: the pool has") as caught:
        build(SMALL, pool=cfg)
    assert caught.value.fields == (field,)
    with pytest.raises(PoolMismatch) as caught:
        Scheduler(StatePool(cfg), TinyMamba(SMALL))
    assert caught.value.fields == (field,)


def test_without_the_check_a_misfit_reaches_the_first_step(monkeypatch):
    """What the check at construction is for: with it removed, the same pool is taken and the
    mismatch only surfaces inside the forward pass, as an untyped error from the kernels."""
    monkeypatch.setattr(scheduler_module, "check_fits", lambda config, model: None)
    cfg = dataclasses.replace(pool_config(SMALL, 2), heads=2)
    sched = Scheduler(StatePool(cfg), TinyMamba(SMALL))  # not refused
    sched.submit([1, 2], 1)
    with pytest.raises(StepFailed) as caught:
        sched.step()
    assert not isinstance(caught.value.__cause__, PoolMismatch)


def test_build_arguments():
    with pytest.raises(ValueError, match="not both"):
        build(SMALL, slots=2, pool=pool_config(SMALL, 2))
    with pytest.raises(PoolMismatch, match="device"):
        build(SMALL, pool=pool_config(SMALL, 2, device="cpu"), device="meta")
    sched = build(SMALL, slots=2, config=scheduler_module.SchedulerConfig(max_running=1), overlap=True)
    assert sched.config.max_running == 1 and sched.config.overlap
    with pytest.raises(TypeError):
        build(SMALL, slots=2, no_such_setting=1)


# -- one order and one target type for firing events ---------------------------------------------
def test_events_are_fired_event_first_with_an_int_target():
    """`fire(event, ids, actor, target)` on the pool, the guard and the ledger; the target is
    an int id, and an Actor given as target is refused (typed) with nothing changed."""
    from slotwarden.model.errors import LifecycleError
    from slotwarden.model.vocabulary import Actor, Event
    from slotwarden.runtime.guard import LedgerGuard
    from slotwarden.trace_examples import FreeList

    pool = StatePool(pool_config(SMALL, 2))
    guard = LedgerGuard(FreeList(2), 2)
    request = Actor.request(1)
    for fire, ledger, ids in (
        (pool.fire, pool.ledger, pool.alloc(1, request)),
        (guard.fire, guard.ledger, guard.alloc(1, request)),
    ):
        fire(Event.ADMIT, ids, request)
        before = ledger.snapshot()
        with pytest.raises(LifecycleError, match="target"):
            fire(Event.PARK, ids, request, Actor.session(5))
        assert all(torch.equal(v, before[k]) for k, v in ledger.snapshot().items() if k != "counters")
        fire(Event.PARK, ids, request, 5)
        assert ledger.record(int(ids[0])).owner == 5
    with pytest.raises(LifecycleError):  # the old order, ids first, is refused
        pool.fire(torch.tensor([1]), Event.LEND, Actor.session(5), 2)


# -- session_state -------------------------------------------------------------------------------
def test_session_state_is_a_copy_of_the_state_of_its_transcript():
    sched = build(MODEL, slots=2)
    sid = sched.open_session()
    sched.submit([1, 2, 3], 3, session=sid)
    sched.run()
    state = sched.session_state(sid)
    conv, ssm, _ = fresh_state(list(state.tokens))
    assert torch.equal(state.conv, conv) and torch.equal(state.ssm, ssm)
    assert state.tokens == tuple(sched.sessions[sid].transcript)
    assert detached(state, sched, sid)
    sched.submit([4], 2, session=sid)  # the next turn writes the slot in place ...
    sched.run()
    assert torch.equal(state.ssm, ssm)  # ... and the state read before stays as it was


def detached(state, sched, sid) -> bool:
    """Whether writing into a state read from session `sid` leaves the pool untouched."""
    slot = sched.sessions[sid].slot
    before, mine = sched.pool.ssm[:, slot].clone(), state.ssm.clone()
    state.ssm.add_(1.0)
    untouched = torch.equal(sched.pool.ssm[:, slot], before)
    state.ssm.copy_(mine)
    sched.pool.ssm[:, slot] = before
    return untouched


def test_the_copy_check_rejects_views():
    sched = build(MODEL, slots=2)
    sid = sched.open_session()
    sched.submit([1, 2], 1, session=sid)
    sched.run()
    slot = sched.sessions[sid].slot
    views = sched.session_state(sid)._replace(conv=sched.pool.conv[0][:, slot], ssm=sched.pool.ssm[:, slot])
    assert not detached(views, sched, sid)


def test_session_state_refusals_change_nothing():
    sched = build(MODEL, slots=2, max_running=2)
    sid = sched.open_session()
    with pytest.raises(UnknownSession):
        sched.session_state(sid + 1)
    with pytest.raises(NoSessionState, match="none of its turns has finished"):
        sched.session_state(sid)
    sched.submit([1, 2], 1, session=sid)
    sched.run()
    turn = sched.submit([3], 5, session=sid)
    sched.step()  # the turn borrows the session's slot
    slot = sched.sessions[sid].slot
    assert sched.pool.state_of([slot]) == [State.LENT_RUNNING]
    snapshot = sched.pool.ledger.snapshot()
    with pytest.raises(SessionBusy, match=f"lent to its turn, request {turn}"):
        sched.session_state(sid)
    assert all(torch.equal(v, snapshot[k]) for k, v in sched.pool.ledger.snapshot().items() if k != "counters")
    sched.abort(turn)  # ended mid-way: the state went back to the session, stale
    with pytest.raises(NoSessionState, match="stale"):
        sched.session_state(sid)
    sched.submit([4], 1, session=sid)
    sched.run()
    sched.session_state(sid)  # rebuilt by the next turn
    sched.close_session(sid)
    with pytest.raises(SessionClosed):
        sched.session_state(sid)
    assert sched.broken is None


# -- counters and run() --------------------------------------------------------------------------
def busy_workload(sched):
    """A workload that rolls back, retracts, aborts, drops a queued turn and fails a step.
    Returns (the step reports, {rid: Result})."""
    reports, results = [], {}

    def stepped():
        report = sched.step()
        reports.append(report)
        results.update((r.rid, r) for r in report.finished)

    sid = sched.open_session()
    sched.submit([1, 2], 2, session=sid)
    for p in ([7, 1, 7, 3, 3], [2, 4, 4, 4], [9, 9, 1, 2, 5, 6]):
        sched.submit(p, 6)
    for _ in range(6):
        stepped()
    sched.abort(sched.submit([5], 3))  # aborted while waiting
    sched.submit([3], 2, session=sid)
    sched.submit([4], 2, session=sid)
    sched.close_session(sid)  # queued turns are dropped
    while not sched.idle:
        stepped()
    forward = sched.model.prefill
    sched.model.prefill = lambda *a: (_ for _ in ()).throw(RuntimeError("device fault"))
    sched.submit([6, 6], 2)
    with pytest.raises(StepFailed):
        sched.step()
    sched.model.prefill = forward
    results.update((r.rid, r) for r in sched.collect())
    return reports, results


def check_counters(sched, reports, results):
    c = sched.counters
    reasons = [r.reason for r in results.values()]
    assert c.rollbacks == sum(r.rolled_back for r in reports) > 0
    assert c.retractions == sum(len(r.retracted) for r in reports) > 0
    assert c.finished == reasons.count("length") > 0
    assert c.aborts == reasons.count("abort") > 0
    assert c.dropped == reasons.count("session closed") > 0
    assert c.failures == sum(r.startswith("step ") for r in reasons) > 0
    assert c.steps == sched.pool.ledger.launched


def test_counters_add_up_what_the_steps_reported():
    sched = build(MODEL, slots=2, token_budget=5, chunk_size=4, retract_after=1)
    reports, results = busy_workload(sched)
    check_counters(sched, reports, results)


def test_the_counter_check_rejects_a_scheduler_that_does_not_count():
    class Uncounted(Scheduler):
        @property
        def counters(self):
            return super().counters._replace(rollbacks=0, retractions=0)

    sched = build(MODEL, slots=2, cls=Uncounted, token_budget=5, chunk_size=4, retract_after=1)
    reports, results = busy_workload(sched)
    with pytest.raises(AssertionError):
        check_counters(sched, reports, results)


def test_run_returns_what_the_steps_report():
    prompts = [([7, 1, 7], 4), ([2, 4], 3), ([9, 9, 1, 2], 2)]
    by_steps, by_run = build(MODEL, slots=2), build(MODEL, slots=2)
    for sched in (by_steps, by_run):
        sched.abort(sched.submit([1], 1))  # ended before any step: waits in the outbox
        for p, n in prompts:
            sched.submit(p, n)
    stepped = {}
    while not by_steps.idle:
        stepped.update((r.rid, r) for r in by_steps.step().finished)
    ran = by_run.run()
    assert ran == stepped and list(ran) == list(stepped) and len(ran) == len(prompts) + 1
    assert by_run.collect() == () and by_run.counters == by_steps.counters


# -- the top-level names -------------------------------------------------------------------------
def test_the_top_level_names_are_the_runtime_objects():
    from slotwarden.model import errors, vocabulary
    from slotwarden.runtime import guard, guarded_allocator

    assert slotwarden.Actor is vocabulary.Actor and slotwarden.State is vocabulary.State
    assert slotwarden.IllegalMove is errors.IllegalMove and slotwarden.StatePool is StatePool
    assert slotwarden.LedgerGuard is guard.LedgerGuard
    assert slotwarden.GuardedAllocator is guarded_allocator.GuardedAllocator
    assert slotwarden.Scheduler is Scheduler and slotwarden.build is build and slotwarden.PoolConfig is PoolConfig
    for name in slotwarden.__all__:
        assert getattr(slotwarden, name) is not None and name in dir(slotwarden)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        slotwarden.Nope


def test_import_slotwarden_loads_neither_torch_nor_the_runtime():
    code = "import sys, slotwarden; print(sorted(m for m in ('torch', 'slotwarden.runtime') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
