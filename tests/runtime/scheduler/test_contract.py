"""The fault contract: a fault (Exception or KeyboardInterrupt) injected at every call a small
workload makes, before or after it, with overlap off and on. After each, the scheduler either
continues and every request ends with the fault-free run's tokens (or, when the forward pass
itself failed, with a prefix of them and a "step N failed" reason) and a clean audit, or it
refuses every further call with SchedulerBroken naming the fault. Never different tokens."""

import asyncio

import pytest

import torch

from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.scheduler import Scheduler, SchedulerBroken
from injection import Injector, MODEL, Model, check_outcome, drive, fault_points, faulty_scheduler


@pytest.fixture(scope="module")
def reference():
    """The fault-free outputs (the same with overlap off and on), and each mode's call log."""
    logs = {}
    for overlap in (False, True):
        injector = Injector()
        rids, results, seen = drive(faulty_scheduler(injector, overlap))
        assert not seen and set(results) == set(rids)
        assert [results[r].reason for r in rids] == ["length", "abort", "length", "length", "length"]
        outputs = {k: r.output for k, r in results.items()}
        assert logs.setdefault("outputs", outputs) == outputs
        logs[overlap] = injector.log
    assert {"pool.retract", "pool.zero", "pool.abort", "pool.rollback", "pool.lend", "pool.park", "pool.close"} <= set(
        logs[False]
    )
    _, whole, _ = drive(faulty_scheduler(Injector(), overlap=False), abort=False)
    logs["outputs"][rids[1]] = whole[rids[1]].output  # what the aborted turn would have said: it says a prefix
    return logs


@pytest.mark.parametrize("overlap", [False, True], ids=["overlap off", "overlap on"])
def test_every_fault_point_continues_exactly_or_refuses_cleanly(reference, overlap):
    outputs = reference["outputs"]
    outcomes, kinds = {}, {}
    for at, when, exc in fault_points(reference[overlap]):
        injector = Injector(at, when, exc)
        sched = faulty_scheduler(injector, overlap)
        rids, results, seen = drive(sched)
        assert injector.fired == reference[overlap][at - 1]  # the same run up to the fault
        try:
            outcome = check_outcome(sched, injector, rids, results, seen, outputs)
        except AssertionError as e:
            raise AssertionError(f"fault {when} {injector.fired} (call {at}, {exc.__name__}): {e}") from None
        outcomes.setdefault(outcome, set()).add(f"{when} {injector.fired}")
        kinds.setdefault(injector.fired, set()).add((when, exc))
    # every kind of call was faulted before and after it, with both exceptions
    assert all(len({w for w, _ in k}) == 2 and len({e for _, e in k}) == 2 for k in kinds.values()), kinds
    exact = outcomes.pop("exact")
    failed = outcomes.pop("step failed", set())
    # faults anywhere but in the forward pass are retried exactly, before and after each call
    assert {p.split()[1] for p in exact} == set(kinds) - {"model.prefill", "model.decode"}, exact
    # the forward pass is the one fault point that ends requests (reported, never silent)
    assert {p.split()[1] for p in failed} == {"model.prefill", "model.decode"}, failed
    assert not outcomes, outcomes  # no single fault breaks the scheduler


def test_a_fault_while_ending_a_failed_step_breaks_it_for_good():
    """The forward pass raises, then ending its requests is interrupted: the scheduler cannot
    know what the slots hold, so it refuses every further call, naming the fault."""
    injector = Injector(at=None)
    sched = faulty_scheduler(injector, overlap=False)
    sched.model.prefill = Injector(1, "before", RuntimeError).wrap("model.prefill", MODEL.prefill)
    sched.pool.abort = Injector(1, "before", KeyboardInterrupt).wrap("pool.abort", sched.pool.abort)
    first = sched.submit([1, 2], 2)
    sched.submit([3], 2)
    with pytest.raises(KeyboardInterrupt):
        sched.step()
    assert sched.broken is not None
    for call in (
        sched.step,
        sched.run,
        sched.open_session,
        lambda: sched.submit([1], 1),
        lambda: sched.abort(first),
        lambda: sched.close_session(0),
    ):
        with pytest.raises(SchedulerBroken, match=r"KeyboardInterrupt.*ending the requests of failed step 1"):
            call()
    assert isinstance(sched.broken.__cause__, KeyboardInterrupt)
    sched.collect()  # results can still be taken


