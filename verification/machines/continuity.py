"""State continuity: the numbers, not only the bookkeeping, survive the lifecycle.

`ContinuityMachine` runs the scheduler machine's random workloads and checks, bit for bit on a
float64 model, every finished request against a reference computed from the transcript alone
(one fresh request fed the concatenated input from a zeroed state): its tokens (a plain
request's output continues its prompt, greedy or sampled with its temperature and seed; a
session turn's continues every earlier completed turn of its session, then its prompt; aborted
or dropped turns add nothing), and the conv and SSM state of its slot when it finished or parked
(taken by `Recording` just before the slot is given back) against the reference state after all
but the last output token. A parked session not marked stale holds exactly its transcript's
state. The transcript is what the machine itself submitted and saw come back, never the
scheduler's own record, so a scheduler that corrupts both its record and its state is caught.
`CachedContinuityMachine` adds the prefix cache: follow-ups matching a donated state
(copy-on-write) under eviction pressure, and parallel-sampling groups copying their prompt state.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from hypothesis.stateful import invariant

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from slotwarden.kernels.sample import sample
from slotwarden.runtime.scheduler.request import SessionStatus
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.model.vocabulary import State
from slotwarden.verification.machines.scheduler import CachedSchedulerMachine, SchedulerMachine, marks_broken
from slotwarden.verification.machines import sampling
from slotwarden.verification.machines.shared import MODEL


@lru_cache(maxsize=4096)
def replay(tokens: tuple) -> tuple[tuple, tuple]:
    """Feed `tokens` one at a time from a zeroed slot: (state tensors of the slot after the
    last, the greedy next token after each prefix)."""
    conv, ssm = MODEL.new_state(1)
    slot = torch.tensor([1])
    preds = []
    for t in tokens:
        preds.append(int(MODEL.decode(torch.tensor([t], dtype=torch.int64), slot, conv, ssm)[0]))
    return (conv[:, 1].clone(), ssm[:, 1].clone()), tuple(preds)


def continuation(context: list, output: list) -> list:
    """What a fresh request fed `context` generates greedily, as long as `output`."""
    if not output:
        return []
    _, preds = replay(tuple(context + output[:-1]))
    return list(preds[len(context) - 1 :])


@lru_cache(maxsize=1024)
def replay_logits(tokens: tuple) -> torch.Tensor:
    """[len(tokens), vocab]: the logits after each prefix of `tokens`, fed one at a time from a
    zeroed slot."""
    conv, ssm = MODEL.new_state(1)
    slot = torch.tensor([1])
    rows = [MODEL.decode_logits(torch.tensor([t], dtype=torch.int64), slot, conv, ssm)[0] for t in tokens]
    return torch.stack(rows)


def sampled_continuation(context: list, output: list, temperature: float, seed: int) -> list:
    """What a fresh request fed `context` generates at `temperature` with `seed`, as long as
    `output` (temperature 0: `continuation`)."""
    if not output or temperature == 0:
        return continuation(context, output)
    logits = replay_logits(tuple(context + output[:-1]))[len(context) - 1 :]
    n = len(output)
    temps = torch.full((n,), float(temperature), dtype=torch.float64)
    return sample(logits, temps, torch.full((n,), seed, dtype=torch.int64), torch.arange(n)).tolist()


def recording(cls: type) -> type:
    """`cls` (a `Scheduler` or a subclass) that keeps a copy of a request's slot state when it
    finishes or parks, just before the slot is given back."""

    class Recording(cls):
        def release_finished(self, req):
            if not hasattr(self, "at_release"):
                self.at_release = {}
            self.at_release[req.rid] = tuple(t[:, req.slot].clone() for t in self.pool.tensors)
            super().release_finished(req)

    Recording.__name__ = Recording.__qualname__ = f"Recording{cls.__name__}"
    return Recording


def _same_state(got: tuple, want: tuple) -> bool:
    return len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want))


class ContinuityMachine(SchedulerMachine):
    """The scheduler machine, with every finished request and parked session checked bit for
    bit against the transcript's reference."""

    scheduler_cls: type = recording(Scheduler)

    def _track(self):
        """Keep every submitted request (the scheduler may drop finished ones from its table)."""
        if not hasattr(self, "tracked"):
            self.tracked, self.checked, self.history = {}, set(), {}
        for rid, req in self.sched.requests.items():
            self.tracked.setdefault(rid, req)
        return self.tracked

    @property
    def _recorded(self) -> dict:
        return getattr(self.sched, "at_release", {})

    def _check_finished(self):
        tracked = self.tracked
        for rid in sorted(tracked):
            req = tracked[rid]
            if rid in self.checked or not req.done:
                continue
            self.checked.add(rid)
            if req.finish_reason != "length":
                continue  # aborted, dropped: its tokens are not part of any transcript
            context = (self.history.get(req.session, []) if req.session is not None else []) + list(req.prompt)
            want = sampled_continuation(context, list(req.output), req.temperature, req.seed)
            assert list(req.output) == want, (
                f"request {rid} (session {req.session}) generated {req.output}; the transcript alone gives {want}"
            )
            got = self._recorded.get(rid)
            assert got is not None, f"request {rid} finished without giving its slot back"
            state, _ = replay(tuple(context + list(req.output)[:-1]))
            assert _same_state(got, state), (
                f"request {rid} (session {req.session}): the state of its slot when it finished differs from "
                f"the state of its transcript ({len(context) + len(req.output) - 1} tokens fed from zero)"
            )
            if req.session is not None:
                self.history[req.session] = context + list(req.output)

    def _check_parked(self):
        ledger = self.sched.pool.ledger
        for s in self.sched.sessions.values():
            if s.status is not SessionStatus.OPEN or s.slot is None or s.stale:
                continue
            if ledger.record(s.slot).state is not State.PARKED:
                continue
            history = self.history.get(s.sid, [])
            if not history:
                continue
            want, _ = replay(tuple(history[:-1]))
            got = tuple(t[:, s.slot] for t in self.sched.pool.tensors)
            assert _same_state(got, want), (
                f"session {s.sid}: its parked slot {s.slot} does not hold the state of its transcript "
                f"({len(history) - 1} tokens fed from zero)"
            )

    @invariant()
    def continuity(self):
        if not hasattr(self, "sched") or self.broken:
            return
        self._track()
        self._check_finished()
        self._check_parked()

    def teardown(self):
        if hasattr(self, "sched") and not self.broken:
            self._track()
            stalled = 0
            for _ in range(200):  # let queued turns finish (and be checked) before the closes drop them
                if all(r.done for r in self.tracked.values() if r.session is not None):
                    break
                ran = self.sched.step().kind != "idle" or self.sched.inflight is not None or self.sched.running
                stalled = 0 if ran else stalled + 1
                if stalled == 3:
                    break  # a turn waits for a slot that other sessions keep parked: it never will
            self.continuity()
        super().teardown()
        self.continuity()


