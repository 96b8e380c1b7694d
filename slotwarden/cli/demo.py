"""`slotwarden demo`: a synthetic serving workload through the scheduler, ending with the audit.

Streaming sessions of short turns and plain requests (`slotwarden.bench.workload`), a few aborts
and client closes, all through a tight pool so that candidates are rolled back and running
requests retracted; the layer is TinyMamba (float32) on the default device, so the state really
flows through the slots. At the end: throughput, peak slot use by state, the lifecycle events
counted, and the final audit (`Scheduler.check_audit()` plus every slot FREE). Exits 0 only with
a clean audit. With `--prefix-cache` the scheduler shares recurrent state by prefix and half the
plain requests continue an earlier one, as a stateless chat client does (the summary adds the
hit rate and the input tokens saved; `--plot` draws them over the steps). With `--n N` every
fresh plain prompt is sent as N parallel samples (`Scheduler.submit_n`); with the cache on, the
summary reports the prefill tokens saved net of the group's own prefill. A run that launches
nothing for many steps while requests wait stops as a failure (`Stalled`, naming who holds the
slots and who waits) instead of spinning until max_steps.
"""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError
import sys
import time
from collections import Counter

import torch

from slotwarden.kernels.layer import TinyMambaConfig
from slotwarden.runtime.scheduler.build import build
from slotwarden.model.errors import LifecycleError
from slotwarden.model.palette import colour
from slotwarden.model.vocabulary import Group
from slotwarden.runtime.scheduler.scheduler import AuditFailed, Scheduler
from slotwarden.bench.workload import Driver, WorkloadSpec, make_plan

PLOT_HINT = "pip install 'slotwarden[plot]'  (or: pip install 'matplotlib>=3.8')"
SCHEDULER = dict(token_budget=64, chunk_size=32, retract_after=3, session_timeout=10)
FOLLOW_SHARE = 0.5  # with --prefix-cache: plain requests that continue an earlier one (shared prefixes)
GROUPS = tuple(Group)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_scheduler(slots: int, device, dtype=torch.float32, *, check: str = "strict", **config) -> Scheduler:
    """A scheduler over a TinyMamba in `dtype` on `device` and a pool of `slots` matching it."""
    settings = dict(SCHEDULER, max_running=slots)
    settings.update(config)
    return build(TinyMambaConfig(dtype=dtype), slots=slots, device=device, check=check, **settings)


def _sample_before_fence(sched: Scheduler, samples: list) -> None:
    """Record `ledger.counts()` once per step, just before the step's fence: the moment of the
    step with the most slots in use (released ones still RELEASED). The scheduler has no per-step
    hook, so the pool's `fence` is wrapped on this one instance."""
    pool, fence, counts = sched.pool, sched.pool.fence, sched.pool.ledger.counts

    def sampled_fence(step=None):
        samples.append(counts())
        return fence(step)

    pool.fence = sampled_fence


class Stalled(SlotwardenError, RuntimeError):
    """Requests wait and no batch has launched for `stall_steps` steps: the scheduler is stuck
    (a safety net; admission is meant never to get here). The message names the head of the
    queue and who holds the slots."""


def _stall_report(sched: Scheduler, steps: int) -> str:
    head = sched.waiting[0]
    holders = [s for s in sched.sessions.values() if s.slot is not None]
    queued = sum(1 for s in holders if s.turn is not None)
    counts = {g.name: n for g, n in sched.pool.ledger.counts().items() if n}
    return (
        f"no batch for {steps} steps while {len(sched.waiting)} requests wait: the head, request {head.rid}"
        f"{f' (session {head.session})' if head.session is not None else ''}, starved of a slot or a seat for "
        f"{head.waited} steps; "
        f"{len(sched.running)} running; slots {counts}; {len(holders)} sessions hold a slot, {queued} of them with "
        "a turn pending"
    )


