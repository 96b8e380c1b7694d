"""The scheduler end to end: continuity, fences, rollback, retraction, abort, close, faults."""

import random

import pytest
import torch

from slotwarden.model.vocabulary import Actor, Group, State
from slotwarden.runtime.scheduler.request import Phase, SessionStatus
from slotwarden.runtime.scheduler.scheduler import StepFailed

from scheduling import MODEL, fresh_state, make_scheduler

CONFIGS = [
    dict(),
    dict(overlap=True),
    dict(token_budget=6, chunk_size=4),  # chunked prefill, rollbacks
    dict(token_budget=6, chunk_size=4, overlap=True),
    dict(pad_to_captured=True, max_running=3),  # decode batches padded to 1, 2, 3
    dict(token_budget=6, chunk_size=4, overlap=True, pad_to_captured=True),
]


def run_session(sched, turns):
    sid = sched.open_session()
    rids = [sched.submit(prompt, n, session=sid) for prompt, n in turns]
    results = sched.run(500)
    return sid, [results[r].output for r in rids]


@pytest.mark.parametrize("config", CONFIGS)
def test_session_state_continuity(config):
    """A session's outputs and state over turns t1..tn equal one request over the concatenated
    input, exactly (float64)."""
    sched = make_scheduler(slots=2, **config)
    turns = [([1, 2, 3, 4, 5, 6, 7], 3), ([9, 8], 4), ([5] * 9, 2)]
    sid, outputs = run_session(sched, turns)
    concatenated = []
    for (prompt, _), output in zip(turns, outputs):
        concatenated += prompt
        alone = make_scheduler(slots=1, **config)
        one = alone.submit(concatenated, len(output))
        assert alone.run(500)[one].output == output
        concatenated += output
    s = sched.sessions[sid]
    assert s.transcript + s.pending == concatenated
    conv, ssm, _ = fresh_state(s.transcript)
    assert torch.equal(sched.pool.conv[0][:, s.slot], conv)
    assert torch.equal(sched.pool.ssm[:, s.slot], ssm)
    assert sched.pool.state_of([s.slot]) == [State.PARKED]


def test_no_slot_of_an_in_flight_step_is_handed_out_before_its_fence():
    sched = make_scheduler(slots=3, overlap=True, token_budget=8, chunk_size=4, max_running=3)
    used: dict[int, set] = {}
    forward, alloc, alloc_each = sched._forward, sched.pool.alloc, sched.pool.alloc_each

    def recording_forward(batch):
        used[sched.pool.ledger.launched] = {req.slot for req, _ in batch.items}
        return forward(batch)

    handed = []

    def checked(ids):
        if ids is not None:
            in_flight = set().union(*(s for step, s in used.items() if step > sched.device.finished))
            assert not set(ids.tolist()) & in_flight, f"slot {ids.tolist()} is used by a step in flight"
            handed.extend(ids.tolist())
        return ids

    sched._forward = recording_forward
    sched.pool.alloc = lambda n, owner: checked(alloc(n, owner))
    sched.pool.alloc_each = lambda request_ids: checked(alloc_each(request_ids))
    rng = random.Random(1)
    for i in range(12):
        sched.submit([rng.randrange(64) for _ in range(rng.randrange(1, 9))], rng.randrange(1, 5))
    sched.run(500)
    assert len(handed) >= 12  # slots were reused while steps were in flight
    assert max(s for s in used) >= 10


def test_rollback_returns_what_the_candidate_took():
    sched = make_scheduler(slots=3, token_budget=5, chunk_size=4)
    sid = sched.open_session()
    first = sched.submit([1, 2], 1, session=sid)
    done = sched.run(50)
    parked = sched.sessions[sid].slot
    sched.submit([3, 3, 3], 2)  # takes 3 tokens of the budget
    turn = sched.submit([4, 4, 4, 4], 1, session=sid)  # borrows the session's slot, needs 4 > 2 left
    report = sched.step()
    assert report.rolled_back == 1
    assert sched.requests[turn].phase is Phase.WAITING and sched.requests[turn].slot is None
    assert sched.pool.state_of([parked]) == [State.PARKED]  # back with its session, not freed
    assert sched.pool.held_by(Actor.session(sid)).tolist() == [parked]
    done.update(sched.run(50))
    assert done[turn].output and done[first].output