def greedy(prompt: list, n: int) -> list:
    """The `n` tokens a fresh request fed `prompt` generates greedily."""
    out: list = []
    for _ in range(n):
        out.append(replay(tuple(prompt + out))[1][-1])
    return out


class CachedContinuityMachine(ContinuityMachine, CachedSchedulerMachine):
    """The continuity machine with the prefix cache on, and follow-up requests that share the
    prefixes earlier requests donate (`CachedSchedulerMachine`)."""

    settings_override = {"prefix_cache": True}

    @precondition(lambda self: self._has("plain"))
    @rule(
        n=st.integers(2, 3),
        size=st.integers(1, 5),
        new=st.integers(1, 4),
        first=st.integers(0, 63),
        temperature=st.sampled_from([1.0, 0.0, 0.5]),
        seed=st.integers(0, 3),
    )
    @marks_broken
    def submit_group(self, n, size, new, first, temperature, seed):
        """n samples of one prompt: the siblings wait for their prompt request's donation."""
        prompt = [(first + i) % 64 for i in range(size)]
        rids = self.sched.submit_n(prompt, new, n, temperature=temperature, seed=seed)
        self.bases.extend(self.sched.requests[rid] for rid in rids)
        self.sampled.append(sampling.group_of(self.sched, rids, seed, prompt))


def continuity_machine_for(scheduler_cls: type, **settings) -> type:
    """`ContinuityMachine` driving `scheduler_cls`, with `settings` fixed (with the prefix
    cache on: `CachedContinuityMachine`, follow-ups included)."""
    base = CachedContinuityMachine if settings.get("prefix_cache") else ContinuityMachine
    return type(
        f"{scheduler_cls.__name__}ContinuityMachine",
        (base,),
        {"scheduler_cls": recording(scheduler_cls), "settings_override": {**base.settings_override, **settings}},
    )
