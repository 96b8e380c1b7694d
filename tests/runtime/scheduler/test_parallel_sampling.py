"""Parallel sampling: per-request temperature and seed, counter-based noise, and `submit_n`,
whose siblings share the prompt's state through the prefix cache (prefilled once) and generate
the same tokens, bit for bit, with the cache on and off; aborts at every phase leak nothing."""

import itertools

import pytest
import torch

import slotwarden.kernels.sample as sampling
from slotwarden.kernels.sample import noise_bits, noise_bits_reference, sample, sibling_seed
from slotwarden.model.vocabulary import Group
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.runtime.scheduler.errors import BadRequest
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.machines.continuity import (
    CachedContinuityMachine,
    continuity_machine_for,
    greedy,
    recording,
    sampled_continuation,
)
from slotwarden.verification.machines import MODEL

PROMPT = [3, 1, 4, 1, 5, 9]
N = 4


# -- the sampling kernel -------------------------------------------------------------------------
def _noise_agrees() -> bool:
    seeds = [0, 1, -1, 2**63 - 1, -(2**63), 12345]
    cases = list(itertools.product(seeds, [0, 1, 7, 1000]))
    got = noise_bits(torch.tensor([s for s, _ in cases]), torch.tensor([p for _, p in cases]), 5)
    want = [[sampling._signed(noise_bits_reference(s, p, v)) for v in range(5)] for s, p in cases]
    return got.tolist() == want


def test_the_noise_is_the_reference_hash_and_a_broken_shift_is_caught(monkeypatch):
    assert _noise_agrees()
    monkeypatch.setattr(sampling, "_shr", lambda x, k: x >> k)  # broken: an arithmetic shift
    assert not _noise_agrees()


def test_a_row_s_token_depends_only_on_its_logits_seed_and_position():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 64, generator=g, dtype=torch.float64)
    temps = torch.tensor([0.0, 1.0, 0.5, 2.0, 1.0, 0.0], dtype=torch.float64)
    seeds, pos = torch.tensor([5, 5, 6, 7, 8, 9]), torch.tensor([0, 3, 3, 1, 0, 2])
    whole = sample(logits, temps, seeds, pos)
    assert torch.equal(whole[temps == 0], logits.argmax(-1)[temps == 0])  # temperature 0: the argmax
    order = torch.tensor([4, 2, 0, 5, 1, 3])
    assert torch.equal(sample(logits[order], temps[order], seeds[order], pos[order]), whole[order])
    alone = [int(sample(logits[i : i + 1], temps[i : i + 1], seeds[i : i + 1], pos[i : i + 1])[0]) for i in range(6)]
    assert alone == whole.tolist()
    hot = sample(
        logits[[1]].expand(16, 64),
        torch.ones(16, dtype=torch.float64),
        torch.arange(16),
        torch.zeros(16, dtype=torch.int64),
    )
    assert len(set(hot.tolist())) > 4  # the seeds draw different tokens from one distribution


def test_sampling_params_are_refused_clearly():
    sched = build(MODEL, slots=2)
    for kwargs, word in (
        (dict(temperature=-1.0), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(temperature="hot"), "temperature"),
        (dict(seed=1.5), "seed"),
        (dict(seed=True), "seed"),
        (dict(temperature=10**400), "temperature must be a finite number"),  # old: OverflowError
        (dict(temperature=1e-320, seed=1), "too small to divide by.*1e-30"),  # old: garbage tokens
        (dict(temperature=1e-31), "too small to divide by"),
    ):
        with pytest.raises(BadRequest, match=word):
            sched.submit([1, 2], 2, **kwargs)
        with pytest.raises(BadRequest, match=word):
            sched.submit_n([1, 2], 2, 2, **kwargs)
    for n in (0, 1.0, 257):
        with pytest.raises(BadRequest, match="n must be"):
            sched.submit_n([1, 2], 2, n)
    assert sched.submitted == 0 and not sched.waiting