def simulate(
    spec: WorkloadSpec = WorkloadSpec(),
    *,
    slots: int = 16,
    device=None,
    dtype: torch.dtype = torch.float32,
    overlap: bool = False,
    max_steps: int = 100_000,
    progress: bool = True,
    stall_steps: int | None = None,
    **config,
) -> dict:
    """Run the workload of `spec`; returns every number the summary prints, the per-step slot
    counts (`samples`, one dict Group -> count per step) and the audit's verdict.

    A run that launches no batch for `stall_steps` steps while requests wait (default: 4 session
    timeouts + 50) stops and fails (`Stalled`), with what held the slots."""
    device = torch.device(device) if device is not None else default_device()
    sched = build_scheduler(slots, device, dtype, overlap=overlap, **config)
    plan = make_plan(spec)
    driver = Driver(sched, plan)
    samples: list = []
    saved: list = []  # input tokens the prefix cache saved so far, per step
    _sample_before_fence(sched, samples)
    rollbacks = retractions = prefill_tokens = quiet = 0
    if stall_steps is None:
        stall_steps = 4 * (sched.config.session_timeout or 25) + 50
    kinds = Counter()
    results: list = []  # Result of every request that ended
    failure = None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc="demo", unit="step", file=sys.stderr, mininterval=0.2, dynamic_ncols=True)
    start = time.perf_counter()
    t = 0
    try:
        while not driver.finished:
            if t >= max_steps:
                raise RuntimeError(f"the workload did not finish in {max_steps} steps")
            driver.before_step(t)
            report = sched.step()
            driver.after_step(t)
            quiet = quiet + 1 if report.kind == "idle" and sched.waiting else 0
            if quiet >= stall_steps:
                raise Stalled(_stall_report(sched, quiet))
            results += report.finished
            rollbacks += report.rolled_back
            retractions += len(report.retracted)
            kinds[report.kind] += 1
            if report.kind == "prefill":
                prefill_tokens += report.tokens
            if sched.prefix is not None:
                saved.append(sched.prefix.stats().tokens_saved)
            t += 1
            if bar is not None:
                bar.update(1)
                if t % 16 == 0:
                    c = samples[-1]
                    bar.set_postfix(
                        running=len(sched.running), waiting=len(sched.waiting), free=c[Group.FREE], refresh=False
                    )
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except (AuditFailed, LifecycleError, Stalled) as exc:
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - start
    cache = sched.prefix.stats() if sched.prefix is not None else None
    if cache is not None and failure is None:
        try:  # the cache gives back every slot it holds; the next fence frees them
            sched.flush_cache()
            sched.step()
        except (AuditFailed, LifecycleError) as exc:
            failure = f"{type(exc).__name__}: {exc}"

    audit_line, clean = _final_audit(sched, failure)
    results += sched.collect()
    generated = sum(len(r.output) for r in results) + sum(len(r.output) for r in sched.requests.values())
    in_use = [slots - c[Group.FREE] for c in samples]
    reasons = Counter(r.reason for r in results) + Counter("unfinished" for _ in sched.requests)
    reaped = sum(1 for sid in range(sched.opened) if sid not in sched.sessions and sid not in driver.closed_by_client)
    return {
        "device": str(device),
        "dtype": str(dtype).replace("torch.", ""),
        "slots": slots,
        "overlap": overlap,
        "config": {
            k: getattr(sched.config, k)
            for k in ("max_running", "token_budget", "chunk_size", "retract_after", "session_timeout")
        },
        "workload": {
            "sessions": spec.sessions,
            "requests": spec.requests,
            "samples": spec.samples,
            "seed": spec.seed,
            "turns": driver.stats.turns_sent,
            "long_prompts": sum(1 for a in plan.requests if len(a.prompt) > sched.config.chunk_size),
        },
        "steps": t,
        "steps_by_kind": dict(kinds),
        "tokens_generated": generated,
        "prefill_tokens": prefill_tokens,
        "wall_s": wall,
        "tokens_per_s": generated / wall if wall else 0.0,
        "steps_per_s": t / wall if wall else 0.0,
        "peak_in_use": max(in_use, default=0),
        "peak_by_state": {g.name: max((c[g] for c in samples), default=0) for g in GROUPS if g is not Group.FREE},
        "rollbacks": rollbacks,
        "retractions": retractions,
        "aborts": dict(driver.stats.aborts),
        "finish_reasons": dict(reasons),
        "sessions_closed_by_client": driver.stats.client_closes,
        "deferred_closes": driver.stats.deferred_closes,
        "sessions_closed_by_reaper": reaped,
        "prefix_cache": None
        if cache is None
        else {**cache._asdict(), "hit_rate": cache.hit_rate, "saved_by_step": saved},
        "samples": [{g.name: c[g] for g in GROUPS} for c in samples],
        "audit": audit_line,
        "clean": clean,
    }


