"""The SGLang adapter's share of SGLang's own slot bookkeeping, on its real objects (CPU).

One round: 8 requests sharing a prompt prefix go through what SGLang's scheduler runs for each
(match with copy-on-write, admission lock, row and slot allocation, the result's checkpoint
into the radix tree at finish), then the tree is evicted whole. There is no model forward: on
a GPU the step's forward comes on top, so the share of a real step is smaller than this ratio.
The same round runs bare and with `slotwarden.adapters.sglang` installed, interleaved, and the
minimum of the rounds is kept.

    .venv/bin/python benchmarks/sglang_step.py [--rounds 30] [--json benchmarks/sglang-cpu.json]

It uses the test suite's SGLang fixtures (tests/adapters/sglang: its import stubs and objects).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from adapters.sglang import stubs  # noqa: E402

stubs.install()

import slotwarden.adapters.sglang as sw  # noqa: E402

from adapters.sglang import flow, objects, scenarios  # noqa: E402

SIZES = objects.Sizes(mamba_slots=24, rows=16, kv_tokens=1024, context=64)
REQUESTS = 8


def one_round(fx) -> None:
    reqs = [objects.make_req(list(range(1, 17)) + [100 + i, 200 + i]) for i in range(REQUESTS)]
    for req in reqs:
        flow.start(fx, req)
    for req in reqs:
        flow.run(fx, req)
        flow.finish(fx, req)
    scenarios.evict_all(fx)


def timed(fx) -> float:
    start = time.perf_counter()
    one_round(fx)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    bare = objects.build(sizes=SIZES)
    sw.install()
    guarded = objects.build(sizes=SIZES)
    assert isinstance(guarded.pool.mamba_allocator, sw.GuardedSlots)
    for fx in (bare, guarded):  # warm-up
        one_round(fx)
    times = {"bare": [], "guarded": []}
    for _ in range(args.rounds):
        times["bare"].append(timed(bare))
        times["guarded"].append(timed(guarded))
    audit = guarded.pool.mamba_allocator.guarded.audit()
    assert audit.problems == () and audit.free_list_ok, audit
    best = {k: min(v) for k, v in times.items()}
    result = {
        "requests_per_round": REQUESTS,
        "rounds": args.rounds,
        "bare_ms": round(best["bare"] * 1e3, 3),
        "guarded_ms": round(best["guarded"] * 1e3, 3),
        "ratio": round(best["guarded"] / best["bare"], 3),
    }
    print(
        f"SGLang bookkeeping, {REQUESTS} requests per round: bare {result['bare_ms']} ms, "
        f"guarded {result['guarded_ms']} ms, ratio {result['ratio']}x (min of {args.rounds} interleaved rounds)"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