# -- groups ----------------------------------------------------------------------------------------
def play_group(cache: bool, cls=Scheduler, overlap: bool = False, temperature: float = 1.0, seed: int = 7):
    """`submit_n(PROMPT, 5, N)`; returns (ids, {rid: output}, {rid: final state}, prefill tokens, sched)."""
    sched = build(MODEL, slots=N + 2, cls=recording(cls), prefix_cache=cache, overlap=overlap, max_running=N)
    ids = sched.submit_n(PROMPT, 5, N, temperature=temperature, seed=seed)
    prefill, results = 0, {}
    while not sched.idle:
        report = sched.step()
        prefill += report.tokens if report.kind == "prefill" else 0
        results.update((r.rid, r.output) for r in report.finished)
    return ids, results, sched.at_release, prefill, sched


def quiesce(sched):
    sched.flush_cache()
    sched.step()
    assert sched.check_audit().counts[Group.FREE] == sched.pool.capacity


class SharedSeed(Scheduler):
    """Broken: every sibling samples with the group's seed itself."""

    def submit_n(self, prompt, max_new_tokens, n, *, temperature=0.0, seed=None):
        ids = super().submit_n(prompt, max_new_tokens, n, temperature=temperature, seed=seed)
        for rid in ids:
            self.requests[rid].seed = self.requests[ids[0]].seed
        return ids


class NoWait(Scheduler):
    """Broken: siblings do not wait for their prompt request's donation."""

    def cache_awaits(self, req):
        return False


def check_group(cls=Scheduler, overlap=False) -> None:
    ids, off, off_states, off_prefill, _ = play_group(False, cls, overlap)
    ids_on, on, on_states, on_prefill, sched = play_group(True, cls, overlap)
    assert ids == ids_on == tuple(range(N)) and set(on) == set(off) == set(ids)
    outputs = [on[rid] for rid in ids]
    assert len(set(outputs)) == N, f"siblings generated {outputs}: not distinct"
    for rid in ids:
        assert on[rid] == off[rid] == tuple(sampled_continuation(PROMPT, list(on[rid]), 1.0, sched.seed_of[rid]))
        assert all(torch.equal(a, b) for a, b in zip(on_states[rid], off_states[rid])), f"request {rid}'s state"
    assert off_prefill == N * len(PROMPT)
    assert on_prefill == len(PROMPT) - 1 + N, f"the prompt was not prefilled once: {on_prefill} tokens fed"
    stats = sched.prefix.stats()
    assert stats.hits == N and stats.tokens_saved == N * (len(PROMPT) - 1)
    assert sched.counters.finished == N  # the prompt request is not reported
    quiesce(sched)


@pytest.fixture(autouse=True)
def _remember_seeds(monkeypatch):
    """Keep each sibling's seed on the scheduler (its requests leave the tables when done)."""
    submit_n = Scheduler.submit_n

    def remembering(self, *args, **kwargs):
        ids = submit_n(self, *args, **kwargs)
        self.seed_of = {rid: self.requests[rid].seed for rid in ids}
        return ids

    monkeypatch.setattr(Scheduler, "submit_n", remembering)


@pytest.mark.parametrize("overlap", [False, True])
def test_siblings_differ_and_match_the_cache_off_run_bit_for_bit_with_the_prompt_prefilled_once(overlap):
    check_group(overlap=overlap)


@pytest.mark.parametrize("cls, says", [(SharedSeed, "not distinct"), (NoWait, "prefilled once")])
def test_the_group_check_rejects_shared_seeds_and_siblings_that_do_not_wait(cls, says):
    with pytest.raises(AssertionError, match=says):
        check_group(cls)


def test_seeds_derive_from_the_group_seed_and_the_sibling_index():
    sched = build(MODEL, slots=3)
    ids = sched.submit_n([1, 2], 2, 3, temperature=1.0, seed=11)
    assert [sched.requests[r].seed for r in ids] == [sibling_seed(11, i) for i in range(3)]
    assert len({sibling_seed(11, i) for i in range(3)}) == 3
    rid = sched.submit([1, 2], 2, temperature=1.0)  # seed None: the request's id
    assert sched.requests[rid].seed == rid == 4  # after the three siblings and the group's prompt id


