"""SGLang's own pool equations, read off the real objects (its invariant checker's arithmetic).

Mamba: available + evictable + protected + session_held + uncached == total, where session_held
counts the slots of the session records (pool_stats_observer.kv_mamba_slots) and uncached those
of the given running requests; `SchedulerInvariantChecker._check_pool_invariant` does the sum. KV tokens:
available + the tree's evictable and protected sizes + what the session rows and the given
running requests hold == the allocator's size.
"""

from __future__ import annotations

from sglang.srt.managers.scheduler_components.invariant_checker import SchedulerInvariantChecker
from sglang.srt.managers.scheduler_components.pool_stats_observer import kv_mamba_slots


def _records(fx, running):
    return [slot.kv for slot in fx.session.slots.values()], [req.kv for req in running]


def mamba_leak(fx, running=()) -> tuple[bool, str]:
    """(leak, message) as SGLang's checker reports it for the Mamba pool."""
    session, live = _records(fx, running)
    return SchedulerInvariantChecker._check_pool_invariant(
        "mamba",
        fx.mamba_free(),
        fx.cache.mamba_evictable_size(),
        fx.cache.mamba_protected_size(),
        sum(kv_mamba_slots(kv) for kv in session),
        fx.pool.mamba_pool.size,
        uncached=sum(kv_mamba_slots(kv) for kv in live),
    )


def _row_tokens(kv) -> int:
    return max(0, kv.kv_allocated_len - kv.cache_protected_len) if kv.holds_kv else 0


def kv_leak(fx, running=()) -> tuple[bool, str]:
    """(leak, message) for the KV token pool."""
    session, live = _records(fx, running)
    return SchedulerInvariantChecker._check_pool_invariant(
        "full",
        fx.kv_free(),
        fx.cache.full_evictable_size(),
        fx.cache.full_protected_size(),
        sum(_row_tokens(kv) for kv in session),
        fx.kv_allocator.size,
        uncached=sum(_row_tokens(kv) for kv in live),
    )


def assert_balanced(fx, running=()) -> None:
    for leak, message in (mamba_leak(fx, running), kv_leak(fx, running)):
        assert not leak, message


def all_free(fx) -> bool:
    """Every Mamba slot, KV token and request row back on its free list."""
    return (
        fx.mamba_free() == fx.pool.mamba_pool.size
        and fx.kv_free() == fx.kv_allocator.size
        and fx.pool.available_size() == fx.sizes.rows
    )
