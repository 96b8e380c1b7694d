"""The continuity machine: every finished request's tokens and slot state, and every parked
session's state, equal a fresh replay of the transcript, bit for bit."""

import torch
from hypothesis import settings

from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.pool import StatePool
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.machines.continuity import CachedContinuityMachine, ContinuityMachine, continuation, replay
from slotwarden.verification.machines import MODEL


ContinuityMachine.TestCase.settings = settings(max_examples=15, stateful_step_count=20, deadline=None)
TestContinuity = ContinuityMachine.TestCase


def test_replay_is_what_one_fresh_request_computes():
    sched = build(MODEL, slots=1)  # the machine's float64 model
    req = sched.requests[sched.submit([5, 1, 7, 7], 3)]
    sched.run(50)
    out = req.output
    assert continuation([5, 1, 7, 7], out) == out
    assert continuation([5, 1, 7, 7], [out[0] + 1]) != [out[0] + 1]
    state, preds = replay((5, 1, 7))
    assert len(preds) == 3 and all(t.dtype == torch.float64 for t in state)


def test_a_lend_that_loses_the_session_state_is_caught(monkeypatch):
    """A broken pool whose LEND zeroes the slot: the session's next turn starts from nothing."""
    lend = StatePool.lend

    def zeroing(self, ids, session, request):
        out = lend(self, ids, session, request)
        for t in self.tensors:
            t[:, out] = 0
        return out

    monkeypatch.setattr(StatePool, "lend", zeroing)
    r = run_machine("lend zeroes", ContinuityMachine, Budget(50, 20), 0, shrink=False)
    assert not r.passed and "transcript" in r.error


CachedContinuityMachine.TestCase.settings = settings(max_examples=15, stateful_step_count=20, deadline=None)
TestCachedContinuity = CachedContinuityMachine.TestCase
