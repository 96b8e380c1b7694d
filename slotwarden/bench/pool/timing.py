"""The timing harness of `slotwarden bench pool`: timeit-style loops (gc off, the loop count
calibrated per contender and n), repeated with the contenders interleaved so that drift hits all
of them alike. The minimum of the repeats is the statistic (the higher ones measure other
processes' interference, not the code); the median and every repeat are kept too."""

from __future__ import annotations

import gc
import statistics
import time
from typing import Callable

MAX_REPEATS = 40


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
