"""Speculative decoding: greedy acceptance keeps every request's tokens and every session's state
bit-identical to plain decoding, for every k and drafter, over sessions, the prefix cache (hits
and evictions), aborts, retractions, chunked prefill, parallel sampling and overlap; the window
goes through the declared lifecycle (a commit before the verify's fence is refused)."""

import pytest
import torch

from slotwarden.model.errors import IllegalCopy, IllegalMove
from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.scheduler.drafter import NgramDrafter
from slotwarden.runtime.scheduler.errors import BadRequest
from slotwarden.runtime.scheduler.speculative import accept
from slotwarden.verification import speculative
from scheduling import make_scheduler

SELF = speculative.DRAFTERS["target"]  # the target drafting for itself: every draft accepted, up to the budget


def test_accept_keeps_the_agreeing_drafts_then_the_targets_token_to_the_budget():
    assert accept((5, 6, 7), [5, 6, 9, 1], 10) == ((5, 6, 9), 2, 2)  # two agree: state after position 2
    assert accept((5, 6), [5, 6, 8], 10) == ((5, 6, 8), 2, 2)  # all agree, then the bonus token
    assert accept((4,), [5, 6], 10) == ((5,), 0, 0)  # none agrees: the target's own token
    assert accept((), [5], 10) == ((5,), 0, 0)  # no drafts: a plain decode
    assert accept((5, 6, 7), [5, 6, 7, 8], 2) == ((5, 6), 1, 2)  # cut to the budget


def test_the_ngram_drafter_proposes_what_followed_the_last_occurrence():
    d = NgramDrafter(max_n=2)
    assert d.propose([[1, 2, 3, 1, 2], [9, 8, 7], [4]], [2, 2, 1]) == [[3, 1], [], []]
    assert d.propose([[1, 2, 1, 3, 1]], [3]) == [[3, 1]]  # the latest earlier match of the last token


_play, _same = speculative.play, speculative.same


@pytest.mark.parametrize("overlap", [False, True], ids=["sync", "overlap"])
@pytest.mark.parametrize("cache", [False, True], ids=["plain", "cache"])
def test_every_k_and_drafter_is_bit_identical_to_plain_decoding(overlap, cache):
    assert _play(0, overlap=overlap, cache=cache)[2].counters.retractions  # the workload retracts
    assert _play(2, overlap=overlap, cache=cache)[2].speculating == 0  # every speculative request left
    bad, totals = speculative.compare(configs=((overlap, cache),))
    assert bad == [] and totals["runs"] == 9
    assert totals["verified"] and totals["accepted"] and totals["aborts"] == 9


def test_a_commit_that_copies_the_wrong_position_is_caught_by_the_comparison(monkeypatch):
    """The broken variant: the state of the position before the accepted one is committed."""
    from slotwarden.runtime.scheduler import moves

    original = moves.Moves.commit_window

    def off_by_one(self, req, position):
        original(self, req, max(position - 1, 0))

    plain = _play(0)
    monkeypatch.setattr(moves.Moves, "commit_window", off_by_one)
    assert not _same(plain, _play(2, drafter=SELF))


def test_a_verify_that_never_commits_is_caught_by_the_comparison(monkeypatch):
    """SGLang #26351 at the runtime: the window goes back, the committed slot is never copied into."""
    from slotwarden.runtime.scheduler import moves

    def no_copy(self, req, position):
        self.pool.fire(Event.COMMIT, [req.slot, *req.window.slots], Actor.request(req.rid))
        req.window = None

    plain = _play(0)
    monkeypatch.setattr(moves.Moves, "commit_window", no_copy)
    assert not _same(plain, _play(2, drafter=SELF))


def test_the_ledger_refuses_a_commit_before_the_verify_is_fenced():
    sched = make_scheduler(4)
    sched.drafter = SELF
    rid = sched.submit([1, 2, 3], 6, spec_k=2)
    sched.step()  # the prefill
    req = sched.requests[rid]
    batch, _ = sched.batches.build()
    assert batch.kind == "verify" and req.window is not None
    sched.landed.append(sched._launch(batch))  # launched as `step` does, not yet processed nor fenced
    before = sched.pool.conv[0][:, req.slot].clone()
    assert set(sched.pool.state_of(list(req.window.slots))) == {State.VERIFYING}
    with pytest.raises(IllegalMove, match="VERIFYING"):
        sched.commit_window(req, 0)  # the accepted count is not known before the fence (vLLM #50021)
    assert set(sched.pool.state_of(list(req.window.slots))) == {State.VERIFYING}  # refused whole
    assert torch.equal(sched.pool.conv[0][:, req.slot], before)  # and nothing was copied in
    sched.run()
    assert len(sched.outbox) == 0 and sched.counters.verified >= 1
    assert sched.check_audit().problems == ()


def test_an_abort_or_a_failure_mid_verify_gives_the_window_back():
    sched = make_scheduler(5)
    sched.drafter = SELF
    rid = sched.submit([1, 2, 3], 8, spec_k=2)
    sched.step()
    batch, _ = sched.batches.build()
    window = sched.requests[rid].window.slots
    sched.landed.append(sched._launch(batch))
    sched.abort(rid)
    assert set(sched.pool.state_of(list(window))) == {State.RELEASED}  # the verify in flight may still write it
    sched.run()
    assert sched.idle and sched.check_audit().problems == ()


def test_spec_k_is_refused_outside_its_range_and_with_sampling():
    sched = make_scheduler(4)
    for bad in (-1, 17, True, 1.0, "2"):
        with pytest.raises(BadRequest, match="spec_k"):
            sched.submit([1], 2, spec_k=bad)
    with pytest.raises(BadRequest, match="temperature 0"):
        sched.submit([1], 2, spec_k=1, temperature=0.5)
    assert sched.submitted == 0


def test_a_verified_window_position_is_never_copied_only_committed():
    """Only committed state is copied: the request holds its window, yet `copy` and `fork` refuse
    a VERIFYING or VERIFIED source (before this check, a request could copy uncommitted state)."""
    sched = make_scheduler(6)
    sched.drafter = SELF
    rid = sched.submit([1, 2, 3], 6, spec_k=2)
    sched.step()
    req = sched.requests[rid]
    batch, _ = sched.batches.build()
    sched.landed.append(sched._launch(batch))
    actor = Actor.request(rid)
    with pytest.raises(IllegalCopy, match="not committed state"):
        sched.pool.copy([req.window.slots[0]], [req.slot], actor)
    with pytest.raises(IllegalCopy, match="not committed state"):
        sched.pool.fork(req.window.slots[0], actor)
    sched.run()
    assert sched.idle and sched.check_audit().problems == ()
