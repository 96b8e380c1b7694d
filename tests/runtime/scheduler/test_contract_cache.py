"""The fault contract with the prefix cache on: a fault at every cache move (insert, lock, unlock,
evict, copy, fence) continues exactly or refuses cleanly; and a failed step names what it ended."""

import pytest


from slotwarden.kernels.layer import TinyMambaConfig
from slotwarden.model.vocabulary import Actor, Group
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.radix.cache import Match
from slotwarden.runtime.scheduler.scheduler import Scheduler, SchedulerBroken, StepFailed

from injection import CONFIG, Injector, Model, fault_points


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
