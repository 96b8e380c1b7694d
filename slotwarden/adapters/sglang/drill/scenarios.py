"""SGLang's own normal move sequences, bare, on the real objects of objects.py.

Each scenario takes a Fixture, drives SGLang's methods in the order its scheduler calls them
(flow.py's steps) and returns what SGLang itself showed on the way (counts, indices), for the
tests to check. They know nothing of slotwarden (flow.step's wrappers do nothing more than the
step unless the adapter is installed): the adapter's tests run them with it installed.
(a) plain: one request, allocated and released (abort path). (b) radix: insert at finish,
copy-on-write match, explicit lock/unlock, evict and evict_for_alloc. (c) session: a first turn
taken by the session, a later turn borrowing it, an aborted turn, a new first turn, release.
(d) rollback: the real Scheduler._get_new_batch_prefill_raw (shell.py) with a last candidate that
does not fit. (e) alloc group around a prefill round's matches. (f) flush: the real
Scheduler.flush_cache with the tree and a session holding slots. (g) lazy: lazy extra buffers,
two requests and a session's later turn each crossing track boundaries.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.managers.scheduler_components.batch_result_processor import SchedulerBatchResultProcessor
from sglang.srt.mem_cache.base_prefix_cache import EvictParams
from sglang.srt.mem_cache.common import checkpoint_kv_cache

from slotwarden.adapters.sglang.drill import flow, shell
from slotwarden.adapters.sglang.drill.objects import make_req, make_session

PROMPT = list(range(1, 9))
LONGER = list(range(1, 13))
TRACK_INTERVAL = 4  # the lazy scenario's boundaries: every 4 tokens
LAZY = ("lazy",)
"""The scenarios run with lazy extra buffers (objects.build(lazy=True)): only with extra buffers."""


def evict_all(fx) -> int:
    """`cache.evict` until the tree holds nothing evictable; the number of Mamba states evicted."""
    evicted = 0
    while fx.cache.mamba_evictable_size() or fx.cache.full_evictable_size():
        result = fx.cache.evict(EvictParams(num_tokens=fx.kv_allocator.size, mamba_num=fx.sizes.mamba_slots))
        if not (result.num_tokens_evicted or result.mamba_num_evicted):
            break
        evicted += result.mamba_num_evicted
    return evicted


def plain(fx) -> dict:
    """A request with no prefix: its Mamba slot (and track slots) taken, then released."""
    req = make_req(PROMPT)
    flow.start(fx, req)
    seen = {"held": fx.mamba_free(), "slot": int(req.kv.mamba_pool_idx)}
    seen["steps"] = len(flow.step(fx, [req]))
    flow.run(fx, req, finish=False)
    flow.abort(fx, req)
    seen["after"] = fx.mamba_free()
    seen["holds_mamba"] = req.kv.holds_mamba
    return seen


def radix(fx) -> dict:
    """Insert at finish, a copy-on-write match, lock/unlock, then eviction down to an empty tree."""
    seen = {}
    first = make_req(PROMPT)
    flow.start(fx, first)
    flow.step(fx, [first])
    flow.run(fx, first)
    flow.finish(fx, first)  # release_kv_cache(checkpoint=True): the state goes into the tree
    seen["cached_after_insert"] = fx.cache.mamba_evictable_size()

    second = make_req(LONGER)
    flow.match(fx, second)  # cow_mamba: a fresh slot, the node's state as the copy source
    seen["cow_slot"] = int(second.kv.mamba_pool_idx)
    seen["cow_src"] = int(second.kv.mamba_cow_src_index)
    seen["prefix_len"] = second.prefix_len
    flow.admit(fx, second)  # cache.lock(last_node)
    seen["protected_while_locked"] = fx.cache.mamba_protected_size()
    flow.allocate(fx, second)
    seen["cow_steps"] = len(flow.step(fx, [second]))  # its slot filled by the copy, then written
    flow.run(fx, second)
    flow.finish(fx, second)  # inserts its own state on a new leaf, unlocks
    seen["cached_after_second"] = fx.cache.mamba_evictable_size()

    node = second.last_node
    lock = fx.cache.lock(node)
    seen["protected_by_lock"] = fx.cache.mamba_protected_size()
    fx.cache.unlock(lock)
    seen["protected_after_unlock"] = fx.cache.mamba_protected_size()

    before = fx.mamba_free()
    fx.cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))  # a shortfall of one slot
    seen["freed_by_evict_for_alloc"] = fx.mamba_free() - before
    seen["evicted"] = evict_all(fx)
    return seen


def session(fx) -> dict:
    """A streaming session's turns: take, borrow, park, an aborted turn, a new first turn, release."""
    seen = {}
    sess = make_session("s")
    first = make_req(PROMPT, session=sess)
    flow.start(fx, first)  # ends in maybe_hand_to_session -> StreamingSession.take
    slot = fx.session.slots["s"]
    seen["first_borrows"] = fx.session.borrowed_slot(first) is slot
    flow.step(fx, [first])
    flow.run(fx, first, finish=False)
    checkpoint_kv_cache(first, fx.cache)  # the prefill publishes the prompt (try_checkpoint)
    flow.run(fx, first)
    flow.finish(fx, first)  # try_cache_finished_req: detach_kv, the slot keeps the record
    seen["parked_slot"] = int(slot.kv.mamba_pool_idx)
    seen["first_holds_after"] = first.kv.holds_mamba

    later = make_req(LONGER, session=sess)
    free_before = fx.mamba_free()
    flow.start(fx, later)  # match_prefix -> try_match_prefix: req.kv = slot.kv, no allocation
    seen["later_borrows"] = later.kv is slot.kv
    seen["later_allocated"] = free_before - fx.mamba_free()
    seen["later_steps"] = len(flow.step(fx, [later]))  # on the slot the first turn wrote
    flow.run(fx, later)
    flow.finish(fx, later)

    aborted = make_req(LONGER + [13, 14], session=sess)
    flow.start(fx, aborted)
    flow.abort(fx, aborted)  # the session gives its record up; release_kv_cache frees it
    seen["slot_after_abort"] = "s" in fx.session.slots

    again = make_req(PROMPT + [20], session=sess)
    flow.start(fx, again)  # a new first turn: the session takes a new record
    flow.step(fx, [again])
    flow.run(fx, again)
    flow.finish(fx, again)
    seen["session_held"] = "s" in fx.session.slots
    fx.cache.release_session("s")  # unlock, free the row, KV and the Mamba slot
    seen["slot_after_release"] = "s" in fx.session.slots
    seen["evicted"] = evict_all(fx)
    return seen