def test_retracted_request_recomputes_the_same_tokens():
    prompts = [([7, 1, 7], 6), ([2, 4], 5), ([9, 9, 1, 2], 4)]
    roomy = make_scheduler(slots=4)
    want = [roomy.submit(p, n) for p, n in prompts]
    wanted = roomy.run(200)
    tight = make_scheduler(slots=2, retract_after=1)
    got = [tight.submit(p, n) for p, n in prompts]
    retracted, results = [], {}
    while not tight.idle:
        report = tight.step()
        retracted += report.retracted
        results.update((r.rid, r) for r in report.finished)
    assert retracted, "the tight pool should have retracted someone"
    assert [results[r].output for r in got] == [wanted[r].output for r in want]


def _seat_pressure(overlap=False, **config):
    """One session's two turns and two plain requests; the second turn runs on the lent slot.
    Returns (outputs by submission order, the session's final state, ids of the lent turns
    retracted)."""
    sched = make_scheduler(slots=3, overlap=overlap, **config)
    sid = sched.open_session()
    rids = [sched.submit([1, 2, 3], 3, session=sid)]
    done = sched.run(100)
    rids.append(sched.submit([4, 5, 9, 30], 6, session=sid))
    sched.step()  # the turn borrows its session's slot and runs
    rids += [sched.submit([3, 7], 4), sched.submit([8, 8, 2], 3)]
    lent_retracted = []
    for _ in range(300):
        if sched.idle:
            break
        lent = {r.rid for r in sched.running if r.lent}
        report = sched.step()
        lent_retracted += [rid for rid in report.retracted if rid in lent]
        done.update((r.rid, r) for r in report.finished)
    done.update((r.rid, r) for r in sched.collect())
    return [done[r].output for r in rids], sched.session_state(sid), lent_retracted


@pytest.mark.parametrize("overlap", [False, True])
def test_a_session_turn_retracted_for_a_seat_recomputes_the_same_tokens_and_state(overlap):
    """A starved head of queue with a free slot but no seat retracts a session turn running on
    its lent slot: the slot goes back to the session (marked stale) and the turn, fed again from
    the transcript, ends with the tokens and the state of a run without pressure."""
    roomy = _seat_pressure(overlap, max_running=8, retract_after=None)
    tight = _seat_pressure(overlap, max_running=1, retract_after=1)
    assert tight[2] and not roomy[2]
    assert tight[0] == roomy[0]
    assert torch.equal(tight[1].conv, roomy[1].conv) and torch.equal(tight[1].ssm, roomy[1].ssm)
    assert tight[1].tokens == roomy[1].tokens


def test_a_head_starved_of_a_slot_never_retracts_a_lent_turn():
    """Retracting a turn on its session's lent slot frees no slot: a head of queue that lacks
    one waits for another victim."""
    sched = make_scheduler(slots=1, max_running=4, retract_after=1)
    sid = sched.open_session()
    sched.submit([1, 2], 1, session=sid)
    sched.run(50)
    turn = sched.submit([4, 5], 8, session=sid)
    sched.step()  # the turn runs on the lent slot, the only one
    sched.submit([3], 2)  # needs a free slot: none
    for _ in range(4):
        assert not sched.step().retracted
    assert sched.requests[turn].phase is Phase.RUNNING


def test_two_requests_never_retract_each_other_forever(monkeypatch):
    """A victim must have kept a token since it was admitted: with one seat, two requests take
    turns and both finish. Without that rule (overlap: a request's first token is still in
    flight when the other retracts it, which voids it) they retract each other forever."""
    from slotwarden.runtime.scheduler import admission

    def work():
        sched = make_scheduler(slots=2, max_running=1, retract_after=1, overlap=True)
        a, b = sched.submit([1, 2, 3], 3), sched.submit([7, 8, 9], 3)
        done = sched.run(200)
        return len(done[a].output), len(done[b].output)

    assert work() == (3, 3)

    def hasty(sched, exclude, frees_slot=True):
        able = [r for r in sched.running if r.rid not in exclude and not (frees_slot and r.lent)]
        return max(able, key=lambda r: (r.remaining(), r.rid), default=None)

    monkeypatch.setattr(admission, "pick_victim", hasty)
    with pytest.raises(RuntimeError, match="not idle"):
        work()


