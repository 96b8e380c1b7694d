"""One request's steps, each made of the statements SGLang's scheduler runs for it, on real objects.

match: `Req.init_next_round_input(tree_cache)` (copy-on-write on, as the scheduler's default).
admit: what `PrefillAdder._commit_prefill_admission` does (the tree lock).
allocate: `alloc_for_extend`'s work for one request: `alloc_req_slots` (which may evict), the KV
tokens by `alloc_token_slots`, the row written by `write_cache_indices`' rule, the lengths, then
`tree_cache.maybe_hand_to_session`.
run: stands in for the forward and the result processor (output tokens, the track seqlen the
extra-buffer forward records, the finish reason). step: one step of a batch through the wrapped
`Scheduler.run_batch` (its deferred zeroing and copies collected by `ScheduleBatch`'s own code)
and `process_batch_result`. finish:
`release_kv_cache(checkpoint=True)` as `process_batch_result_*` calls it; release:
`release_kv_cache(checkpoint=False)`, the abort/retract path.
"""

from __future__ import annotations

import torch
from types import SimpleNamespace

from sglang.srt.managers.schedule_batch import (
    FINISH_ABORT,
    FINISH_LENGTH,
    ScheduleBatch,
    set_mamba_track_indices_from_reqs,
)
from sglang.srt.mem_cache.allocation import alloc_req_slots, alloc_token_slots
from sglang.srt.mem_cache.common import release_kv_cache

from slotwarden.adapters.sglang import hooks


def match(fx, req) -> None:
    req.init_next_round_input(fx.cache)


def admit(fx, req) -> None:
    req.extend_end = len(req.full_untruncated_fill_ids)
    req.lock = fx.cache.lock(req.last_node)


def _prefix(fx, req) -> torch.Tensor:
    if req.kv.holds_kv:
        return fx.pool.req_to_token[req.kv.req_pool_idx, : req.prefix_len].to(torch.int64)
    if req.prefix_len == 0:
        return torch.empty((0,), dtype=torch.int64)
    return fx.cache.prefix_device_indices(req)


def allocate(fx, req) -> None:
    prefix = _prefix(fx, req)
    seq_len = len(req.full_untruncated_fill_ids)
    alloc_req_slots(fx.pool, [req], fx.cache)
    out = alloc_token_slots(fx.cache, seq_len - req.prefix_len)
    row = req.kv.req_pool_idx
    fx.pool.write((row, slice(0, req.prefix_len)), prefix.to(torch.int32))
    fx.pool.write((row, slice(req.prefix_len, seq_len)), out.to(torch.int32))
    req.kv.kv_allocated_len = seq_len
    req.kv.kv_committed_len = seq_len
    fx.cache.maybe_hand_to_session(req)


def start(fx, req) -> None:
    """match, admit and allocate: a request through one prefill admission."""
    match(fx, req)
    admit(fx, req)
    allocate(fx, req)


def run(fx, req, finish: bool = True) -> None:
    """The forward's and result processor's effect on the record: the track seqlen, the finish."""
    if fx.extra_buffer:
        req.kv.mamba_last_track_seqlen = req.kv.kv_committed_len
    if finish:
        req.finished_reason = FINISH_LENGTH(length=len(req.output_ids))


def step(fx, reqs) -> list:
    """A step of the batch of `reqs` through the wrapped `run_batch` (its write set checked,
    the step launched; the forward itself does not run) and `process_batch_result` (its
    fence): the batches that ran, [] where none did."""
    sched, ran, batch = SimpleNamespace(req_to_token_pool=fx.pool), [], SimpleNamespace(reqs=reqs)
    ScheduleBatch._collect_deferred_mamba_cow_and_clear(batch, reqs)
    if fx.extra_buffer:  # the track slot each request's step writes: where `prepare_for_extend` leaves
        # `mamba_last_track_idx` (the tree caches that slot at finish)
        batch.req_to_token_pool = fx.pool
        batch.req_pool_indices = torch.tensor([r.kv.req_pool_idx for r in reqs], dtype=torch.int64)
        kv = [r.kv for r in reqs]
        at = [k.mamba_last_track_idx if k.mamba_last_track_idx is not None else k.mamba_next_track_idx or 0 for k in kv]
        set_mamba_track_indices_from_reqs(batch, at)
    hooks.scheduler_run_batch(lambda self, b: ran.append(b))(sched, batch)
    hooks.scheduler_process_batch_result(lambda self, b, result: None)(sched, batch, None)
    return ran


def finish(fx, req) -> None:
    release_kv_cache(req, fx.cache, checkpoint=True)


def abort(fx, req) -> None:
    req.finished_reason = FINISH_ABORT()
    release_kv_cache(req, fx.cache, checkpoint=False)
