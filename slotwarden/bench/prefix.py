"""The shared-prefix workload of `slotwarden bench scheduler`: the prefix cache on and off.

`conversations` stateless chat clients, each sending `turns` plain requests one after the
other: a turn's prompt is the previous turn's prompt and output followed by a few new tokens
(what a client without sessions resends), so every turn after the first shares the prefix its
predecessor donated. The real TinyMamba (float32) runs it on a pool of `slots` slots, once with
`prefix_cache=False` and once with `prefix_cache=True`; both runs must generate the same tokens
(else `RuntimeError`). Reported per run: wall time, steps, input tokens fed by prefill, tokens
generated, and with the cache its hit rate, tokens saved, donations and evictions.

Then parallel sampling (`run_samples`): prompts submitted at once as n samples each
(`Scheduler.submit_n`, temperature 1), with the cache off (every sample prefills its prompt)
and on (each prompt prefilled once, its state copied by the siblings); both runs must generate
the same tokens (else `RuntimeError`).
"""

from __future__ import annotations

import random
import time

import torch

from slotwarden.bench.common import device_of, sync_for
from slotwarden.cli.demo import build_scheduler

SAMPLES = dict(prompts=8, n=4, slots=16, new_tokens=(4, 12), first=(16, 48))
DEFAULT = dict(conversations=12, turns=4, slots=16, new_tokens=(4, 12), extra=(4, 12), first=(16, 48), samples=SAMPLES)
QUICK = dict(
    conversations=6,
    turns=3,
    slots=6,
    new_tokens=(2, 4),
    extra=(2, 4),
    first=(4, 8),
    samples=dict(prompts=3, n=4, slots=8, new_tokens=(2, 4), first=(4, 8)),
)


def _row(sched, cache: bool, wall: float, steps: int, prefill: int) -> dict:
    """A run's numbers (with the cache's counters when it is on); then the cache is flushed and
    fenced and the pool audited, so a run that leaked a slot raises instead of reporting."""
    row = {"cache": cache, "wall_s": wall, "steps": steps, "prefill_tokens": prefill}
    if cache:
        row.update(sched.prefix.stats()._asdict(), hit_rate=sched.prefix.stats().hit_rate)
        sched.flush_cache()
        sched.step()
    sched.check_audit()
    return row


def run_workload(device, *, cache: bool, conversations: int, turns: int, slots: int, new_tokens, extra, first, seed=0):
    """One run; returns its numbers and every turn's output (conversation, turn) -> tokens."""
    rng = random.Random(seed)
    sched = build_scheduler(slots, device, prefix_cache=cache)
    plan = [
        [
            (
                [rng.randint(1, 63) for _ in range(rng.randint(*(first if t == 0 else extra)))],
                rng.randint(*new_tokens),
            )
            for t in range(turns)
        ]
        for _ in range(conversations)
    ]
    live = {c: sched.requests[sched.submit(plan[c][0][0], plan[c][0][1])] for c in range(conversations)}
    turn = dict.fromkeys(range(conversations), 0)
    outputs: dict = {}
    prefill = steps = 0
    sync = sync_for(device)
    start = time.perf_counter()
    while live or not sched.idle:
        report = sched.step()
        steps += 1
        prefill += report.tokens if report.kind == "prefill" else 0
        for c, req in list(live.items()):
            if not req.done:
                continue
            outputs[c, turn[c]] = tuple(req.output)
            del live[c]
            if turn[c] + 1 < turns:
                turn[c] += 1
                words, new = plan[c][turn[c]]
                live[c] = sched.requests[sched.submit(list(req.prompt) + list(req.output) + words, new)]
    sync()
    wall = time.perf_counter() - start
    row = _row(sched, cache, wall, steps, prefill)
    row["generated"] = sum(map(len, outputs.values()))
    return row, outputs


