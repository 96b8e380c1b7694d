"""The scheduler's door: bad arguments to submit/abort/close_session are refused with a typed
error and change nothing; a refused turn leaves no orphan request behind."""

import numpy as np
import pytest
import torch

from slotwarden.runtime.scheduler.errors import BadRequest, SessionClosed, UnknownRequest, UnknownSession

from scheduling import MODEL, make_scheduler

VOCAB = MODEL.config.vocab


def snapshot(sched):
    return (
        sched.submitted,
        sched.opened,
        {rid: (r.phase, r.slot, list(r.input)) for rid, r in sched.requests.items()},
        {sid: (s.status, s.slot, list(s.turns), s.turn) for sid, s in sched.sessions.items()},
        [r.rid for r in sched.waiting],
        [r.rid for r in sched.running],
        sched.pool.ledger.snapshot()["state"].tolist(),
        len(sched.outbox),
    )


@pytest.fixture
def busy():
    """A scheduler mid-run: a session with a parked slot, a running and a waiting request."""
    sched = make_scheduler(slots=2, max_running=1)
    sid = sched.open_session()
    sched.submit([1, 2], 1, session=sid)
    sched.run(20)
    sched.submit([3, 4], 5)
    sched.submit([5], 2)
    sched.step()
    return sched, sid


BAD_PROMPTS = [
    [VOCAB],  # one past the vocabulary
    [1, 2, 10**6],
    [-1],
    [],
    [1.0],
    [1.5],
    [True],
    [None],
    ["3"],
    "abc",
    3,
    None,
    torch.tensor([[1, 2]]),
    torch.tensor([1.0, 2.0]),
    np.array([1.0]),
]


@pytest.mark.parametrize("prompt", BAD_PROMPTS, ids=repr)
def test_a_bad_prompt_is_refused_and_nothing_recorded(busy, prompt):
    sched, sid = busy
    before = snapshot(sched)
    for session in (None, sid):
        with pytest.raises(BadRequest):
            sched.submit(prompt, 2, session=session)
        assert snapshot(sched) == before


@pytest.mark.parametrize("budget", [0, -1, 1.5, True, "2", None, float("nan")], ids=repr)
def test_a_bad_budget_is_refused(busy, budget):
    sched, _ = busy
    before = snapshot(sched)
    with pytest.raises(BadRequest):
        sched.submit([1], budget)
    assert snapshot(sched) == before


def test_a_refusal_names_the_bad_token_and_where_it_is():
    sched = make_scheduler(slots=1)
    with pytest.raises(
        BadRequest, match=rf"prompt token {VOCAB} at position 1 is outside the vocabulary 0..{VOCAB - 1}"
    ):
        sched.submit([1, VOCAB], 1)


def test_integer_tensors_arrays_and_numpy_ints_are_accepted():
    sched = make_scheduler(slots=2)
    a = sched.submit(torch.tensor([1, 2, 3]), np.int64(2))
    b = sched.submit(np.array([1, 2, 3], dtype=np.int32), 2)
    c = sched.submit((np.int16(1), 2, 3), 2)
    done = sched.run(50)
    assert done[a].output == done[b].output == done[c].output and len(done[a].output) == 2


def test_a_turn_for_a_closed_or_unknown_session_is_refused_without_an_orphan(busy):
    sched, sid = busy
    other = sched.open_session()
    sched.close_session(other)
    before = snapshot(sched)
    with pytest.raises(SessionClosed):
        sched.submit([1], 1, session=other)
    for bad in (99, -1, True, 1.0, "0"):
        with pytest.raises(UnknownSession):
            sched.submit([1], 1, session=bad)
    assert snapshot(sched) == before


def test_a_closing_session_takes_no_more_turns(busy):
    sched, sid = busy
    sched.submit([6, 7], 3, session=sid)
    while not any(r.session == sid for r in sched.running):
        sched.step()
    sched.close_session(sid)  # deferred: its turn runs
    before = snapshot(sched)
    with pytest.raises(SessionClosed, match="closing"):
        sched.submit([1], 1, session=sid)
    assert snapshot(sched) == before


def test_abort_and_close_of_unknown_ids_are_refused_and_change_nothing(busy):
    sched, sid = busy
    before = snapshot(sched)
    for bad in (sched.submitted, 10**9, -1, True, 0.0, "1", None):
        with pytest.raises(UnknownRequest):
            sched.abort(bad)
        assert snapshot(sched) == before
    for bad in (sched.opened, -1, False, 0.0, None):
        with pytest.raises(UnknownSession):
            sched.close_session(bad)
        assert snapshot(sched) == before


def test_abort_of_an_ended_request_and_close_of_a_closed_session_do_nothing(busy):
    sched, sid = busy
    done = sched.run(100)
    sched.close_session(sid)
    sched.run(10)
    before = snapshot(sched)
    for rid in done:
        sched.abort(rid)
    sched.close_session(sid)
    assert snapshot(sched) == before
