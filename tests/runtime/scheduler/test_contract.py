"""The fault contract: a fault (Exception or KeyboardInterrupt) injected at every call a small
workload makes, before or after it, with overlap off and on. After each, the scheduler either
continues and every request ends with the fault-free run's tokens (or, when the forward pass
itself failed, with a prefix of them and a "step N failed" reason) and a clean audit, or it
refuses every further call with SchedulerBroken naming the fault. Never different tokens."""

import asyncio

import pytest

import torch

from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.model.vocabulary import Actor, Group
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.radix.cache import Match
from slotwarden.runtime.scheduler.scheduler import Scheduler, SchedulerBroken, StepFailed

POOL_CALLS = (
    "alloc",
    "alloc_each",
    "lend",
    "admit",
    "fire_each",
    "rollback",
    "zero",
    "retract",
    "finish",
    "park",
    "abort",
    "close",
    "launch",
    "fence",
    "on_device",
)
MODEL = TinyMamba(TinyMambaConfig(layers=1, dtype=torch.float64))  # one layer: cheap, still exact
CONFIG = dict(token_budget=3, chunk_size=2, max_running=2, retract_after=1)
TURNS = [([1, 2], 1), ([4], 3), ([6], 1)]  # the second is aborted once it has a token
PLAIN = [([7, 8, 9], 4), ([12], 2)]


class Injector:
    """Counts every wrapped call; the `at`-th raises `exc`, before or after calling through."""

    def __init__(self, at=None, when="before", exc=RuntimeError):
        self.calls, self.at, self.when, self.exc, self.fired = 0, at, when, exc, None
        self.log = []  # the name of every call, in order

    def wrap(self, name, fn):
        def wrapped(*args, **kwargs):
            self.calls += 1
            self.log.append(name)
            hit = self.calls == self.at
            if hit and self.when == "before":
                self.fired = name
                raise self.exc(f"injected before {name}")
            out = fn(*args, **kwargs)
            if hit:
                self.fired = name
                raise self.exc(f"injected after {name}")
            return out

        return wrapped


class Model:
    """The float64 TinyMamba behind the injector."""

    config = MODEL.config

    def __init__(self, injector):
        self.prefill = injector.wrap("model.prefill", MODEL.prefill)
        self.decode = injector.wrap("model.decode", MODEL.decode)


def faulty_scheduler(injector, overlap, cls=Scheduler):
    sched = build(Model(injector), slots=2, cls=cls, overlap=overlap, **CONFIG)
    for name in POOL_CALLS:
        setattr(sched.pool, name, injector.wrap(f"pool.{name}", getattr(sched.pool, name)))
    sched.release_finished = injector.wrap("release_finished", sched.release_finished)
    return sched


def drive(sched, abort=True):
    """The workload, retrying after every fault; returns (results, faults seen, broken)."""
    results, seen = {}, []
    sid = sched.open_session()
    rids = [sched.submit(p, n, session=sid) for p, n in TURNS] + [sched.submit(p, n) for p, n in PLAIN]

    aborted = rids[1]

    def abort_the_second_turn():
        req = sched.requests.get(aborted)
        if abort and req is not None and req.output and aborted not in results:
            sched.abort(aborted)
            results.update((r.rid, r) for r in sched.collect())

    def attempt(call):
        try:
            call()
        except SchedulerBroken:
            raise
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included, on purpose
            seen.append(exc)

    try:
        for phase in ("run", "close", "drain"):
            if phase == "close":
                attempt(lambda: sched.close_session(sid))
            for _ in range(100):
                if sched.broken or (sched.idle and sid not in sched.sessions or phase == "run" and sched.idle):
                    break
                attempt(lambda: results.update((r.rid, r) for r in sched.step().finished))
                attempt(abort_the_second_turn)
            if sched.broken:
                break
        for _ in range(3):  # one more step that succeeds: it fences what the last one left unfenced
            before = len(seen)
            if sched.broken:
                break
            attempt(lambda: results.update((r.rid, r) for r in sched.step().finished))
            if len(seen) == before:
                break
    except SchedulerBroken:
        pass
    results.update((r.rid, r) for r in sched.collect())
    return rids, results, seen


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


