"""The speculative workload of `slotwarden bench scheduler`: plain decoding against speculative.

`requests` greedy requests submitted at once, each prompt a short random phrase said twice (so
an n-gram drafter has something to find), run by the real TinyMamba (float32) on a pool with
room for every window: once plain (`spec_k` 0), then with `spec_k` = k for each drafter: the
n-gram drafter, a small TinyMamba (1 layer, other weights) and the target itself (every draft it
proposes is the target's own token: the most a drafter can get accepted). Every run must give
the plain run's tokens (else `RuntimeError`). Reported per run: steps, tokens generated per
step, drafts proposed and accepted (the acceptance rate), wall time, the drafter's time, and the
host overhead: the wall time outside the target's and the drafter's calls, per generated token,
as a ratio to the plain run's.
"""

from __future__ import annotations

import random
import time

import torch

from slotwarden.bench.common import device_of, sync_for
from slotwarden.cli.demo import build_scheduler
from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.runtime.scheduler.drafter import ModelDrafter, NgramDrafter

DEFAULT = dict(requests=16, k=3, new_tokens=32, phrase=(3, 6))
QUICK = dict(requests=4, k=2, new_tokens=8, phrase=(2, 3))
_MODEL_CALLS = ("prefill", "decode", "prefill_logits", "decode_logits")


class Timed:
    """The scheduler's model, its calls timed (`seconds`): on a GPU each call is synced first
    and last, so the time is the model's own."""

    def __init__(self, model, sync):
        self.model, self.sync, self.seconds = model, sync, 0.0
        self.config = model.config

    def __getattr__(self, name):
        attr = getattr(self.model, name)
        if name not in _MODEL_CALLS:
            return attr

        def timed(*args, **kwargs):
            self.sync()  # a device sync, for the timing only
            start = time.perf_counter()
            out = attr(*args, **kwargs)
            self.sync()
            self.seconds += time.perf_counter() - start
            return out

        return timed


class _TimedDrafter:
    """The scheduler's drafter, its proposals timed (a model drafter's compute is not host work)."""

    def __init__(self, drafter):
        self.drafter, self.seconds = drafter, 0.0

    def propose(self, contexts, ks):
        start = time.perf_counter()
        try:
            return self.drafter.propose(contexts, ks)
        finally:
            self.seconds += time.perf_counter() - start


def run_one(device, drafter_name: str | None, *, requests: int, k: int, new_tokens: int, phrase, seed=0):
    """One run (`drafter_name` None: plain); returns its numbers and every request's tokens."""
    rng = random.Random(seed)
    sched = build_scheduler(requests * (k + 2), device, max_running=requests, token_budget=64 * requests)
    sync = sync_for(device)
    target = sched.model
    if drafter_name == "ngram":
        sched.drafter = NgramDrafter()
    elif drafter_name == "small model":
        sched.drafter = ModelDrafter(TinyMamba(TinyMambaConfig(layers=1, seed=7, dtype=target.config.dtype)))
    elif drafter_name == "target":
        sched.drafter = ModelDrafter(target)
    sched.model = timed = Timed(target, sync)
    drafting = _TimedDrafter(sched.drafter)
    sched.drafter = drafting
    spec_k = 0 if drafter_name is None else k
    ids = []
    for _ in range(requests):
        words = [rng.randint(1, 63) for _ in range(rng.randint(*phrase))]
        ids.append(sched.submit(words + words, new_tokens, spec_k=spec_k))
    start = time.perf_counter()
    results = sched.run()
    sync()
    wall = time.perf_counter() - start
    sched.check_audit()
    c = sched.counters
    generated = sum(len(results[rid].output) for rid in ids)
    row = {
        "drafter": drafter_name or "plain",
        "spec_k": spec_k,
        "steps": c.steps,
        "generated": generated,
        "tokens_per_step": generated / c.steps,
        "verified": c.verified,
        "drafted": c.drafted,
        "accepted": c.accepted,
        "acceptance": c.accepted / c.drafted if c.drafted else 0.0,
        "wall_s": wall,
        "model_s": timed.seconds,
        "draft_s": drafting.seconds,
        "host_us_per_token": (wall - timed.seconds - drafting.seconds) / generated * 1e6,
    }
    return row, {i: results[rid].output for i, rid in enumerate(ids)}


def measure(device=None, **settings) -> dict:
    """The plain run, then one per drafter; each must give the plain run's tokens."""
    device = device_of(device)
    plain, want = run_one(device, None, **settings)
    rows = [plain]
    for name in ("ngram", "small model", "target"):
        row, got = run_one(device, name, **settings)
        if got != want:
            bad = next(i for i in want if got.get(i) != want[i])
            raise RuntimeError(f"the {name} drafter changed request {bad}'s tokens: {got.get(bad)} != {want[bad]}")
        row["host_ratio"] = row["host_us_per_token"] / plain["host_us_per_token"]
        rows.append(row)
    plain["host_ratio"] = 1.0
    return {"settings": {**settings, "dtype": str(torch.float32)}, "rows": rows, "same_tokens": True}


def format_table(result: dict) -> str:
    s = result["settings"]
    lines = [
        f"speculative workload: {s['requests']} greedy requests x {s['new_tokens']} tokens, spec_k {s['k']}, "
        "TinyMamba; the same tokens as plain decoding in every run",
        f"{'drafter':<12} {'steps':>6} {'tokens/step':>12} {'drafted':>8} {'accepted':>9} {'rate':>6} "
        f"{'wall s':>7} {'draft s':>8} {'host µs/token':>14} {'vs plain':>9}",
    ]
    for r in result["rows"]:
        lines.append(
            f"{r['drafter']:<12} {r['steps']:>6} {r['tokens_per_step']:>12.2f} {r['drafted']:>8} {r['accepted']:>9} "
            f"{r['acceptance']:>6.0%} {r['wall_s']:>7.2f} {r['draft_s']:>8.2f} {r['host_us_per_token']:>14.1f} "
            f"{r['host_ratio']:>8.2f}x"
        )
    return "\n".join(lines)