def alloc_group(fx) -> dict:
    """A prefill round of three waiting requests inside alloc_group_begin/alloc_group_end.

    Two hit the cached prompt and take their copy-on-write slot from the group; one misses and
    takes none there (its slot comes at allocation, after the group), so one prefetched slot
    goes back at alloc_group_end."""
    seen = {}
    seed = make_req(PROMPT)
    flow.start(fx, seed)
    flow.step(fx, [seed])
    flow.run(fx, seed)
    flow.finish(fx, seed)
    waiting = [make_req(PROMPT + [30, 31]), make_req(PROMPT + [40, 41]), make_req([90, 91, 92, 93])]
    allocator = fx.mamba_allocator
    free_before = fx.mamba_free()
    allocator.alloc_group_begin(len(waiting))  # prefetches one slot per waiting request
    seen["prefetched"] = free_before - fx.mamba_free()
    for req in waiting:
        flow.match(fx, req)
        flow.admit(fx, req)
    allocator.alloc_group_end()
    seen["taken_in_group"] = free_before - fx.mamba_free()
    seen["cow"] = [req.kv.mamba_cow_src_index is not None for req in waiting]
    for req in waiting:
        flow.allocate(fx, req)
        flow.run(fx, req)
        flow.finish(fx, req)
    seen["evicted"] = evict_all(fx)
    return seen