def test_without_the_contract_a_fault_in_result_processing_loses_the_request():
    """The check above can fail: a scheduler that forgets what was left to finish after a
    fault (drops its queue, as the old step did) never ends the request, so `drive` sees it
    missing and `check_outcome` rejects the run."""

    class Forgets(Scheduler):
        def _catch_up(self):
            try:
                super()._catch_up()
            except BaseException:
                self.finishing.clear()
                raise

    injector = Injector(at=None)
    log = faulty_scheduler(injector, False)
    drive(log)
    at = injector.log.index("release_finished") + 1
    injector = Injector(at, "before", RuntimeError)
    sched = faulty_scheduler(injector, False, cls=Forgets)
    rids, results, seen = drive(sched)
    with pytest.raises(AssertionError, match="never ended"):
        check_outcome(sched, injector, rids, results, seen, {r: () for r in rids})


def test_a_cancellation_in_the_forward_pass_ends_its_batch_and_propagates_as_is():
    sched = faulty_scheduler(Injector(), overlap=False)
    sched.model.prefill = Injector(1, "after", asyncio.CancelledError).wrap("model.prefill", MODEL.prefill)
    first = sched.submit([1, 2], 2)
    with pytest.raises(asyncio.CancelledError):  # not wrapped: the caller's task sees its cancellation
        sched.step()
    assert sched.broken is None
    later = sched.submit([1, 2], 2)
    done = sched.run(50)
    assert done[first].reason == "step 1 failed: CancelledError('injected after model.prefill')"
    assert done[first].output == () and len(done[later].output) == 2
    assert sched.check_audit().clean


def test_a_fault_at_a_session_turns_retraction_continues_exactly():
    """Session turns retracted for a seat (one seat, two slots: a first turn on its own slot, a
    later one on its session's lent slot): a fault before or after each RETRACT leaves the
    scheduler consistent, and the run goes on to the fault-free tokens with a clean audit."""

    def run(injector):
        sched = build(Model(injector), slots=2, max_running=1, retract_after=1, token_budget=4, chunk_size=2)
        sched.pool.retract = injector.wrap("pool.retract", sched.pool.retract)
        lent = []
        sid = sched.open_session()
        rids = [sched.submit(p, n, session=sid) for p, n in (([1, 2], 3), ([4, 5, 9], 5))] + [sched.submit([3, 7], 4)]
        results, seen = {}, []
        for _ in range(200):
            if sched.idle:
                break
            running_lent = {r.rid for r in sched.running if r.lent}
            try:
                report = sched.step()
                lent += [rid for rid in report.retracted if rid in running_lent]
                results.update((r.rid, r) for r in report.finished)
            except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included, on purpose
                seen.append(exc)
        results.update((r.rid, r) for r in sched.collect())
        return sched, rids, results, seen, lent

    def state(sched):  # the session's state after its last turn (its tokens alone may hide a wrong state)
        return sched.session_state(next(iter(sched.sessions)))

    sched, rids, reference, seen, lent = run(Injector())
    assert not seen and lent and sched.counters.retractions > len(lent)  # lent and own-slot turns retracted
    want = state(sched)
    log = Injector()
    run(log)
    points = [i + 1 for i, name in enumerate(log.log) if name == "pool.retract"]
    assert points
    for at in points:
        for when in ("before", "after"):
            for exc in (RuntimeError, KeyboardInterrupt):
                sched, _, results, seen, _ = run(Injector(at, when, exc))
                assert len(seen) == 1 and isinstance(seen[0], exc), (at, when, seen)
                assert {r: results[r].output for r in rids} == {r: reference[r].output for r in rids}, (at, when)
                assert sched.idle and sched.check_audit().clean
                got = state(sched)
                assert torch.equal(got.conv, want.conv) and torch.equal(got.ssm, want.ssm), (at, when, exc)