def _final_audit(sched: Scheduler, failure: str | None) -> tuple[str, bool]:
    if failure is not None:
        return f"audit: FAILED — the run stopped: {failure}", False
    try:
        audit = sched.check_audit()
    except AuditFailed as exc:
        return f"audit: FAILED — {exc}", False
    counts = audit.counts
    if counts[Group.FREE] != audit.capacity or not audit.clean:
        held = {g.name: n for g, n in counts.items() if n}
        return f"audit: FAILED — {audit.capacity} slots, not all FREE: {held}", False
    return f"audit: clean — {audit.capacity} slots, all FREE", True


def format_summary(r: dict) -> str:
    w, cfg = r["workload"], r["config"]
    by_state = ", ".join(f"{k} {v}" for k, v in r["peak_by_state"].items())
    aborts = ", ".join(f"{k} (request {v})" for k, v in r["aborts"].items()) or "none"
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["steps_by_kind"].items()))
    lines = [
        f"slotwarden demo  device={r['device']}  TinyMamba {r['dtype']}  pool {r['slots']} slots  "
        f"overlap={'on' if r['overlap'] else 'off'}",
        f"  workload: {w['sessions']} sessions ({w['turns']} turns sent), {w['requests']} requests "
        f"({w['long_prompts']} with prompts longer than chunk_size {cfg['chunk_size']}), seed {w['seed']}",
        f"  scheduler: max_running {cfg['max_running']}, token_budget {cfg['token_budget']}, "
        f"retract_after {cfg['retract_after']}, session_timeout {cfg['session_timeout']}",
        f"steps                 {r['steps']}  ({kinds})",
        f"tokens generated      {r['tokens_generated']}  (+ {r['prefill_tokens']} input tokens fed by prefill, "
        "refeeds after retraction included)",
        f"wall time             {r['wall_s']:.2f} s",
        f"throughput            {r['tokens_per_s']:.0f} tokens/s, {r['steps_per_s']:.0f} steps/s",
        f"peak slots in use     {r['peak_in_use']} of {r['slots']}  (peak by state: {by_state})",
        f"rollbacks             {r['rollbacks']}",
        f"retractions           {r['retractions']}",
        f"aborts                {len(r['aborts'])}: {aborts}",
        f"sessions closed       {r['sessions_closed_by_client']} by their client ({r['deferred_closes']} deferred "
        "while a turn ran), "
        f"{r['sessions_closed_by_reaper']} by the reaper",
        "finish reasons        " + ", ".join(f"{k} {v}" for k, v in sorted(r["finish_reasons"].items())),
    ]
    c = r.get("prefix_cache")
    if c is not None:
        lines.append(
            f"prefix cache          hit rate {c['hit_rate']:.0%} ({c['hits']} of {c['lookups']} plain requests "
            "admitted), "
            f"{c['tokens_saved']} input tokens saved; {c['inserts']} slots donated, {c['evictions']} evicted"
        )
    n = w.get("samples", 1)
    if n > 1:
        shared = "each sample prefills its prompt (no prefix cache to share it)"
        if c is not None:
            net = c["tokens_saved"] - c["prompt_tokens"]
            shared = (
                f"each group's prompt request prefills its prompt for the siblings to copy "
                f"({c['prompt_tokens']} input tokens): {net} prefill tokens saved net"
            )
            if net <= 0:
                shared += "; nothing saved: evictions, retractions or too few slots made the siblings prefill it again"
        lines.append(f"parallel sampling     {n} samples per fresh plain prompt; {shared}")
    lines.append(r["audit"])
    return "\n".join(lines)


