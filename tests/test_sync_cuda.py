"""On CUDA, the decode steps of the scheduler make no hidden device sync: the only one is the
documented `.tolist()` that brings a finished step's tokens to the host (`Scheduler._process`),
run here under an allowance. Everything else (the ledger, batch building, the ids and rows sent
to the device through pinned memory) must pass `torch.cuda.set_sync_debug_mode("error")`.
Prefill steps are left out: the layer's prefill copies the prompt lengths to the device
(a sync its docstring states)."""

from __future__ import annotations

import pytest
import torch
from slotwarden.runtime.pool import to_device
from slotwarden.runtime.scheduler import Scheduler

from slotwarden.demo import build_scheduler

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


def test_decode_steps_sync_only_where_documented(monkeypatch):
    sched = build_scheduler(8, "cuda", session_timeout=None)
    for _ in range(8):
        sched.submit([1, 2], 1 << 20)
    for _ in range(4):  # prefill (its documented syncs), then decode
        sched.step()
    assert len(sched.running) == 8
    monkeypatch.setattr(Scheduler, "_process", with_allowance(Scheduler._process))
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(4):
            assert sched.step().kind == "decode"
    finally:
        torch.cuda.set_sync_debug_mode("default")


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