def fault_points(log):
    """(call number, before/after, exception) to inject: for each kind of call, up to 4 of its
    occurrences spread over the run, each before and after, the exception alternating (a call
    made once gets both exceptions)."""
    where: dict = {}
    for at, name in enumerate(log, start=1):
        where.setdefault(name, []).append(at)
    points = []
    for name, ats in where.items():
        chosen = sorted({ats[0], ats[len(ats) // 3], ats[2 * len(ats) // 3], ats[-1]})
        for i, at in enumerate(chosen):
            for j, when in enumerate(("before", "after")):
                excs = (
                    (RuntimeError, KeyboardInterrupt)
                    if len(ats) == 1
                    else ((RuntimeError, KeyboardInterrupt)[(i + j) % 2],)
                )
                points += [(at, when, exc) for exc in excs]
    return points


def check_outcome(sched, injector, rids, results, seen, reference):
    """The contract, for one injected fault; returns which of its outcomes it was."""
    assert injector.fired and seen, "the fault was injected and raised to the caller"
    first = seen[0]
    assert (
        isinstance(first, injector.exc) or isinstance(first, StepFailed) and isinstance(first.__cause__, injector.exc)
    ), first
    if sched.broken is not None:
        assert repr(seen[-1].__cause__ or seen[-1]) in str(sched.broken) or "injected" in str(sched.broken)
        for call in (
            sched.step,
            sched.run,
            sched.open_session,
            lambda: sched.submit([1], 1),
            lambda: sched.abort(0),
            lambda: sched.close_session(0),
        ):
            with pytest.raises(SchedulerBroken):
                call()
        for r in results.values():  # what was handed back before the break is still right
            assert r.output == reference[r.rid] or r.output == reference[r.rid][: len(r.output)]
        return "broken"
    assert len(seen) == 1, f"one fault injected, {len(seen)} raised: {seen!r}"
    assert set(results) == set(rids), f"requests never ended: {set(rids) - set(results)}"
    failed = False
    # a session turn that failed changed its session's history (reported): its later turns differ
    changed = {r.session for r in results.values() if "failed" in r.reason and r.session is not None}
    for rid, r in sorted(results.items()):
        if r.session in changed and rid > min(
            x.rid for x in results.values() if "failed" in x.reason and x.session == r.session
        ):
            continue
        if r.reason == "length" and rid != rids[1]:
            assert r.output == reference[rid], f"request {rid}: {r.output} != {reference[rid]} after {injector.fired}"
        else:
            assert (
                r.reason == "abort" and rid == rids[1] or "failed" in r.reason and injector.fired.startswith("model.")
            ), r.reason
            assert r.output == reference[rid][: len(r.output)], (
                f"request {rid}: {r.output} not a prefix of {reference[rid]}"
            )
            failed = failed or "failed" in r.reason
    audit = sched.check_audit()
    assert audit.clean and audit.counts[Group.FREE] == sched.pool.capacity
    assert not sched.requests and not sched.sessions
    return "step failed" if failed else "exact"


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


# -- the same contract with the prefix cache on --------------------------------------------------
CACHE_CALLS = ("insert", "lock", "unlock", "evict", "copy", "fence", "alloc", "rollback", "finish", "abort")
BASE = [7, 8, 9]


def cached_scheduler(injector, cls=Scheduler):
    sched = build(Model(injector), slots=3, overlap=False, prefix_cache=True, cls=cls, **CONFIG)
    for name in CACHE_CALLS:
        setattr(sched.pool, name, injector.wrap(f"pool.{name}", getattr(sched.pool, name)))
    return sched


def drive_cached(sched, base_output):
    """A base request, then follow-ups sharing its prefix (one aborted while queued), under
    pressure from plain requests; retried after every fault; then the cache is flushed."""
    results, seen = {}, []

    def attempt(call):
        try:
            call()
        except SchedulerBroken:
            raise
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included, on purpose
            seen.append(exc)

    def run_until_idle():
        for _ in range(60):
            if sched.broken or sched.idle:
                break
            attempt(lambda: results.update((r.rid, r) for r in sched.step().finished))

    rids = []
    try:
        rids.append(sched.submit(BASE, 4))
        run_until_idle()
        follow = BASE + list(base_output) + [5]
        rids += [sched.submit(follow, 2), sched.submit(BASE + list(base_output) + [6], 2), sched.submit([1], 2)]
        attempt(lambda: sched.abort(rids[3]))
        rids += [sched.submit(follow + [3, 4], 1), sched.submit([2, 3], 3)]
        run_until_idle()
        for _ in range(3):  # flush the cache, then an idle step that fences what is left and audits
            before = len(seen)
            attempt(sched.flush_cache)
            attempt(lambda: results.update((r.rid, r) for r in sched.step().finished))
            if len(seen) == before and sched.idle and sched.pool.available() == sched.pool.capacity:
                break
    except SchedulerBroken:
        pass
    results.update((r.rid, r) for r in sched.collect())
    return rids, results, seen


def test_with_the_prefix_cache_every_cache_fault_point_continues_exactly_or_refuses_cleanly():
    clean = cached_scheduler(Injector())
    base = clean.requests[clean.submit(BASE, 4)]
    clean.run()
    reference = Injector()
    sched = cached_scheduler(reference)
    rids, want, seen = drive_cached(sched, base.output)
    assert not seen and sched.prefix.stats().hits >= 2 and sched.prefix.stats().evictions >= 1
    assert [want[r].reason for r in rids] == ["length", "length", "length", "abort", "length", "length"]
    assert sched.check_audit().counts[Group.FREE] == sched.pool.capacity
    outcomes = {}
    points = [  # the pool's calls (a failed forward pass ends its requests: tested above), half the exceptions
        (at, when, exc)
        for at, when, exc in fault_points(reference.log)
        if reference.log[at - 1].startswith("pool.") and (exc is RuntimeError or at % 2)
    ]
    for at, when, exc in points:
        injector = Injector(at, when, exc)
        sched = cached_scheduler(injector)
        rids, results, seen = drive_cached(sched, base.output)
        where = f"fault {when} {injector.fired} (call {at}, {exc.__name__})"
        assert seen and sched.broken is None, f"{where}: {sched.broken}"
        for rid in rids:
            if rid != rids[3]:
                assert results[rid].reason == "length" and results[rid].output == want[rid].output, where
        audit = sched.check_audit()
        assert audit.clean and audit.counts[Group.FREE] == sched.pool.capacity, where
        outcomes.setdefault(injector.fired, set()).add(when)
    assert {f"pool.{c}" for c in ("insert", "lock", "unlock", "evict", "copy")} <= set(outcomes), outcomes


class UnrecordedLock(Scheduler):
    """Broken: a match records its lock only if the pool's call returns (no look at the pool's
    word after a fault), so a fault right after the LOCK leaves a lock nobody accounts for."""

    def cache_match(self, req):
        cache = self.prefix
        if req.session is not None or req.cached is not None or len(req.input) < 2:
            return
        node, length = cache.tree.match(req.input[:-1])
        if node is not None:
            slot = cache.tree.info(node).slot
            self.pool.lock([slot], Actor.request(req.rid))
            cache.tree.lock(node, req.rid)
            req.cached, req.fed = Match(node, slot, length), length


def test_a_cache_move_the_scheduler_does_not_record_after_a_fault_breaks_it():
    clean = cached_scheduler(Injector())
    base = clean.requests[clean.submit(BASE, 4)]
    clean.run()
    reference = Injector()
    drive_cached(cached_scheduler(reference), base.output)
    at = reference.log.index("pool.lock") + 1
    for cls, broken in ((Scheduler, False), (UnrecordedLock, True)):
        sched = cached_scheduler(Injector(at, "after"), cls)
        drive_cached(sched, base.output)
        assert (sched.broken is not None) is broken, cls
    assert "holds a lock on slot" in str(sched.broken)


def _group(cache: bool):
    s = build(TinyMambaConfig(layers=1), slots=4, max_running=4, prefix_cache=cache)
    return s, s.submit_n(list(range(1, 12)), 3, 3, temperature=1.0, seed=9)


def test_a_failed_step_that_held_only_a_groups_prompt_request_says_so():
    """Old code: StepFailed said only that the forward pass raised, though no Result reported a
    failure and `counters.failures` stayed 0. Now it names what it ended."""
    want, ids = _group(False)
    want = {rid: r.output for rid, r in want.run().items()}
    s, ids = _group(True)
    real, calls = s.model.prefill, []

    def fails_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("device lost")
        return real(*args, **kwargs)

    s.model.prefill = fails_once
    with pytest.raises(StepFailed, match=r"ended the prompt request 3 of parallel-sampling siblings \[0, 1, 2\]"):
        s.step()
    assert s.collect() == () and s.counters.failures == 0 and s.broken is None
    assert {rid: r.output for rid, r in s.run().items()} == want  # the siblings went on as plain requests


def test_a_failed_step_names_the_requests_it_ended():
    s = build(TinyMambaConfig(layers=1), slots=2)
    rid = s.submit([1, 2, 3], 2)
    s.model.prefill = broken_forward
    with pytest.raises(StepFailed, match=rf"ended requests \[{rid}\]"):
        s.step()
    (result,) = s.collect()
    assert result.reason.startswith("step 1 failed") and s.counters.failures == 1


def broken_forward(*_args, **_kwargs):
    raise RuntimeError("device lost")
