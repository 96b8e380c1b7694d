"""Fault injection for the scheduler's contract tests: an injector that raises before or after
a chosen pool or model call, the small workloads it is driven with, and the check of the outcome
(identical tokens, or a refusal of every further call naming the fault)."""

import pytest

import torch

from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.model.vocabulary import Group
from slotwarden.runtime.scheduler.build import build
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
