"""Every step the scheduler launches has its write set checked: a row mapped to a slot its
request does not hold (a stale row mapping, state bound to the row) is refused before launch."""

import pytest
import torch

from slotwarden.model.errors import IllegalStep
from slotwarden.model.vocabulary import NOBODY, PAD_SLOT, Actor

from scheduling import make_scheduler


@pytest.mark.parametrize("overlap", [False, True])
def test_every_launch_checks_the_rows_against_the_ledger(overlap, monkeypatch):
    sched = make_scheduler(slots=3, overlap=overlap)
    seen = []
    launch = sched.pool.launch

    def spy(done=None, **rows):
        seen.append(rows)
        return launch(done, **rows)

    monkeypatch.setattr(sched.pool, "launch", spy)
    a, b = sched.submit([1, 2, 3], 3), sched.submit([4, 5], 3)
    results = sched.run(100)
    assert results[a].reason == results[b].reason == "length"
    assert seen and all(len(r["slots"]) == len(r["actors"]) > 0 for r in seen)


def test_a_row_on_another_requests_slot_is_refused_before_launch():
    """A broken variant: one running request's row names its neighbour's slot (vLLM #55951's
    stale rows, tenstorrent/vllm #454's row-bound state). The step is refused; nothing launched."""
    sched = make_scheduler(slots=3)
    sched.submit([1, 2, 3], 5)
    sched.submit([4, 5], 5)
    sched.step()
    first, second = sched.running[:2]
    launched = sched.pool.ledger.launched
    second.slot = first.slot
    with pytest.raises(IllegalStep, match="RUNNING slot with no claim on it") as refused:
        sched.step()
    assert (refused.value.row, refused.value.slot_id, refused.value.actor.id) == (1, first.slot, second.rid)
    assert sched.pool.ledger.launched == launched


def test_captured_sizes():
    from slotwarden.runtime.scheduler.forward import captured_sizes

    assert captured_sizes(1) == (1,) and captured_sizes(8) == (1, 2, 4, 8) and captured_sizes(6) == (1, 2, 4, 6)


@pytest.mark.parametrize("overlap", [False, True])
def test_padded_decode_is_bit_exact_and_its_pad_rows_address_only_the_pad_slot(overlap, monkeypatch):
    """Three requests decode in batches padded to 4 (then 2, 1 as they finish): the outputs and
    the sessions' states equal the unpadded run's exactly, and every pad row is on the pad slot."""
    runs = []
    for padded in (False, True):
        sched = make_scheduler(slots=4, overlap=overlap, pad_to_captured=padded)
        seen, launch = [], sched.pool.launch
        monkeypatch.setattr(sched.pool, "launch", lambda done=None, **rows: seen.append(rows) or launch(done, **rows))
        sids = [sched.open_session() for _ in range(3)]
        rids = [sched.submit([1 + i, 2, 3] * (i + 1), 3 + 2 * i, session=sid) for i, sid in enumerate(sids)]
        results = sched.run(200)
        states = [sched.session_state(sid) for sid in sids]
        runs.append(([results[r].output for r in rids], states, seen))
    (plain, plain_states, _), (padded, padded_states, seen) = runs
    assert plain == padded
    for a, b in zip(plain_states, padded_states):
        assert torch.equal(a.ssm, b.ssm) and torch.equal(a.conv, b.conv)
    pad_rows = [(s, a) for rows in seen for s, a in zip(rows["slots"], rows["actors"]) if a == NOBODY]
    assert pad_rows and all(s == PAD_SLOT for s, _ in pad_rows)
    assert all(len(rows["slots"]) in (1, 2, 4) for rows in seen if NOBODY in rows["actors"])


def test_a_pad_row_aliasing_a_parked_slot_is_refused(monkeypatch):
    """A broken variant (TensorRT-LLM #13151): pad rows scatter into a stale tail of real slots,
    here a slot a session parked between turns. Refused before launch."""
    from slotwarden.runtime.scheduler.rows import PersistentBatch

    sched = make_scheduler(slots=4, pad_to_captured=True)
    sid = sched.open_session()
    sched.submit([1, 2, 3], 2, session=sid)
    sched.run(50)
    parked = sched.sessions[sid].slot

    def stale_tail(self, rows):
        self.index[rows] = parked

    monkeypatch.setattr(PersistentBatch, "_pad", stale_tail)
    for prompt in ([4, 5], [6, 7], [8, 9]):
        sched.submit(prompt, 4)
    with pytest.raises(IllegalStep, match="pad row") as refused:
        sched.run(50)
    assert refused.value.slot_id == parked and refused.value.holder == Actor.session(sid)