def run_samples(device, *, cache: bool, prompts: int, n: int, slots: int, new_tokens, first, seed=0):
    """Parallel sampling: `prompts` prompts submitted at once, each as `n` samples at
    temperature 1 (`Scheduler.submit_n`, seeded by the prompt's index). Returns the run's
    numbers and every sample's output (prompt, sample) -> tokens."""
    rng = random.Random(seed)
    sched = build_scheduler(slots, device, prefix_cache=cache)
    plan = [
        ([rng.randint(1, 63) for _ in range(rng.randint(*first))], rng.randint(*new_tokens)) for _ in range(prompts)
    ]
    groups = [sched.submit_n(prompt, new, n, temperature=1.0, seed=p) for p, (prompt, new) in enumerate(plan)]
    sync = sync_for(device)
    start = time.perf_counter()
    prefill = steps = 0
    results: dict = {}
    while not sched.idle:
        report = sched.step()
        steps += 1
        prefill += report.tokens if report.kind == "prefill" else 0
        results.update((r.rid, r.output) for r in report.finished)
    sync()
    wall = time.perf_counter() - start
    outputs = {(p, i): results[rid] for p, ids in enumerate(groups) for i, rid in enumerate(ids)}
    row = _row(sched, cache, wall, steps, prefill)
    row["generated"] = sum(map(len, outputs.values()))
    return row, outputs


def measure(device=None, **settings) -> dict:
    """Both runs and their comparison (what --json writes under "prefix"), then the parallel
    sampling runs (settings `samples`, under "samples"); each pair must give the same tokens."""
    device = device_of(device)
    samples = settings.pop("samples", SAMPLES)
    off, out_off = run_workload(device, cache=False, **settings)
    on, out_on = run_workload(device, cache=True, **settings)
    if out_on != out_off:
        bad = next(k for k in out_off if out_on.get(k) != out_off[k])
        raise RuntimeError(
            f"the prefix cache changed conversation {bad[0]}, turn {bad[1]}: {out_on.get(bad)} != {out_off[bad]}"
        )
    s_off, got_off = run_samples(device, cache=False, **samples)
    s_on, got_on = run_samples(device, cache=True, **samples)
    if got_on != got_off:
        bad = next(k for k in got_off if got_on.get(k) != got_off[k])
        raise RuntimeError(
            f"the prefix cache changed sample {bad[1]} of prompt {bad[0]}: {got_on.get(bad)} != {got_off[bad]}"
        )
    return {
        "settings": {**settings, "dtype": str(torch.float32)},
        "off": off,
        "on": on,
        "same_tokens": True,
        "samples": {"settings": samples, "off": s_off, "on": s_on, "same_tokens": True},
    }


def format_table(result: dict) -> str:
    s, off, on = result["settings"], result["off"], result["on"]
    lines = [
        f"shared-prefix workload: {s['conversations']} conversations x {s['turns']} turns (each turn resends the "
        f"last prompt and output), TinyMamba, pool {s['slots']} slots; the same tokens with the cache on and off",
        f"{'prefix cache':<13} {'wall s':>8} {'steps':>7} {'prefill tokens':>15} {'generated':>10}  cache",
    ]
    for r in (off, on):
        extra = (
            f"hit rate {r['hit_rate']:.0%}, {r['tokens_saved']} tokens saved, {r['inserts']} donated, "
            f"{r['evictions']} evicted"
            if r["cache"]
            else "-"
        )
        lines.append(
            f"{'on' if r['cache'] else 'off':<13} {r['wall_s']:>8.2f} {r['steps']:>7} {r['prefill_tokens']:>15} "
            f"{r['generated']:>10}  {extra}"
        )
    p = result.get("samples")
    if p is not None:
        ps = p["settings"]
        lines.append(
            f"parallel sampling: {ps['prompts']} prompts x n={ps['n']} samples at temperature 1, submitted at once, "
            f"pool {ps['slots']} slots; the same tokens with the cache on and off"
        )
        for r in (p["off"], p["on"]):
            extra = (
                f"the prompts prefilled once ({r['prompt_tokens']} tokens), {r['hits']} copies, "
                f"{r['tokens_saved']} tokens saved"
                if r["cache"]
                else "every sample prefills its prompt"
            )
            lines.append(
                f"{'on' if r['cache'] else 'off':<13} {r['wall_s']:>8.2f} {r['steps']:>7} {r['prefill_tokens']:>15} "
                f"{r['generated']:>10}  {extra}"
            )
    return "\n".join(lines)
