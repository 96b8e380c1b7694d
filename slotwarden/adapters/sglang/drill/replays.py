"""SGLang's historical Mamba slot bugs, replayed bare on its real 0.5.23 objects.

Each replay sets up a legal state through SGLang's own methods, then runs the one buggy statement
(the form it had before its fix) and returns what the allocator shows afterwards, so a test can
see the bug happen bare. The adapter's tests run the same replays with the guard on.
- lent_slot_rollback: PR 21404's admission rollback, which freed every rejected request's slot,
  a later session turn's lent slot included (PR 23327 added the `not req.session` guard). In
  21404's layout the request's index was its own field, so the session's record kept the slot.
- sentinel_free: freeing a whole ping-pong track row, its emptied (-1) entry included, instead
  of the non-empty entries only (free_mamba_cache's `positions` rule).
- double_free: a request's copy-on-write slot released by release_kv_cache, then freed again
  through a stale copy of its index.
"""

from __future__ import annotations

from sglang.srt.mem_cache.common import release_kv_cache

from slotwarden.adapters.sglang.drill import flow
from slotwarden.adapters.sglang.drill.objects import make_req, make_session
from slotwarden.adapters.sglang.drill.scenarios import LONGER, PROMPT


def _free_list(fx) -> list[int]:
    return [int(i) for i in fx.mamba_allocator.free_slots.tolist()]


def lent_slot_rollback(fx) -> dict:
    """A later turn borrows the session's slot, is rejected at admission, and the slot is freed."""
    sess = make_session("s")
    first = make_req(PROMPT, session=sess)
    flow.start(fx, first)
    flow.run(fx, first)
    flow.finish(fx, first)
    slot = fx.session.slots["s"]
    later = make_req(LONGER, session=sess)
    flow.match(fx, later)  # try_match_prefix: later.kv is slot.kv
    lent = int(later.kv.mamba_pool_idx)
    # _get_new_batch_prefill_raw's rollback before PR 23327: no session guard
    fx.mamba_allocator.free(later.kv.mamba_pool_idx.unsqueeze(-1))
    seen = {
        "lent": lent,
        "in_free_list": lent in _free_list(fx),
        "session_still_holds": int(slot.kv.mamba_pool_idx) == lent,
    }
    fx.cache.release_session("s")  # the session frees its slot: the second free of `lent`
    seen["free_after_release"] = fx.mamba_free()
    seen["copies_in_free_list"] = _free_list(fx).count(lent)
    return seen


def sentinel_free(fx) -> dict:
    """Extra-buffer mode: a track entry emptied to -1, then the whole row freed."""
    assert fx.extra_buffer, "the track buffer exists in extra-buffer mode only"
    req = make_req(PROMPT)
    flow.start(fx, req)
    buffer = req.kv.mamba_ping_pong_track_buffer
    other = int(buffer[1])
    fx.mamba_allocator.free(buffer[1:2].clone())  # its owner gives the second entry back ...
    fx.pool.set_mamba_ping_pong_slot(req, 1, -1)  # ... and empties it, as the lazy boundary does
    # the bug: the row freed whole, the -1 entry included
    fx.mamba_allocator.free(fx.pool.req_index_to_mamba_ping_pong_track_buffer_mapping[req.kv.req_pool_idx])
    return {"emptied": other, "minus_one_in_free_list": -1 in _free_list(fx), "free": fx.mamba_free()}


def double_free(fx) -> dict:
    """A copy-on-write slot released by release_kv_cache (no KV row yet), then freed again."""
    seed = make_req(PROMPT)
    flow.start(fx, seed)
    flow.run(fx, seed)
    flow.finish(fx, seed)
    req = make_req(LONGER)
    flow.match(fx, req)  # copy-on-write: a fresh slot, no KV row
    stale = req.kv.mamba_pool_idx.clone()
    req.finished_reason = None
    release_kv_cache(req, fx.cache, checkpoint=False)  # common.py: frees the early slot
    fx.mamba_allocator.free(stale.unsqueeze(-1))  # the second free
    return {"slot": int(stale), "copies_in_free_list": _free_list(fx).count(int(stale)), "free": fx.mamba_free()}