def greedy_beside_a_sampled_request() -> bool:
    """A greedy request batched with a sampled one (so its rows go through `sample`) still
    decodes exactly the greedy continuation."""
    sched = build(MODEL, slots=2)
    rid = sched.submit(PROMPT, 6)
    sched.submit(PROMPT, 6, temperature=1.5, seed=2)
    return list(sched.run()[rid].output) == greedy(PROMPT, 6)


def test_temperature_zero_is_today_s_greedy_decoding(monkeypatch):
    for cache in (False, True):
        ids, out, _, _, sched = play_group(cache, temperature=0.0)
        assert all(list(out[r]) == greedy(PROMPT, 5) for r in ids)
    sched = build(MODEL, slots=2)
    rid = sched.submit(PROMPT, 4)
    assert list(sched.run()[rid].output) == greedy(PROMPT, 4)
    assert greedy_beside_a_sampled_request()
    import slotwarden.runtime.scheduler.forward as forward

    # broken: a temperature-0 row in a sampled batch draws as if at temperature 1
    monkeypatch.setattr(forward, "sample", lambda lg, t, s, p: sample(lg, torch.where(t > 0, t, 1.0), s, p))
    assert not greedy_beside_a_sampled_request()


class PublishAtDonation(Scheduler):
    """Broken (SGLang #30986): the donated prompt state is matchable at once, before the fence of
    the step that wrote it."""

    def cache_donate(self, req):
        donated = super().cache_donate(req)
        if donated:
            self.prefix.tree.publish(req.donated)
            del self.prefix.unpublished[req.donated]
        return donated


def run_beside_a_decode(cls) -> dict:
    """A group submitted while another request decodes (overlap on): the prompt request's
    donation lands while a step is in flight, so it waits for that step's fence."""
    sched = build(MODEL, slots=N + 3, cls=cls, prefix_cache=True, overlap=True, max_running=N + 1)
    other = sched.submit([7, 7], 12)
    sched.step()
    ids = sched.submit_n(PROMPT, 3, N, temperature=1.0, seed=5)
    out = sched.run()
    quiesce(sched)
    assert sched.prefix.stats().hits == N
    return {rid: out[rid].output for rid in (other, *ids)}


def test_a_prompt_state_published_before_its_fence_is_refused():
    run_beside_a_decode(Scheduler)
    with pytest.raises(Exception, match="CACHING"):
        run_beside_a_decode(PublishAtDonation)


# -- aborts at every phase -------------------------------------------------------------------------
PHASES = {  # what holds at the moment of the abort (a request beside the group keeps steps in flight)
    "queued": lambda sched, lead, ids: True,  # everything waits
    "prompt prefilling": lambda sched, lead, ids: not lead.done and lead.slot is not None,
    "donated, unpublished": lambda sched, lead, ids: lead.donated in sched.prefix.unpublished,
    "siblings copying": lambda sched, lead, ids: bool(sched.pool.locks),  # their locks wait for the fence
    "decoding": lambda sched, lead, ids: all(r in sched.requests and sched.requests[r].output for r in ids),
}
FENCED_AT_ONCE = {"donated, unpublished", "siblings copying"}  # without overlap no step() ends in these

WHO = {
    "the prompt request": lambda ids: [ids[-1] + 1],
    "one sibling": lambda ids: [ids[1]],
    "every sibling": lambda ids: list(ids),
    "everyone": lambda ids: [ids[-1] + 1, *ids],
}


class LeadLeftBehind(Scheduler):
    """Broken: the prompt request of a group whose siblings were all aborted is only marked
    done, its slot kept."""

    def _abort_one(self, req):
        if req.shared:
            self._leave(req, "abort")
            return
        super()._abort_one(req)