MAX_WORKLOAD = 1_000_000
"""The most sessions, and the most plain requests, a demo plans (its plan is built up front)."""

LEDGER_BYTES = 30
"""What the ledger keeps for each slot besides its state (`PoolConfig.bytes_per_slot`)."""


def state_bytes(slots: int, dtype: torch.dtype = torch.float32) -> int:
    """The bytes a demo pool of `slots` slots takes (its state, the pad slot and the ledger)."""
    from slotwarden.runtime.scheduler.shapes import pool_config

    per_slot = pool_config(TinyMambaConfig(dtype=dtype), 1).bytes_per_slot() + LEDGER_BYTES
    return (slots + 1) * per_slot


def available_bytes(device: torch.device) -> int | None:
    """The memory free on `device` now (CUDA: the driver's count; CPU: MemAvailable), or None."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot(result: dict, path) -> None:
    """Slot occupancy by group (stacked areas) over the steps, written to `path` (PNG), in the
    group colours of the lifecycle diagram (`slotwarden.model.palette`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["samples"]
    steps = list(range(len(samples)))
    order = tuple(g for g in GROUPS if g is not Group.FREE) + (Group.FREE,)  # held slots at the bottom
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=110)
    ax.stackplot(
        steps,
        *[[c[g.name] for c in samples] for g in order],
        labels=[g.name for g in order],
        colors=[colour(g) for g in order],
        step="post",
        linewidth=0,
    )
    ax.set_xlim(0, max(len(samples) - 1, 1))
    ax.set_ylim(0, result["slots"])
    ax.set_xlabel("step")
    ax.set_ylabel("slots")
    ax.set_title(
        f"slot occupancy by state  ({result['slots']} slots, {result['workload']['sessions']} sessions, "
        f"{result['workload']['requests']} requests, overlap {'on' if result['overlap'] else 'off'}; sampled before "
        "each fence)",
        fontsize=9,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    cache = result.get("prefix_cache")
    if cache is not None and cache["saved_by_step"]:  # the prefix cache's savings, on a second axis
        saved = ax.twinx()
        saved.plot(range(len(cache["saved_by_step"])), cache["saved_by_step"], color="black", linewidth=1.2)
        saved.set_ylabel(f"input tokens saved by the prefix cache (hit rate {cache['hit_rate']:.0%})", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def run(args, **params) -> int:
    """The CLI entry point: `slotwarden demo [--device D] [--sessions N] [--requests N]
    [--slots N] [--overlap] [--seed S] [--plot FILE.png] [--prefix-cache] [--n N]`. `params` override `simulate`'s
    keyword arguments and `WorkloadSpec` fields (the tests use tiny workloads)."""
    plot_path = getattr(args, "plot", None)
    if plot_path and not have_matplotlib():
        print(f"slotwarden demo: --plot needs matplotlib: {PLOT_HINT}", file=sys.stderr)
        return 2
    spec_fields = set(WorkloadSpec.__dataclass_fields__)
    spec = WorkloadSpec(
        sessions=getattr(args, "sessions", 24),
        requests=getattr(args, "requests", 96),
        seed=getattr(args, "seed", 0),
        **({"follow_share": FOLLOW_SHARE} if getattr(args, "prefix_cache", False) else {}),
        samples=getattr(args, "n", 1),
        **{k: v for k, v in params.items() if k in spec_fields},
    )
    options = {k: v for k, v in params.items() if k not in spec_fields}
    options.setdefault("slots", getattr(args, "slots", 16))
    options.setdefault("overlap", bool(getattr(args, "overlap", False)))
    options.setdefault("device", getattr(args, "device", None))
    if getattr(args, "prefix_cache", False):
        options.setdefault("prefix_cache", True)
    result = simulate(spec, **options)
    print(format_summary(result))
    if plot_path:
        plot(result, plot_path)
        print(f"wrote {plot_path}")
    return 0 if result["clean"] else 1