def test_abort_queued_running_and_lent_turn():
    sched = make_scheduler(slots=2, max_running=1)
    sid = sched.open_session()
    t1 = sched.submit([1, 2, 3], 2, session=sid)
    done = sched.run(50)
    slot = sched.sessions[sid].slot
    t2 = sched.submit([4, 5], 10, session=sid)
    queued = sched.submit([6], 3)
    sched.step()  # the turn borrows the session's slot and runs; the plain request waits
    assert sched.requests[t2].phase is Phase.RUNNING and sched.pool.state_of([slot]) == [State.LENT_RUNNING]
    sched.abort(queued)
    assert queued not in sched.requests and sched.pool.available() == 1
    sched.abort(t2)
    assert sched.pool.state_of([slot]) == [State.PARKED] and sched.sessions[sid].stale
    t3 = sched.submit([7], 2, session=sid)
    done.update(sched.run(50))
    assert done[queued].reason == "abort" and done[t2].reason == "abort"
    # the stale session fed its whole transcript again: continuity still holds
    s = sched.sessions[sid]
    conv, ssm, _ = fresh_state(s.transcript)
    assert torch.equal(sched.pool.ssm[:, s.slot], ssm) and not s.stale
    assert done[t1].output and done[t3].output
    running = sched.submit([8, 8], 50)
    sched.step()
    req = sched.requests[running]
    held = req.slot
    sched.abort(running)
    assert sched.pool.state_of([held]) == [State.RELEASED]  # freed at the next fence, not before
    assert req.slot is None and running not in sched.requests
    assert sched.pool.held_by(Actor.request(running)).numel() == 0
    sched.step()
    assert sched.pool.state_of([held]) == [State.FREE]


def test_close_is_deferred_while_a_turn_runs_and_releases_exactly_its_slot():
    sched = make_scheduler(slots=2)
    sid = sched.open_session()
    sched.submit([1, 2], 1, session=sid)
    sched.run(50)
    slot = sched.sessions[sid].slot
    sched.submit([3], 3, session=sid)
    sched.step()
    sched.close_session(sid)
    assert sched.sessions[sid].status is SessionStatus.CLOSING
    assert sched.pool.state_of([slot]) == [State.LENT_RUNNING]
    sched.run(50)
    assert sid not in sched.sessions  # closed: it left the tables
    assert sched.pool.ledger.counts()[Group.FREE] == 2


def test_reaper_closes_idle_sessions():
    sched = make_scheduler(slots=2, session_timeout=2)
    sid = sched.open_session()
    sched.submit([1], 1, session=sid)
    sched.run(20)
    for _ in range(4):
        sched.step()
    assert sid not in sched.sessions
    assert sched.pool.ledger.counts()[Group.FREE] == 2


class Exploding:
    """TinyMamba whose forward raises at the n-th call, after writing garbage into the slots."""

    config = MODEL.config

    def __init__(self, at):
        self.calls, self.at = 0, at

    def _maybe(self, slots, ssm):
        self.calls += 1
        if self.calls == self.at:
            ssm[:, slots] = float("nan")
            raise RuntimeError("device fault")

    def prefill(self, tokens, slots, conv, ssm):
        self._maybe(slots, ssm)
        return MODEL.prefill(tokens, slots, conv, ssm)

    def decode(self, tokens, slots, conv, ssm):
        self._maybe(slots, ssm)
        return MODEL.decode(tokens, slots, conv, ssm)


@pytest.mark.parametrize("overlap", [False, True])
def test_a_failing_forward_pass_aborts_its_requests_cleanly(overlap):
    sched = make_scheduler(slots=3, model=Exploding(at=4), overlap=overlap)
    sid = sched.open_session()
    sched.submit([1, 2], 2, session=sid)
    plain = sched.submit([3, 4, 5], 6)
    with pytest.raises(StepFailed):
        for _ in range(30):
            sched.step()
    done = sched.run(100)
    done.update((r.rid, r) for r in sched.collect())
    sched.check_audit()  # consistent: every slot accounted for, nothing leaked
    failed = [r for r in done.values() if "failed" in r.reason]
    assert failed
    t = sched.submit([6], 2, session=sid)
    done.update(sched.run(100))
    s = sched.sessions[sid]
    conv, ssm, _ = fresh_state(s.transcript)
    assert torch.equal(sched.pool.ssm[:, s.slot], ssm)  # no NaN state silently continued
    assert done[t].output
    _ = plain