def flush(fx) -> dict:
    """The real Scheduler.flush_cache when idle, with the tree and a session holding slots."""
    seen = {}
    cached = make_req(PROMPT)
    flow.start(fx, cached)
    flow.run(fx, cached)
    flow.finish(fx, cached)
    turn = make_req(LONGER, session=make_session("f"))
    flow.start(fx, turn)
    flow.run(fx, turn)
    flow.finish(fx, turn)
    seen["held_before"] = fx.pool.mamba_pool.size - fx.mamba_free()
    seen["sessions_before"] = len(fx.session.slots)
    with shell.FreeSpy(fx.mamba_allocator) as spy:
        # tree_cache.reset() drops the nodes and the session records without freeing a slot,
        # then req_to_token_pool.clear() -> mamba_allocator.clear() and the KV allocator's clear
        seen["flushed"] = shell.flush_cache(shell.shell(fx, []))
    seen["frees"] = spy.calls
    seen["sessions_after"] = len(fx.session.slots)
    return seen


def rollback(fx) -> dict:
    """A prefill round whose last candidate does not fit: its copy-on-write slot is rolled back."""
    seed = make_req(PROMPT)
    flow.start(fx, seed)
    flow.step(fx, [seed])
    flow.run(fx, seed)
    flow.finish(fx, seed)
    fits = make_req(PROMPT + [50, 51])
    too_long = make_req(PROMPT + list(range(100, 100 + 3 * 64)))  # past max_prefill_tokens
    sched = shell.shell(fx, [fits, too_long])
    with shell.FreeSpy(fx.mamba_allocator) as spy:
        batch, running = shell.prefill_round(fx, sched)
    seen = {
        "admitted": [r.rid for r in batch.reqs],
        "waiting": [r.rid for r in sched.waiting_queue],
        "rolled_back_holds": too_long.kv.holds_mamba,
        "frees": spy.calls,
        "batch_is_full": running.batch_is_full,
    }
    flow.run(fx, fits)
    flow.finish(fx, fits)
    seen["evicted"] = evict_all(fx)
    return seen


def boundary_batch(fx, reqs, seq_len: int):
    """What the lazy boundary methods read of a decode ScheduleBatch at `seq_len` tokens."""
    return SimpleNamespace(reqs=reqs, req_to_token_pool=fx.pool, seq_lens_cpu=torch.tensor([seq_len] * len(reqs)))


def _cross(fx, reqs, seq_len: int, speculative: bool) -> None:
    """One track boundary: SGLang's loop allocates each request's next track slot (the prealloc,
    or the speculative prepare), the decode runs, and the post-decode frees the old one."""
    batch = boundary_batch(fx, reqs, seq_len)
    if speculative:
        ScheduleBatch.mamba_lazy_spec_prepare(batch, TRACK_INTERVAL, 3)
    else:
        ScheduleBatch.mamba_lazy_prealloc_at_boundary(batch, TRACK_INTERVAL)
    for req in reqs:
        after = SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary
        after(object(), req, batch, req.kv.mamba_next_track_idx)


def lazy(fx) -> dict:
    """Lazy extra buffers: two requests cross a boundary by prealloc, then one by the speculative
    prepare; a session's later turn (borrowing the record) crosses one; then all finish."""
    seen = {}
    reqs = [make_req(PROMPT), make_req(PROMPT + [60, 61])]
    for req in reqs:
        flow.start(fx, req)
    seen["tracks_at_start"] = [list(r.kv.mamba_ping_pong_empty) for r in reqs]
    _cross(fx, reqs, 2 * TRACK_INTERVAL, speculative=False)
    seen["free_after_prealloc"] = fx.mamba_free()
    _cross(fx, reqs, 3 * TRACK_INTERVAL, speculative=True)
    seen["tracks_after_spec"] = [list(r.kv.mamba_ping_pong_empty) for r in reqs]
    seen["steps"] = len(flow.step(fx, reqs))
    for req in reqs:
        flow.run(fx, req)
        flow.finish(fx, req)
    evict_all(fx)
    sess = make_session("z")
    first = make_req(PROMPT, session=sess)
    flow.start(fx, first)
    flow.run(fx, first)
    flow.finish(fx, first)
    later = make_req(LONGER, session=sess)
    flow.start(fx, later)
    _cross(fx, [later], 3 * TRACK_INTERVAL, speculative=False)
    flow.run(fx, later)
    flow.finish(fx, later)
    seen["session_held"] = "z" in fx.session.slots
    fx.cache.release_session("z")
    seen["evicted"] = evict_all(fx)
    seen["free_at_end"] = fx.mamba_free()
    return seen
