"""Bounded memory: ended requests and closed sessions leave the scheduler's tables (their
results are handed back in the step reports), and no ended request keeps a step's tokens
tensor alive. 20k requests through a scheduler whose layer is stubbed (no compute) and whose
pool checks are off (the tables are the scheduler's, the ledger is fixed-size)."""

import gc
import tracemalloc
import weakref
from collections import deque


from slotwarden.bench.scheduler import StubModel
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.scheduler import Scheduler

from scheduling import MODEL

REQUESTS = 20_000


class TrackedStub(StubModel):
    """The bench's stub layer, remembering a weak reference to every tokens tensor it returns."""

    def __init__(self, rows):
        super().__init__(rows, "cpu")
        self.alive = weakref.WeakSet()  # the tensors handed out that something still holds

    def _track(self, t):
        self.alive.add(t)
        return t

    def prefill(self, tokens, *args, **kwargs):
        return self._track(self.tokens[: len(tokens)].clone())

    def decode(self, tokens, *args, **kwargs):
        return self._track(self.tokens[: tokens.shape[0]].clone())


def table_sizes(sched) -> dict:
    """len() of every container the scheduler holds, and of each session's lists."""
    sizes = {k: len(v) for k, v in vars(sched).items() if isinstance(v, (dict, list, deque, set))}
    for s in sched.sessions.values():
        for k in ("turns", "transcript", "pending"):
            sizes[f"session.{k}"] = max(sizes.get(f"session.{k}", 0), len(getattr(s, k)))
    return sizes


def drive(sched, n, results, peaks, sessions_every=50):
    """Submit `n` requests, a few at a time (every `sessions_every`-th a two-turn session that
    is then closed), stepping as they go; count every result of the reports by its reason."""
    submitted, open_sessions = 0, []
    while submitted < n or not sched.idle:
        while submitted < n and len(sched.waiting) < 24:
            if submitted % sessions_every == 0:
                sid = sched.open_session()
                sched.submit([1, 2], 2, session=sid)
                sched.submit([3], 1, session=sid)
                open_sessions.append(sid)
                submitted += 2
            else:
                sched.submit([1 + submitted % 60], 1 + submitted % 3)
                submitted += 1
        report = sched.step()
        for r in report.finished:
            results[r.reason] = results.get(r.reason, 0) + 1
            results["tokens"] = results.get("tokens", 0) + len(r.output)
        if len(open_sessions) > 4:
            sched.close_session(open_sessions.pop(0))
        for k, v in table_sizes(sched).items():
            peaks[k] = max(peaks.get(k, 0), v)
    for sid in open_sessions:
        sched.close_session(sid)
    for r in sched.run(100).values():
        results[r.reason] = results.get(r.reason, 0) + 1
        results["tokens"] = results.get("tokens", 0) + len(r.output)


def test_twenty_thousand_requests_leave_the_tables_bounded_and_no_tensor_alive():
    sched = build(MODEL, slots=64, check="off", max_running=64, token_budget=128, chunk_size=8, overlap=True)
    stub = TrackedStub(128)
    sched.model = stub
    results, peaks = {}, {}
    drive(sched, REQUESTS - 4_000, results, peaks)
    gc.collect()
    tracemalloc.start()
    try:
        drive(sched, 1_000, results, peaks)  # traced from here: the recorder and caches settle
        gc.collect()
        settled = tracemalloc.get_traced_memory()[0]
        drive(sched, 3_000, results, peaks)  # the last 3k requests: memory must stay flat
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - settled
    finally:
        tracemalloc.stop()
    # every request's result was handed back once, with its tokens (1-3 each)
    assert results["length"] == REQUESTS and 0 < results["tokens"] <= 3 * REQUESTS, results
    # the tables hold only what is live: bounded by the pool and the queue, not by the history
    assert max(peaks.values()) <= 128, peaks  # 64 running, about 26 waiting, a few queued turns
    assert not sched.requests and not sched.sessions and not sched.outbox and sched.idle
    assert grown < 100_000, f"{grown} bytes more after 3000 more requests"  # < 34 bytes a request (it was 1.6 KB)
    assert len(stub.alive) <= 2, f"{len(stub.alive)} step tensors still alive after the run"


class KeepsEnded(Scheduler):
    """A broken variant: ended requests stay in a table, step tensor and all (as they did)."""

    def _leave(self, req, reason):
        tail = req.tail
        super()._leave(req, reason)
        req.tail = tail
        self.history[req.rid] = req


def test_the_bounds_catch_a_scheduler_that_keeps_ended_requests():
    sched = build(MODEL, slots=8, cls=KeepsEnded, check="off", max_running=8, overlap=True)
    sched.history = {}
    stub = TrackedStub(64)
    sched.model = stub
    peaks = {}
    drive(sched, 600, {}, peaks)
    assert peaks["history"] > 128 and len(stub.alive) > 2
