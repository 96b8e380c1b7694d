"""One request's steps, each made of the statements SGLang's scheduler runs for it, on real objects.

match: `Req.init_next_round_input(tree_cache)` (copy-on-write on, as the scheduler's default).
admit: what `PrefillAdder._commit_prefill_admission` does (the tree lock).
allocate: `alloc_for_extend`'s work for one request: `alloc_req_slots` (which may evict), the KV
tokens by `alloc_token_slots`, the row written by `write_cache_indices`' rule, the lengths, then
`tree_cache.maybe_hand_to_session`.
run: stands in for the forward and the result processor (output tokens, the track seqlen the
extra-buffer forward records, the finish reason). finish: `release_kv_cache(checkpoint=True)`
as `process_batch_result_*` calls it; release: `release_kv_cache(checkpoint=False)`, the
abort/retract path.
"""

from __future__ import annotations

import torch
from sglang.srt.managers.schedule_batch import FINISH_ABORT, FINISH_LENGTH
from sglang.srt.mem_cache.allocation import alloc_req_slots, alloc_token_slots
from sglang.srt.mem_cache.common import release_kv_cache


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


def finish(fx, req) -> None:
    release_kv_cache(req, fx.cache, checkpoint=True)


def abort(fx, req) -> None:
    req.finished_reason = FINISH_ABORT()
    release_kv_cache(req, fx.cache, checkpoint=False)
