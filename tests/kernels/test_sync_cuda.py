"""On CUDA, the scheduler's steps make no hidden device sync: the only one is the documented
`.tolist()` that brings a finished step's tokens to the host (`Scheduler._process`), run here
under an allowance. Everything else (the ledger, batch building, alloc's zeroing, prefill and
decode, the ids, prompts, lengths and rows sent to the device through pinned memory, finishing,
parking, fences) must pass `torch.cuda.set_sync_debug_mode("error")`."""

from __future__ import annotations

import pytest
import torch
from slotwarden.kernels.slots import to_device
from slotwarden.runtime.scheduler.scheduler import Scheduler

from slotwarden.cli.demo import build_scheduler

pytestmark = pytest.mark.gpu


def with_allowance(fn):
    """`fn` with syncs allowed (the documented `.tolist()` of a finished step)."""

    def allowed(*args, **kwargs):
        mode = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("default")
        try:
            return fn(*args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode(mode)

    return allowed


def steps(sched, workload) -> list:
    """Submit `workload` (prompt, budget, session), then step until idle; the kinds of the steps."""
    for prompt, budget, session in workload:
        sched.submit(prompt, budget, session=session)
    kinds = []
    for _ in range(30):
        if sched.idle:
            return kinds
        kinds.append(sched.step().kind)
    raise AssertionError(f"not idle after 30 steps: {kinds}")


def test_scheduler_steps_sync_only_where_documented(monkeypatch):
    sched = build_scheduler(8, "cuda", session_timeout=None)
    steps(sched, [([1, 2], 2, None)])  # warm-up outside the check: the weights reach the device once, cached
    sid = sched.open_session()
    monkeypatch.setattr(Scheduler, "_process", with_allowance(Scheduler._process))
    torch.cuda.set_sync_debug_mode("error")
    try:
        # a session turn (a fresh slot, parked at its finish) beside five plain requests, then the
        # next turn (the parked slot lent to it and given back at its finish)
        kinds = steps(sched, [([3, 4], 2, sid)] + [([1 + i, 2, 3], 3, None) for i in range(5)])
        kinds += steps(sched, [([5], 2, sid)])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert {"prefill", "decode"} <= set(kinds)
    assert sched.counters.finished == 8


def test_the_check_can_fail():
    """The sync check is live: a blocking host-to-device copy (what the decode path did before
    its rows went through pinned memory) raises under it."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError):
            torch.tensor([1, 2, 3], device="cuda")
            torch.ones(1, device="cuda").item()
        to_device(torch.tensor([1, 2, 3]), torch.device("cuda"))  # no sync: passes
    finally:
        torch.cuda.set_sync_debug_mode("default")