def abort_everywhere(cls=Scheduler) -> int:
    """Abort each of `WHO` at each of `PHASES` (overlap on and off), then check the pool is
    quiescent after a flush and a fence. Returns how many cases reached their phase."""
    checked = 0
    for overlap, (phase, reached), who in itertools.product((True, False), PHASES.items(), WHO):
        sched = build(MODEL, slots=N + 2, cls=cls, prefix_cache=True, overlap=overlap, max_running=N + 1, chunk_size=3)
        sched.submit([7, 7], 12)
        sched.step()
        ids = sched.submit_n(PROMPT, 3, N, temperature=1.0, seed=3)
        lead = sched.requests[N + 1]
        for _ in range(12):
            if reached(sched, lead, ids):
                break
            sched.step()
        else:
            assert not overlap and phase in FENCED_AT_ONCE, f"{phase} never reached (overlap {overlap})"
            continue
        try:
            for rid in WHO[who](ids):
                sched.abort(rid)
            sched.run()
            quiesce(sched)
        except Exception as exc:
            raise AssertionError(f"abort of {who} ({phase}, overlap {overlap}): {exc}") from exc
        checked += 1
    return checked


def test_aborting_the_prompt_request_or_siblings_at_any_phase_leaks_nothing():
    assert abort_everywhere() == 32


def test_the_abort_check_catches_a_prompt_request_left_holding_its_slot():
    with pytest.raises(AssertionError, match="audit failed"):
        abort_everywhere(LeadLeftBehind)


def test_the_last_sibling_s_abort_aborts_the_waiting_prompt_request():
    sched = build(MODEL, slots=3, prefix_cache=True)
    ids = sched.submit_n(PROMPT, 3, 2, temperature=1.0)
    for rid in ids:
        sched.abort(rid)
    assert not sched.requests and not sched.waiting and sched.counters.aborts == 2
    quiesce(sched)


# -- the cached continuity machine covers groups ---------------------------------------------------
class PositionIgnoresInFlight(Scheduler):
    """Broken: a token's position counts only the outputs already on the host, so with overlap
    a decode launched before the last step's token came back reuses that token's noise."""

    @staticmethod
    def _sample(logits, items):
        from slotwarden.runtime.pool import to_device

        d = logits.device
        temperature = to_device(torch.tensor([r.temperature for r, _ in items], dtype=torch.float64), d)
        seed = to_device(torch.tensor([r.seed for r, _ in items], dtype=torch.int64), d)
        position = to_device(torch.tensor([len(r.output) for r, _ in items], dtype=torch.int64), d)
        return sample(logits, temperature, seed, position)


def test_the_cached_continuity_machine_runs_groups_and_catches_a_wrong_sample_position():
    assert "submit_group" in dir(CachedContinuityMachine)
    machine = continuity_machine_for(PositionIgnoresInFlight, prefix_cache=True, overlap=True)
    r = run_machine("position", machine, Budget(40, 25), 0, shrink=False)
    assert not r.passed and "transcript" in r.error


# -- pressure: the prompt state waiting siblings will copy is evicted last -------------------------
def every_sibling_copies_under_pressure(slots: int, overlap: bool) -> bool:
    """A group of N in a pool too small for all of it: finished siblings donate their slots,
    and the next sibling short of a slot has the cache evict one of those, not the prompt
    state (retracted siblings match it again too)."""
    sched = build(MODEL, slots=slots, prefix_cache=True, overlap=overlap, max_running=N)
    sched.submit_n(PROMPT, 3, N, temperature=1.0, seed=1)
    sched.run()
    stats = sched.prefix.stats()
    quiesce(sched)
    return stats.evictions > 0 and stats.hits == stats.lookups - 1  # every admission but the prompt's hit


def test_under_pressure_the_prompt_state_siblings_wait_for_is_evicted_last(monkeypatch):
    cases = [(2, False), (3, False), (3, True)]
    assert all(every_sibling_copies_under_pressure(*case) for case in cases)
    import slotwarden.runtime.radix.cache as prefix

    monkeypatch.setattr(prefix, "_wanted", lambda waiting: {})  # broken: plain LRU eviction
    assert not any(every_sibling_copies_under_pressure(*case) for case in cases)


def test_the_smallest_temperature_taken_draws_the_greedy_tokens():
    """At `MIN_TEMPERATURE` the logits divided by it stay finite: the draw is greedy."""
    from slotwarden.kernels.sample import MIN_TEMPERATURE

    sched = build(MODEL, slots=2)
    cold, greedy = sched.submit([1, 2, 3], 6, temperature=MIN_TEMPERATURE, seed=1), sched.submit([1, 2, 3], 6)
    out = sched.run()
    assert out[cold].output == out[greedy].output
