"""`slotwarden bench pool`: µs per alloc+free round trip of slot allocators, side by side.

The contenders (`pool_contenders`: SGLang's real allocator, a Python list, our ledger strict and
off, its full lifecycle, scattered ids, `GuardedAllocator`) are measured on one device in one
run, interleaved per batch size n (`timing`), each twice: bookkeeping alone, and with the zeroing
of realistic state on alloc (a Qwen3-Next-like gated-delta layer, scaled to a memory budget).
`measure` returns every number and the metadata (what --json writes); `pool_report` says which
targets are met and formats the table.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np
import torch

from slotwarden.bench import common as bench_common
from slotwarden.bench.common import device_of, host_clock, loadavg, machine, sync_for
from slotwarden.bench.pool.contenders import (  # noqa: F401 (the bench's API)
    CONTENDERS,
    DOING,
    INSTALL_HINT,
    LABELS,
    ListSlotPool,
    bookkeeping_steps,
    load_sglang_allocator,
    scattered_ledger,
    sglang_version,
    zeroing_steps,
)
from slotwarden.bench.pool.report import TARGETS, format_report, format_table, row, targets  # noqa: F401
from slotwarden.bench.pool.timing import MAX_REPEATS, time_side_by_side
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.pool import StatePool

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
