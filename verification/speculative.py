"""Speculative decoding against plain decoding: the same workload must give the same tokens.

`play(spec_k, ...)` runs one fixed workload (two sessions, one with a second turn on its lent
slot, plain requests sharing a prefix, a greedy parallel-sampling group, an abort, retractions
and chunked prefill; the prefix cache on or off, overlap on or off) and returns every Result and
each session's state. `compare` runs it plainly and with every k in 1..3 and every drafter (the
n-gram one, a small TinyMamba, the target itself), and lists each run whose tokens or session
states are not bit-identical to the plain run's, or that verified no window (a run that never
speculated shows nothing). `verify` runs it as its "speculative = plain" row (`row`).
"""

from __future__ import annotations

import time

import torch

from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.drafter import ModelDrafter, NgramDrafter
from slotwarden.verification.machines.shared import MODEL

DRAFTERS = {
    "ngram": NgramDrafter(),
    "small model": ModelDrafter(TinyMamba(TinyMambaConfig(layers=1, d_model=8, seed=3))),
    "target": ModelDrafter(MODEL),  # every draft accepted, up to the budget
}
CONFIGS = tuple((overlap, cache) for overlap in (False, True) for cache in (False, True))


def play(spec_k: int, *, overlap=False, cache=False, drafter=None, slots=None, max_running=3):
    """The workload: (every Result by id, the sessions' states, the scheduler)."""
    slots = slots or (10 if cache else 6)  # room for windows beside what the cache holds
    sched = build(MODEL, slots=slots, overlap=overlap, prefix_cache=cache, max_running=max_running,
                  retract_after=1, chunk_size=3)  # fmt: skip
    if drafter is not None:
        sched.drafter = drafter
    sids = [sched.open_session(), sched.open_session()]
    base = [3, 1, 4, 1, 5, 9, 2, 6]
    ids = [sched.submit(base + [i], 5 + i, spec_k=spec_k) for i in range(3)]
    sched.submit([7, 7, 2, 7, 7, 2, 7], 9, session=sids[0], spec_k=spec_k)
    sched.submit([8, 1], 6, session=sids[1], spec_k=spec_k)
    sched.submit_n(base[:5], 4, 2, spec_k=spec_k)
    results = {}
    for _ in range(3):
        results.update((r.rid, r) for r in sched.step().finished)
    sched.abort(ids[1])
    sched.submit([2, 7], 7, session=sids[0], spec_k=spec_k)  # a second turn, on the lent slot
    sched.submit(base + [0, 4], 8, spec_k=spec_k)  # a cache hit when the cache is on
    results.update(sched.run())
    sched.flush_cache()
    return results, [sched.session_state(s) for s in sids], sched


def same(a, b) -> bool:
    """Whether two plays gave the same Results and bit-identical session states."""
    (results_a, states_a, _), (results_b, states_b, _) = a, b
    states = all(torch.equal(x.conv, y.conv) and torch.equal(x.ssm, y.ssm) for x, y in zip(states_a, states_b))
    return results_a == results_b and states


def compare(ks=(1, 2, 3), configs=CONFIGS) -> tuple[list, dict]:
    """(the runs that differ from plain decoding or never verified, totals of the counters)."""
    bad, totals = [], dict(runs=0, verified=0, drafted=0, accepted=0, retractions=0, aborts=0)
    for overlap, cache in configs:
        plain = play(0, overlap=overlap, cache=cache)
        for k in ks:
            for name, drafter in DRAFTERS.items():
                run = play(k, overlap=overlap, cache=cache, drafter=drafter)
                c = run[2].counters
                where = f"k={k} {name} overlap={'on' if overlap else 'off'} cache={'on' if cache else 'off'}"
                if not same(plain, run):
                    bad.append(f"{where}: not the plain run's tokens and states")
                elif not c.verified:
                    bad.append(f"{where}: verified no window")
                totals["runs"] += 1
                for key in ("verified", "drafted", "accepted", "retractions", "aborts"):
                    totals[key] += getattr(c, key)
    return bad, totals


def row() -> tuple[bool, float, str, dict]:
    """`compare` as verify's row: (ok, seconds, its line, its detail)."""
    start = time.perf_counter()
    bad, totals = compare()
    text = (
        f"{totals['runs']} runs (k 1..3, {len(DRAFTERS)} drafters, overlap and prefix cache on and off): "
        f"{totals['verified']} windows verified, {totals['accepted']} of {totals['drafted']} drafts accepted; "
        + ("tokens and session states bit-identical to plain decoding" if not bad else "FAILED: " + "; ".join(bad))
    )
    return not bad, time.perf_counter() - start, text, {"differ": bad, **totals}
