"""`slotwarden bench pool`: µs per alloc+free round trip of slot allocators, side by side.

Contenders, measured on one device in one run, interleaved per batch size n:

- ``sglang``: SGLang's real ``MambaSlotAllocator`` (``sglang==0.5.23``, loaded from its own module
  file, not copied): a device tensor free list, ``alloc`` slices it, ``free`` does ``torch.cat``.
- ``pylist``: a Python free list keyed by request id, as TensorRT-LLM and LMDeploy keep theirs.
- ``strict`` / ``off``: our `SlotLedger` with ``check="strict"`` / ``check="off"``: alloc, then
  ROLLBACK (a candidate that takes its slots and gives them back: the direct counterpart of
  alloc+free).
- ``lifecycle``: the strict ledger's full request round trip: alloc, ADMIT, FINISH, launch, fence.
- ``scattered``: ``strict`` on a ledger whose free ring was shuffled once (seeded): its allocs hand
  out scattered ids, never runs of consecutive slots, so the batch paths take them a slot at a
  time (the ring in order, as in ``strict``, hands out runs).
- ``guarded``: `GuardedAllocator` (SGLang's allocator API on the strict ledger) around a second
  SGLang allocator: alloc, free, as an engine that swaps it in would call them (needs sglang).

Each is timed twice: bookkeeping alone, and with the zeroing of realistic state on alloc (the
`StatePool` zeroes what it hands out; the baselines get the very same `zero_slots` call after their
alloc). Times are timeit-style loops (gc off, loop count calibrated per contender and n), repeated
with the contenders interleaved; the table shows the minimum of the repeats (timeit's advice: the
higher ones measure other processes' interference, not the code), the JSON keeps the median and
every repeat too.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import importlib.metadata
import importlib.util
import os
import statistics
import time
from typing import Callable

import numpy as np
import torch

from slotwarden.bench import common as bench_common
from slotwarden.bench.common import device_of, host_clock, loadavg, loaded_note, machine, sync_for, write_json  # noqa: F401
from slotwarden.runtime.ledger import compiled
from slotwarden.kernels.slots import zero_slots
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.guarded_allocator import GuardedAllocator, acting
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.pool import StatePool

SGLANG_VERSION = "0.5.23"
SGLANG_MODULE = ("srt", "mem_cache", "allocator", "mamba.py")
INSTALL_HINT = f"pip install --no-deps sglang=={SGLANG_VERSION}"

NS = (1, 64, 1024)
BOOKKEEPING_CAPACITY = 2048
STATE_BUDGET = 4 * 2**30  # bytes of recurrent state the zeroing pass may allocate

# One Qwen3-Next-80B-A3B gated-delta (linear attention) layer, 36 of its 48 layers: conv over
# q, k, v (2 * 16 key heads * 128 + 32 value heads * 128 = 8192 channels, kernel 4) and an SSM
# state of 32 heads * 128 * 128 (fp32). conv bf16 / SSM fp32, as engines keep them.
QWEN3_NEXT_LAYER = dict(conv_dims=(8192,), conv_kernel=4, heads=32, head_dim=128, state_size=128)
QWEN3_NEXT_LINEAR_LAYERS = 36

# repeats: at least this many rounds; budget_s: more rounds (up to MAX_REPEATS) while one n of one
# pass takes less than this. Many short loops give the minimum more chances at a quiet moment.
DEFAULT = dict(repeats=5, loop_s=0.05, budget_s=6.0)  # the recorded results
QUICK = dict(repeats=2, loop_s=0.01, budget_s=0.6)  # a smoke run (most of it allocating and touching the state)
MAX_REPEATS = 40

# (contender, n, most it may cost as a multiple of SGLang's allocator), bookkeeping alone
TARGETS = (
    ("strict", 1, 1.0),
    ("strict", 64, 2.0),
    ("strict", 1024, 2.0),
    ("lifecycle", 1, 4.0),
    ("lifecycle", 64, 4.0),
)

CONTENDERS = ("sglang", "pylist", "strict", "off", "lifecycle", "scattered", "guarded")
LABELS = {
    "sglang": "SGLang MambaSlotAllocator",
    "pylist": "Python list by request id",
    "strict": "SlotLedger check=strict",
    "off": "SlotLedger check=off",
    "lifecycle": "strict, full lifecycle",
    "scattered": "strict, scattered ids",
    "guarded": "GuardedAllocator(SGLang)",
}
DOING = {
    "sglang": "alloc(n); free(ids)",
    "pylist": "alloc(rid, n): pop n ids; free(rid): pop dict entry, extend list",
    "strict": "alloc(n, request); apply(ROLLBACK, ids, request)",
    "off": "alloc(n, request); apply(ROLLBACK, ids, request)",
    "lifecycle": "alloc; ADMIT; FINISH; launch(); fence()",
    "scattered": "as strict, the free ring shuffled once",
    "guarded": "with acting(request): alloc(n); free(ids)",
}


# -- the contenders ------------------------------------------------------------------------------
def load_sglang_allocator():
    """SGLang's `MambaSlotAllocator` class, loaded from its module file alone (importing the
    `sglang` package would pull its heavy dependencies), or None if sglang is not installed."""
    spec = importlib.util.find_spec("sglang")  # a top-level name: finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = os.path.join(root, *SGLANG_MODULE)
        if os.path.exists(path):
            mod_spec = importlib.util.spec_from_file_location("_slotwarden_bench_sglang_mamba", path)
            module = importlib.util.module_from_spec(mod_spec)
            mod_spec.loader.exec_module(module)
            return module.MambaSlotAllocator
    return None


def sglang_version() -> str | None:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


class ListSlotPool:
    """The baseline: a Python free list, and the slots of each request in a dict (as TensorRT-LLM
    and LMDeploy keep them). A repeated free is a silent no-op; nothing records ownership rules."""

    def __init__(self, size: int):
        self.free_ids = list(range(size, 0, -1))  # slot 0 is the pad slot; pops from the end
        self.owned: dict[int, list[int]] = {}

    def alloc(self, request_id: int, n: int) -> list[int] | None:
        if n > len(self.free_ids):
            return None
        ids = self.free_ids[-n:]
        del self.free_ids[-n:]
        self.owned[request_id] = ids
        return ids

    def free(self, request_id: int) -> None:
        ids = self.owned.pop(request_id, None)
        if ids:
            self.free_ids.extend(ids)


def _counter():
    box = [0]

    def nxt() -> int:
        box[0] += 1
        return box[0]

    return nxt


def bookkeeping_steps(capacity: int, device: torch.device, sglang_cls) -> dict[str, Callable[[int], None]]:
    """One alloc+free round trip of n slots per contender, bookkeeping only."""
    steps = {}
    rid = _counter()
    if sglang_cls is not None:
        sg = sglang_cls(capacity, str(device))

        def sglang(n):
            sg.free(sg.alloc(n))

        steps["sglang"] = sglang
    lp = ListSlotPool(capacity)

    def pylist(n):
        r = rid()
        lp.alloc(r, n)
        lp.free(r)

    steps["pylist"] = pylist
    for check in ("strict", "off"):
        ledger = SlotLedger(capacity, check=check)

        def checked(n, L=ledger):
            a = Actor.request(rid())
            L.apply(Event.ROLLBACK, L.alloc(n, a), a)

        steps[check] = checked
    lc = SlotLedger(capacity, check="strict")

    def lifecycle(n):
        a = Actor.request(rid())
        ids = lc.alloc(n, a)
        lc.apply(Event.ADMIT, ids, a)
        lc.apply(Event.FINISH, ids, a)
        lc.launch()
        lc.fence()

    steps["lifecycle"] = lifecycle
    shuffled = scattered_ledger(capacity)

    def scattered(n):
        a = Actor.request(rid())
        shuffled.apply(Event.ROLLBACK, shuffled.alloc(n, a), a)

    steps["scattered"] = scattered
    if sglang_cls is not None:
        steps["guarded"] = _guarded(sglang_cls(capacity, str(device)), rid)
    return steps


def scattered_ledger(capacity: int, seed: int = 0) -> SlotLedger:
    """A strict ledger whose free ring is in a shuffled order (every slot taken, then given back
    in a seeded random order): its allocs hand out scattered ids, in that order, round after round."""
    ledger = SlotLedger(capacity)
    a = Actor.request(0)
    ids = ledger.alloc(capacity, a)
    ledger.apply(Event.ROLLBACK, np.random.default_rng(seed).permutation(ids), a)
    return ledger


def _guarded(engine, rid, zero=None) -> Callable[[int], None]:
    guarded = GuardedAllocator(engine)

    def round_trip(n):
        with acting(Actor.request(rid())):
            ids = guarded.alloc(n)
            if zero is not None:
                zero(ids)
            guarded.free(ids)

    return round_trip


def zeroing_steps(pool: StatePool, sglang_cls) -> dict[str, Callable[[int], None]]:
    """The same round trips, each zeroing the state of the slots it allocates. The pool zeroes in
    `alloc`; the baselines call the same `zero_slots` on the same tensors after theirs."""
    steps = {}
    rid = _counter()
    tensors, capacity, device = pool.tensors, pool.capacity, pool.device
    if sglang_cls is not None:
        sg = sglang_cls(capacity, str(device))

        def sglang(n):
            ids = sg.alloc(n)
            zero_slots(tensors, ids)  # already int64 on the device
            sg.free(ids)

        steps["sglang"] = sglang
    lp = ListSlotPool(capacity)

    def pylist(n):
        r = rid()
        ids = lp.alloc(r, n)
        zero_slots(tensors, torch.tensor(ids, dtype=torch.int64).to(device, non_blocking=True))
        lp.free(r)

    steps["pylist"] = pylist
    for check in ("strict", "off"):
        p = copy.copy(pool)  # shares the state tensors; its own ledger
        p.ledger = SlotLedger(capacity, check=check)

        def checked(n, p=p):
            a = Actor.request(rid())
            p.rollback(p.alloc(n, a), a)

        steps[check] = checked
    lp_pool = copy.copy(pool)
    lp_pool.ledger = SlotLedger(capacity, check="strict")

    def lifecycle(n):
        a = Actor.request(rid())
        ids = lp_pool.alloc(n, a)
        lp_pool.admit(ids, a)
        lp_pool.finish(ids, a)
        lp_pool.launch()
        lp_pool.fence()

    steps["lifecycle"] = lifecycle
    sc_pool = copy.copy(pool)
    sc_pool.ledger = scattered_ledger(capacity)

    def scattered(n):
        a = Actor.request(rid())
        sc_pool.rollback(sc_pool.alloc(n, a), a)

    steps["scattered"] = scattered
    if sglang_cls is not None:
        steps["guarded"] = _guarded(sglang_cls(capacity, str(device)), rid, lambda ids: zero_slots(tensors, ids))
    return steps


# -- timing --------------------------------------------------------------------------------------
def _loop(fn: Callable[[int], None], n: int, number: int, sync, clock=time.perf_counter) -> float:
    """Seconds for `number` calls of fn(n) by `clock`, device work included (synchronized on CUDA)."""
    sync()
    t0 = clock()
    for _ in range(number):
        fn(n)
    sync()
    return clock() - t0


def _calibrate(fn, n: int, loop_s: float, sync, clock=time.perf_counter) -> tuple[int, float]:
    """timeit's autorange: the smallest 1, 2, 5, 10, 20, ... calls that take at least loop_s,
    and how long that loop took."""
    i = 1
    while True:
        for k in (1, 2, 5):
            number = i * k
            took = _loop(fn, n, number, sync, clock)
            if took >= loop_s or number >= 10**6:
                return number, took
        i *= 10


def time_side_by_side(
    steps: dict, ns, repeats: int, loop_s: float, sync, budget_s: float = 0.0, warmup: int = 3, clock=time.perf_counter
) -> dict:
    """For each n: warm every contender up, calibrate its loop, then time rounds with the
    contenders interleaved (the order rotates each round, so drift hits all of them): at least
    `repeats` rounds, more (up to MAX_REPEATS) while they fit in `budget_s`. Timed by `clock`.
    Returns {name: {n: {"us": min, "median_us": ..., "runs_us": [...], "number": loops}}}."""
    out = {name: {} for name in steps}
    names = list(steps)
    gc_was = gc.isenabled()
    gc.collect()  # once, before; none inside (cycles are rare here, refcounting frees the rest)
    gc.disable()
    try:
        for n in ns:
            numbers, seconds = {}, {}
            for name in names:
                spent = _loop(steps[name], n, 1, sync)  # first call: caches, first touch of the pages
                for _ in range(warmup - 1):  # more only while it is cheap (zeroing 1024 slots is not)
                    if spent >= loop_s:
                        break
                    spent += _loop(steps[name], n, 1, sync)
                numbers[name], seconds[name] = _calibrate(steps[name], n, loop_s, sync, clock)
            round_s = sum(seconds.values())
            rounds = repeats if round_s <= 0 else int(budget_s / round_s)
            rounds = max(repeats, min(MAX_REPEATS, rounds))
            runs = {name: [] for name in names}
            for r in range(rounds):
                order = names[r % len(names) :] + names[: r % len(names)]
                for name in order:
                    runs[name].append(_loop(steps[name], n, numbers[name], sync, clock) / numbers[name] * 1e6)
            for name in names:
                out[name][n] = {
                    "us": min(runs[name]),
                    "median_us": statistics.median(runs[name]),
                    "runs_us": runs[name],
                    "number": numbers[name],
                }
    finally:
        if gc_was:
            gc.enable()
    return out


# -- the state shape -----------------------------------------------------------------------------
def scaled_config(device, max_n: int, budget: int = STATE_BUDGET, layer: dict | None = None) -> PoolConfig:
    """The Qwen3-Next-like layer shape with as many layers (at most the model's 36) as `budget`
    bytes hold for just above `max_n` slots (at least one layer)."""
    layer = dict(QWEN3_NEXT_LAYER if layer is None else layer)
    slots = max_n + max(8, max_n // 128)
    one = PoolConfig(num_slots=slots, layers=1, device=device, **layer)
    layers = max(1, min(QWEN3_NEXT_LINEAR_LAYERS, budget // (one.bytes_per_slot() * (slots + 1))))
    return PoolConfig(num_slots=slots, layers=int(layers), device=device, **layer)


def describe_config(cfg: PoolConfig) -> dict:
    return {
        "model": "Qwen3-Next-like gated-delta layer (scaled)",
        "layers": cfg.layers,
        "num_slots": cfg.num_slots,
        "conv_dims": list(cfg.conv_dims),
        "conv_kernel": cfg.conv_kernel,
        "heads": cfg.heads,
        "head_dim": cfg.head_dim,
        "state_size": cfg.state_size,
        "conv_dtype": str(cfg.conv_dtype).replace("torch.", ""),
        "ssm_dtype": str(cfg.ssm_dtype).replace("torch.", ""),
        "bytes_per_slot": cfg.bytes_per_slot(),
        "total_state_bytes": cfg.bytes_per_slot() * (cfg.num_slots + 1),
    }


def ledger_bytes_per_slot(capacity: int = BOOKKEEPING_CAPACITY) -> float:
    """Bytes the ledger keeps per slot: its columns (`SlotLedger.tensors`) and every other array
    of a slot's length it holds (e.g. the id sequence its duplicate and run checks read)."""
    ledger = SlotLedger(capacity)
    columns = [t.numpy() for t in ledger.tensors.values()]
    others = [
        a
        for a in vars(ledger).values()
        if isinstance(a, np.ndarray)
        and a.shape[:1] in ((capacity,), (capacity + 1,))
        and not any(np.shares_memory(a, c) for c in columns)
    ]
    return sum(a.nbytes for a in columns + others) / capacity


# -- the measurement -----------------------------------------------------------------------------
def measure(
    device=None,
    *,
    ns=NS,
    repeats: int = DEFAULT["repeats"],
    loop_s: float = DEFAULT["loop_s"],
    budget_s: float = DEFAULT["budget_s"],
    bookkeeping_capacity: int = BOOKKEEPING_CAPACITY,
    config: PoolConfig | None = None,
    use_sglang: bool = True,
    log: Callable[[str], None] = lambda s: None,
) -> dict:
    """Run the whole comparison; returns every number and the metadata (what --json writes)."""
    device = device_of(device)
    ns = tuple(int(n) for n in ns)
    capacity = max(bookkeeping_capacity, max(ns))
    sglang_cls = load_sglang_allocator() if use_sglang else None
    sync = sync_for(device)
    config = config if config is not None else scaled_config(device, max(ns))
    if config.num_slots < max(ns):
        raise ValueError(f"the state pool holds {config.num_slots} slots, fewer than n={max(ns)}")
    if str(torch.device(config.device)) != str(device):
        config = dataclasses.replace(config, device=device)

    load_before = loadavg()
    t0 = time.perf_counter()
    log(f"bookkeeping: pool of {capacity} slots, n = {', '.join(map(str, ns))}")
    clock = host_clock(device)  # bookkeeping is host work: on a CPU, this thread's CPU seconds
    book = time_side_by_side(
        bookkeeping_steps(capacity, device, sglang_cls), ns, repeats, loop_s, sync, budget_s, clock=clock
    )
    log(f"  {time.perf_counter() - t0:.1f} s")
    log(f"zeroing: allocating {config.bytes_per_slot() * (config.num_slots + 1) / 2**30:.2f} GiB of state on {device}")
    pool = StatePool(config)
    zero = time_side_by_side(zeroing_steps(pool, sglang_cls), ns, repeats, loop_s, sync, budget_s)
    del pool
    elapsed = time.perf_counter() - t0
    log(f"  {elapsed:.1f} s in all")

    rows = []
    for name in CONTENDERS:
        if name not in book:
            continue
        for n in ns:
            b, z = book[name][n], zero[name][n]
            ref_b = book["sglang"][n]["us"] if "sglang" in book else None
            ref_z = zero["sglang"][n]["us"] if "sglang" in zero else None
            rows.append(
                {
                    "contender": name,
                    "label": LABELS[name],
                    "does": DOING[name],
                    "n": n,
                    "bookkeeping_us": b["us"],
                    "bookkeeping_ratio_to_sglang": b["us"] / ref_b if ref_b else None,
                    "zeroing_us": z["us"],
                    "zeroing_ratio_to_sglang": z["us"] / ref_z if ref_z else None,
                    "bookkeeping_median_us": b["median_us"],
                    "zeroing_median_us": z["median_us"],
                    "bookkeeping_runs_us": b["runs_us"],
                    "zeroing_runs_us": z["runs_us"],
                    "bookkeeping_loop_number": b["number"],
                    "zeroing_loop_number": z["number"],
                }
            )
    result = {
        "meta": {
            **machine(device),
            "sglang": sglang_version() if sglang_cls is not None else None,
            "sglang_loaded": sglang_cls is not None,
            "statistic": "min",  # of the repeats; *_median_us and *_runs_us give the rest
            "compiled_move": compiled.AVAILABLE,  # the ledger's C kernel built (else its numpy path ran)
            "bookkeeping_clock": clock.__name__,  # thread_time: CPU seconds (on a CPU); zeroing: perf_counter
            "min_repeats": repeats,
            "max_repeats": MAX_REPEATS,
            "loop_target_s": loop_s,
            "budget_s_per_n": budget_s,
            "ns": list(ns),
            "bookkeeping_capacity": capacity,
            "state": describe_config(config),
            "elapsed_s": elapsed,
            "loadavg_1min": {"before": load_before, "after": loadavg()},  # other processes' share of the CPUs
        },
        "ledger_bytes_per_slot": ledger_bytes_per_slot(capacity),
        "rows": rows,
    }
    result["targets"] = targets(result)
    return result


def _row(result: dict, name: str, n: int) -> dict | None:
    for r in result["rows"]:
        if r["contender"] == name and r["n"] == n:
            return r
    return None


def targets(result: dict) -> list[dict]:
    """The performance targets (`TARGETS`, the zeroing ratio, the ledger's size), each with its
    value and met (True/False, None when not measurable)."""
    out = []

    def ratio_target(name, n, column, limit):
        row = _row(result, name, n)
        value = row[column] if row else None
        what = f"{LABELS[name]}{' with zeroing' if column.startswith('zeroing') else ''} <= {limit:g}x SGLang at n={n}"
        out.append(
            {
                "target": what,
                "measure": f"{name} / SGLang",
                "value": value,
                "limit": limit,
                "met": None if value is None else value <= limit,
            }
        )

    for name, n, limit in TARGETS:
        ratio_target(name, n, "bookkeeping_ratio_to_sglang", limit)
    ratio_target("strict", 64, "zeroing_ratio_to_sglang", 1.10)
    b = result["ledger_bytes_per_slot"]
    out.append(
        {
            "target": "ledger <= 32 B/slot",
            "measure": "bytes of the ledger's per-slot arrays / capacity",
            "value": b,
            "limit": 32.0,
            "met": b <= 32.0,
        }
    )
    return out


# -- the report ----------------------------------------------------------------------------------
def _ratio(x) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def _us(x: float) -> str:
    return f"{x:,.1f}" if x < 1e5 else f"{x:,.0f}"


def format_table(result: dict) -> str:
    head = ("contender", "n", "us bookkeeping", "vs SGLang", "us with zeroing", "vs SGLang")
    body = [
        (
            r["label"],
            str(r["n"]),
            _us(r["bookkeeping_us"]),
            _ratio(r["bookkeeping_ratio_to_sglang"]),
            _us(r["zeroing_us"]),
            _ratio(r["zeroing_ratio_to_sglang"]),
        )
        for r in result["rows"]
    ]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    align = ("<", ">", ">", ">", ">", ">")

    def line(cells):
        return "| " + " | ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if a == ">" else ("-" * (w + 2)) for a, w in zip(align, widths)) + "|"
    return "\n".join([line(head), rule, *map(line, body)])


def format_report(result: dict) -> str:
    m, s = result["meta"], result["meta"]["state"]
    sg = (
        f"sglang {m['sglang']} (MambaSlotAllocator, loaded from its module file)"
        if m["sglang_loaded"]
        else "sglang: not installed, column skipped"
    )
    lines = [
        f"slotwarden bench pool  device={m['device']} ({m['device_name']}, {m['cpu_count']} CPUs)  torch {m['torch']}  python {m['python']}",
        sg,
        "ledger batches: "
        + (
            "the compiled move (runtime/ledger/_move.c)"
            if m.get("compiled_move")
            else "the numpy path (the compiled move is not built here)"
        ),
        f"bookkeeping: pool of {m['bookkeeping_capacity']} slots; zeroing: {s['layers']} layer(s) x {s['num_slots']} slots of a "
        f"Qwen3-Next-like gated-delta layer (conv {s['conv_dims']} x (kernel {s['conv_kernel']} - 1) {s['conv_dtype']}, "
        f"SSM {s['heads']}x{s['head_dim']}x{s['state_size']} {s['ssm_dtype']}) = {s['bytes_per_slot'] / 2**20:.2f} MiB/slot, "
        f"{s['total_state_bytes'] / 2**30:.2f} GiB in all",
        f"us per alloc+free round trip: {m['statistic']} of {m['min_repeats']}-{m['max_repeats']} repeats "
        f"(as many as fit in {m['budget_s_per_n']} s per n), each a timeit-style loop of >= {m['loop_target_s']} s "
        "(gc off), contenders interleaved per n; median and every repeat in the JSON"
        + (
            "; bookkeeping in CPU seconds of the timing thread (time.thread_time), zeroing in wall seconds"
            if m.get("bookkeeping_clock") == "thread_time"
            else ""
        )
        + (
            "; torch.cuda.synchronize() around every timed loop, so device work is counted"
            if m["cuda_synchronized"]
            else ""
        ),
        "",
        format_table(result),
        "",
        f"ledger: {result['ledger_bytes_per_slot']:.2f} B/slot (the ledger's per-slot arrays / capacity)",
        "",
        "targets (information only, never an exit code):",
    ]
    for t in result["targets"]:
        mark = "n/a" if t["met"] is None else ("met" if t["met"] else "NOT MET")
        value = "n/a" if t["value"] is None else f"{t['value']:.2f}"
        lines.append(f"  {mark:8s} {t['target']}: {t['measure']} = {value} (limit {t['limit']})")
    lines.append(f"took {m['elapsed_s']:.1f} s")
    note = loaded_note(list(m["loadavg_1min"].values()), m["cpu_count"])
    if note:
        lines.append(note)
    return "\n".join(lines)


def run(args, **params) -> int:
    """The CLI entry point: `slotwarden bench pool [--device D] [--json FILE] [--quick]`.
    `params` override `measure`'s arguments (the tests use tiny sizes)."""
    use_sglang = params.pop("use_sglang", True)
    if use_sglang and load_sglang_allocator() is None:
        print(
            f"sglang is not installed: the SGLang column is skipped (ratios print n/a). To include it: {INSTALL_HINT}"
        )
        use_sglang = False
    return bench_common.run(args, params, DEFAULT, QUICK, measure, format_report, use_sglang=use_sglang)
