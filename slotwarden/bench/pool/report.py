"""The report of `slotwarden bench pool`: the performance targets met or not, and the table and
text the command prints (information only, never an exit code)."""

from __future__ import annotations

from slotwarden.bench.common import loaded_note
from slotwarden.bench.pool.contenders import LABELS

# (contender, n, most it may cost as a multiple of SGLang's allocator), bookkeeping alone
TARGETS = (
    ("strict", 1, 1.0),
    ("strict", 64, 2.0),
    ("strict", 1024, 2.0),
    ("lifecycle", 1, 4.0),
    ("lifecycle", 64, 4.0),
    ("lifecycle", 1024, 3.0),
    ("scattered", 1024, 2.0),  # a free list that has drifted to scattered ids
    # the drop-in, SGLang's own allocator inside it (its cost included)
    ("guarded", 1, 2.0),
    ("guarded", 64, 3.0),
    ("guarded", 1024, 3.0),
)


def row(result: dict, name: str, n: int) -> dict | None:
    for r in result["rows"]:
        if r["contender"] == name and r["n"] == n:
            return r
    return None


def targets(result: dict) -> list[dict]:
    """The performance targets (`TARGETS`, the zeroing ratio, the ledger's size), each with its
    value and met (True/False, None when not measurable)."""
    out = []

    def ratio_target(name, n, column, limit):
        found = row(result, name, n)
        value = found[column] if found else None
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
        f"slotwarden bench pool  device={m['device']} ({m['device_name']}, {m['cpu_count']} CPUs)  "
        f"torch {m['torch']}  python {m['python']}",
        sg,
        "ledger batches: "
        + (
            "the compiled move (runtime/ledger/_move.c)"
            if m.get("compiled_move")
            else "the numpy path (the compiled move is not built here)"
        ),
        f"bookkeeping: pool of {m['bookkeeping_capacity']} slots; zeroing: {s['layers']} layer(s) x "
        f"{s['num_slots']} slots of a Qwen3-Next-like gated-delta layer (conv {s['conv_dims']} x "
        f"(kernel {s['conv_kernel']} - 1) {s['conv_dtype']}, SSM {s['heads']}x{s['head_dim']}x{s['state_size']} "
        f"{s['ssm_dtype']}) = {s['bytes_per_slot'] / 2**20:.2f} MiB/slot, "
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