@pytest.mark.parametrize("seed", range(6))
def test_random_mixed_workloads_end_with_a_clean_audit(seed):
    rng = random.Random(seed)
    sched = make_scheduler(
        slots=rng.choice([1, 2, 3, 5]),
        overlap=rng.random() < 0.5,
        token_budget=rng.choice([4, 8, 32]),
        chunk_size=rng.choice([2, 4, 16]),
        max_running=rng.choice([1, 2, 4]),
        retract_after=rng.choice([1, 3, None]),
        session_timeout=rng.choice([None, 3]),
    )
    sessions = [sched.open_session() for _ in range(3)]
    for _ in range(60):
        roll = rng.random()
        if roll < 0.3:
            sched.submit([rng.randrange(64) for _ in range(rng.randrange(1, 7))], rng.randrange(1, 5))
        elif roll < 0.5:
            sid = rng.choice(sessions)
            if sid in sched.sessions and sched.sessions[sid].status is SessionStatus.OPEN:
                sched.submit([rng.randrange(64) for _ in range(rng.randrange(1, 5))], rng.randrange(1, 4), session=sid)
        elif roll < 0.6 and sched.submitted:
            sched.abort(rng.randrange(sched.submitted))  # live or ended (then nothing to do)
        elif roll < 0.65:
            sched.close_session(rng.choice(sessions))
        sched.step()
        audit = sched.pool.audit()
        assert audit.free_list_ok and not audit.problems
    for sid in sessions:
        sched.close_session(sid)
    sched.run(1000)
    sched.step()
    assert sched.pool.ledger.counts()[Group.FREE] == sched.pool.capacity
    assert sched.check_audit().clean


def _abort_running(s):
    r = s.submit([1, 2, 3], 5)
    s.step()
    s.abort(r)


def _close_session(s):
    sid = s.open_session()
    s.submit([1, 2, 3], 2, session=sid)
    s.run()
    s.close_session(sid)


def _flush(s):
    s.submit([1, 2, 3], 2)
    s.run()
    assert s.flush_cache() == 1


@pytest.mark.parametrize("release", [_abort_running, _close_session, _flush])
@pytest.mark.parametrize("overlap", [False, True])
def test_idle_means_quiescent_after_a_release_with_no_step_in_flight(release, overlap):
    """Old code (overlap off): idle was True with the released slot unfenced, so run() never
    stepped and the audit failed (RELEASED, left there by abort / close / evict)."""
    from slotwarden.kernels.layer import TinyMambaConfig
    from slotwarden.runtime.scheduler.build import build

    s = build(TinyMambaConfig(layers=1), slots=4, max_running=4, overlap=overlap, prefix_cache=True)
    release(s)
    if s.inflight is None and not s.waiting and not s.running:
        assert not s.idle  # a slot waits for a fence
    s.run()
    assert s.idle
    assert s.check_audit().counts[Group.FREE] == s.pool.capacity


def test_run_names_the_sessions_whose_parked_slots_starve_a_request():
    """Old code: only 'not idle after N steps'."""
    from slotwarden.kernels.layer import TinyMambaConfig
    from slotwarden.runtime.scheduler.build import build

    s = build(TinyMambaConfig(layers=1), slots=1, max_running=1)
    sid = s.open_session()
    s.submit([1, 2], 2, session=sid)
    s.run()
    rid = s.submit([3, 4], 2)
    with pytest.raises(RuntimeError, match=rf"requests \[{rid}\] wait while sessions \[{sid}\] park slots \[1\]") as e:
        s.run(max_steps=20)
    assert "close_session" in str(e.value) and "session_timeout" in str(e.value)
    s.close_session(sid)
    assert s.run()[rid].reason == "length"  # closing it frees the slot
