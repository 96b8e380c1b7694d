"""The wrappers of SGLang's methods: each says who moves a slot, or makes the move itself.

Every wrapper finds the pool's `GuardedSlots` (the `mamba_allocator` the adapter installed) and
does nothing more than call SGLang's own method when there is none (a model without Mamba
state, a unified-memory allocator). `HOOKS` maps "Class.method" to its wrapper factory; the
call-site table (sites.py) names every one of them.
"""

from __future__ import annotations

from slotwarden.model.step import legal_rule
from slotwarden.model.vocabulary import NOBODY, Actor, Event, State
from slotwarden.runtime.guarded_allocator import ANONYMOUS

from slotwarden.adapters.sglang import records
from slotwarden.adapters.sglang import who as W
from slotwarden.adapters.sglang.slots import GuardedSlots


def slots_of(pool) -> GuardedSlots | None:
    got = getattr(pool, "mamba_allocator", None) if pool is not None else None
    return got if isinstance(got, GuardedSlots) else None


def _attributed(site: str, pool_of, who_of):
    """A wrapper that runs the method with its allocator calls attributed as `who_of(args)`."""

    def make(orig):
        def wrapper(self, *args, **kwargs):
            if slots_of(pool_of(self)) is None:
                return orig(self, *args, **kwargs)
            with W.attributed(who_of(self, *args, **kwargs)):
                return orig(self, *args, **kwargs)

        return wrapper

    return make


def _acting(site: str, pool_of, actor_of, admit: bool = False):
    """Allocator calls made by `actor_of(args)` (nobody named: by the slot's holder)."""

    def who_of(self, *args, **kwargs):
        actor = actor_of(self, *args, **kwargs)
        return W.Who(W.Mode.ACTOR, actor, admit=admit, site=site) if actor is not None else W.HOLDER

    return _attributed(site, pool_of, who_of)


def _mode(site: str, pool_of, mode: W.Mode):
    """Allocator calls attributed by `mode` (the tree's, or passed through)."""
    who = W.Who(mode, site=site)
    return _attributed(site, pool_of, lambda self, *a, **k: who)


def _arg(name: str, at: int):
    def get(self, *args, **kwargs):
        return kwargs[name] if name in kwargs else args[at]

    return get


def _req_actor(name: str = "req", at: int = 0):
    get = _arg(name, at)
    return lambda self, *a, **k: W.request(get(self, *a, **k))


def _match_actor(self, params, *args, **kwargs):
    return W.request(params.req) if params.req is not None else None


_cache_pool = lambda self: self.cache.req_to_token_pool  # noqa: E731 - a component's, a session's
_tree_pool = lambda self: self.req_to_token_pool  # noqa: E731 - the radix cache's, the scheduler's


# -- HybridReqToTokenPool ---------------------------------------------------------------------
def pool_alloc(orig):
    def alloc(self, reqs, *args, **kwargs):
        slots = slots_of(self)
        if slots is None:
            return orig(self, reqs, *args, **kwargs)
        queue = []  # SGLang's loop: a state slot for each request without one, then its track slots
        for req in reqs:
            if not req.kv.holds_mamba:
                queue.append((W.request(req), 1))
            if getattr(self, "enable_mamba_extra_buffer", False) and req.kv.mamba_ping_pong_track_buffer is None:
                queue.append((W.request(req), self.mamba_initial_tracking_slots))
        with W.attributed(W.Who(W.Mode.QUEUE, queue=queue, site="HybridReqToTokenPool.alloc")):
            rows = orig(self, reqs, *args, **kwargs)
        if rows is not None:  # the batch is built: its requests' slots run from here
            for req in reqs:
                records.admit(slots, req.kv, W.request(req))
        return rows

    return alloc


def pool_free_mamba_cache(orig):
    def free_mamba_cache(self, req, *args, **kwargs):
        slots = slots_of(self)
        if slots is None:
            return orig(self, req, *args, **kwargs)
        given = slots.yielded.get(id(req.kv))  # an aborted turn's record, given up by its session
        actor = given[1] if given is not None else W.request(req)
        with W.attributed(W.Who(W.Mode.ACTOR, actor, site="HybridReqToTokenPool.free_mamba_cache")):
            out = orig(self, req, *args, **kwargs)
        if given is not None and not req.kv.holds_mamba:
            slots.yielded.pop(id(req.kv), None)
        return out

    return free_mamba_cache


# -- UnifiedRadixCache ------------------------------------------------------------------------
def _mamba_type(cache):
    """The tree's component type of Mamba state (read once per cache)."""
    kind = cache.__dict__.get("_slotwarden_mamba", False)
    if kind is False:
        kind = next((k for k, c in cache.components.items() if type(c).__name__ == "MambaComponent"), None)
        cache.__dict__["_slotwarden_mamba"] = kind
    return kind


def _tree_slots(cache) -> GuardedSlots | None:
    """The pool's guarded slots, when the tree's Mamba values are its slot ids (not int8
    checkpoints, which live in another index space)."""
    slots = slots_of(cache.req_to_token_pool)
    if slots is None or getattr(cache.req_to_token_pool, "mamba_ckpt_pool", None) is not None:
        return None
    return slots


def _node_slot(cache, node_id) -> int | None:
    kind = _mamba_type(cache)
    if kind is None:
        return None
    value = cache.tree_core.get_component_device_value(node_id, kind)
    return None if value is None else int(value.reshape(-1)[0])  # a device sync: once per tree move


def _donor(slots, slot: int) -> Actor:
    """Who donates `slot` to the tree: the acting request, else the request that owns it."""
    who = W.WHO.get()
    if who.mode is W.Mode.ACTOR:
        return who.actor
    owner = slots.ledger.record(slot).owner
    return Actor.request(owner if owner != NOBODY else ANONYMOUS)


def cache_insert(orig):
    """INSERT, checked before the tree walks (a refusal leaves the tree as it was) and made
    only if the tree took the state. A slot its request took and never ran is admitted first:
    a donated state was written by a step."""

    def insert(self, params, *args, **kwargs):
        slots = _tree_slots(self)
        value = getattr(params, "mamba_value", None)
        if slots is None or value is None:
            return orig(self, params, *args, **kwargs)
        slot = int(value.reshape(-1)[0])  # a device sync: once per insert
        donor, rec = _donor(slots, slot), slots.ledger.record(slot)
        admit = rec.state is State.TAKEN and rec.owner == donor.id
        if not admit:
            legal_rule(rec, Event.INSERT, donor, 0, slots.ledger.lifecycle, slot_id=slot)
        result = orig(self, params, *args, **kwargs)
        node = result.last_device_node
        if isinstance(node, int) and _node_slot(self, node) == slot:
            if admit:
                slots.fire(Event.ADMIT, [slot], donor)
            slots.fire(Event.INSERT, [slot], donor, node)
            if not slots.done:  # no step in flight: the write is finished, publish it
                slots.fence()
        return result

    return insert


def cache_lock(orig):
    def lock(self, node_id, *args, **kwargs):
        got = orig(self, node_id, *args, **kwargs)
        slots = _tree_slots(self)
        if slots is None or got is None:
            return got
        skip = kwargs.get("skip_lock_components", args[0] if args else ())
        if _mamba_type(self) not in tuple(skip):
            slots.lock(got, _node_slot(self, node_id))
        return got

    return lock


def cache_unlock(orig):
    def unlock(self, lock, *args, **kwargs):
        slots = _tree_slots(self)
        if slots is not None and lock is not None:
            slots.unlock(lock)
        return orig(self, lock, *args, **kwargs)

    return unlock


# -- StreamingSession -------------------------------------------------------------------------
def _streaming(req) -> bool:
    return req is not None and getattr(req, "session", None) is not None and req.session.streaming


def session_take(orig):
    def take(self, req, *args, **kwargs):
        slots = slots_of(self.cache.req_to_token_pool)
        fresh = slots is not None and _streaming(req) and self.borrowed_slot(req) is None
        out = orig(self, req, *args, **kwargs)
        record = self.slots.get(req.session.session_id) if fresh else None
        if record is not None and record.kv is req.kv:  # the session took the first turn's record
            turn, owner = W.request(req), W.session(record)
            records.admit(slots, req.kv, turn)
            if req.kv.holds_mamba:  # its state slot; the track slots stay the turn's (records.py)
                ids = [int(req.kv.mamba_pool_idx)]
                slots.fire(Event.PARK, ids, turn, owner.id)
                slots.fire(Event.LEND, ids, owner, turn.id)
                slots.fire(Event.ADMIT, ids, turn)
        return out

    return take


def session_try_match_prefix(orig):
    def try_match_prefix(self, params, *args, **kwargs):
        out = orig(self, params, *args, **kwargs)
        slots = slots_of(self.cache.req_to_token_pool)
        record = self.borrowed_slot(params.req) if out is not None and slots is not None else None
        if record is not None:
            turn = W.request(params.req)
            ids = [s for s in records.slot_ids(record.kv) if slots.ledger.record(s).borrower != turn.id]
            if ids:  # a turn that matches again after a rollback borrows already
                slots.fire(Event.LEND, ids, W.session(record), turn.id)
        return out

    return try_match_prefix


def session_try_cache_finished_req(orig):
    def try_cache_finished_req(self, req, *args, **kwargs):
        slots = slots_of(self.cache.req_to_token_pool)
        record = self.borrowed_slot(req) if slots is not None else None
        ids = records.slot_ids(record.kv) if record is not None else []
        kept = orig(self, req, *args, **kwargs)
        if record is not None:
            turn = W.request(req)
            records.give_back(slots, ids, turn, None if kept else Event.ABORT, W.session(record))
            if not kept:  # the session gives the record up: the turn's release closes it
                slots.yielded[id(record.kv)] = (record.kv, W.session(record))
        return kept

    return try_cache_finished_req


# -- ScheduleBatch (lazy extra buffers) -------------------------------------------------------
def _lazy_boundary(site: str, due):
    """A lazy track boundary's allocs, in SGLang's loop order: one slot for each request that
    `due` (SGLang's own test) puts at a boundary and whose other track entry is empty, admitted
    at once (the request runs). The tests read host values only: no device sync."""

    def make(orig):
        def wrapper(self, *args, **kwargs):
            if slots_of(getattr(self, "req_to_token_pool", None)) is None:
                return orig(self, *args, **kwargs)
            queue = [
                (W.request(req), 1)
                for i, req in enumerate(self.reqs)
                if req.kv.mamba_ping_pong_empty[1 - req.kv.mamba_next_track_idx] and due(orig, self, i, *args, **kwargs)
            ]
            with W.attributed(W.Who(W.Mode.QUEUE, queue=queue, admit=True, site=site)):
                return orig(self, *args, **kwargs)

        return wrapper

    return make


def _at_boundary(orig, batch, i, mamba_track_interval, *args, **kwargs) -> bool:
    return int(batch.seq_lens_cpu[i]) % mamba_track_interval == 0


def _spec_in_window(orig, batch, i, mamba_track_interval, max_draft_tokens, *args, **kwargs) -> bool:
    in_window = orig.__globals__["mamba_lazy_spec_in_window"]  # the function SGLang's loop calls
    return bool(in_window(batch.reqs[i], mamba_track_interval, max_draft_tokens))


def _lazy_swap(site: str):
    """A lazy boundary's free of the record's old track slot (`SWAP`: a session's lent slot goes
    back to the session, which releases it). The pool is the batch's (the processor's own
    methods take the request and its batch)."""

    def make(orig):
        def wrapper(self, req, batch, *args, **kwargs):
            if slots_of(getattr(batch, "req_to_token_pool", None)) is None:
                return orig(self, req, batch, *args, **kwargs)
            with W.attributed(W.Who(W.Mode.SWAP, site=site)):
                return orig(self, req, batch, *args, **kwargs)

        return wrapper

    return make


def component_prepare_for_caching_req(orig):
    """Attributed to the `Req` (its slots admitted); a checkpoint of a running request without
    extra buffers or int8 checkpoints copies its state into the new slot the tree gets."""
    site = _ACT + "prepare_for_caching_req"
    attributed = _acting(site, _cache_pool, _req_actor(), admit=True)(orig)
    req_of, params_of, finished_of = _arg("req", 0), _arg("insert_params", 1), _arg("is_finished", 3)

    def prepare(self, *args, **kwargs):
        out = attributed(self, *args, **kwargs)
        slots = slots_of(_cache_pool(self))
        value = getattr(params_of(self, *args, **kwargs), "mamba_value", None)
        plain = not self.cache.enable_mamba_extra_buffer and getattr(self, "int8_ckpt_pool", None) is None
        if slots is not None and value is not None and plain and not finished_of(self, *args, **kwargs):
            slots.copied(value.view(-1), req_of(self, *args, **kwargs).kv.mamba_pool_idx.view(-1))
        return out

    return prepare


def component_adopt_loaded_state(orig):
    def adopt(self, req, *args, **kwargs):
        out = orig(self, req, *args, **kwargs)
        slots = slots_of(_cache_pool(self))
        if slots is not None and req.kv.mamba_pool_idx is not None:
            slots.copied(req.kv.mamba_pool_idx.view(-1))  # from the host pool
        return out

    return adopt


# -- Scheduler --------------------------------------------------------------------------------
def scheduler_run_batch(orig):
    def run_batch(self, batch, *args, **kwargs):
        slots = slots_of(getattr(self, "req_to_token_pool", None))
        if slots is not None:
            slots.filled(batch, getattr(self.req_to_token_pool, "mamba_ckpt_pool", None) is not None)
            slots.check_batch(getattr(batch, "reqs", None) or ())  # its write set first: a refused step does not run
            slots.tracked(batch)
            batch._slotwarden_step = slots.launch()
        return orig(self, batch, *args, **kwargs)

    return run_batch


def scheduler_process_batch_result(orig):
    def process_batch_result(self, batch, *args, **kwargs):
        out = orig(self, batch, *args, **kwargs)
        slots = slots_of(getattr(self, "req_to_token_pool", None))
        if slots is not None:
            slots.fence(getattr(batch, "_slotwarden_step", None))
        return out

    return process_batch_result


def scheduler_on_idle(orig):
    def on_idle(self, *args, **kwargs):
        slots = slots_of(getattr(self, "req_to_token_pool", None))
        if slots is not None:
            slots.fence(None)
        return orig(self, *args, **kwargs)

    return on_idle


_ACT = "MambaComponent."
HOOKS = {
    "HybridReqToTokenPool.alloc": pool_alloc,
    "HybridReqToTokenPool.free_mamba_cache": pool_free_mamba_cache,
    _ACT + "finalize_match_result_in_cache": _acting(
        _ACT + "finalize_match_result_in_cache", _cache_pool, _match_actor
    ),
    _ACT + "prepare_for_caching_req": component_prepare_for_caching_req,
    _ACT + "cleanup_after_caching_req": _acting(_ACT + "cleanup_after_caching_req", _cache_pool, _req_actor()),
    _ACT + "apply_component_action": _mode(_ACT + "apply_component_action", _cache_pool, W.Mode.TREE),
    _ACT + "_alloc_request_state_slot": _mode(_ACT + "_alloc_request_state_slot", _cache_pool, W.Mode.PASS),
    _ACT + "_adopt_loaded_state": component_adopt_loaded_state,
    _ACT + "finalize_load_back": _mode(_ACT + "finalize_load_back", _cache_pool, W.Mode.PASS),
    _ACT + "update_external_linker_load": _mode(_ACT + "update_external_linker_load", _cache_pool, W.Mode.PASS),
    _ACT + "build_external_linker_transfer": _mode(_ACT + "build_external_linker_transfer", _cache_pool, W.Mode.PASS),
    "UnifiedRadixCache.checkpoint_into_tree": _acting(
        "UnifiedRadixCache.checkpoint_into_tree", _tree_pool, _req_actor()
    ),
    "UnifiedRadixCache.insert": cache_insert,
    "UnifiedRadixCache.lock": cache_lock,
    "UnifiedRadixCache.unlock": cache_unlock,
    "StreamingSession.take": session_take,
    "StreamingSession.try_match_prefix": session_try_match_prefix,
    "StreamingSession.try_cache_finished_req": session_try_cache_finished_req,
    "StreamingSession._free_slot_mamba": _acting(
        "StreamingSession._free_slot_mamba", _cache_pool, lambda self, slot, *a, **k: W.session(slot)
    ),
    "ScheduleBatch.mamba_lazy_prealloc_at_boundary": _lazy_boundary(
        "ScheduleBatch.mamba_lazy_prealloc_at_boundary", _at_boundary
    ),
    "ScheduleBatch.mamba_lazy_spec_prepare": _lazy_boundary("ScheduleBatch.mamba_lazy_spec_prepare", _spec_in_window),
    "SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary": _lazy_swap(
        "SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary"
    ),
    "SchedulerBatchResultProcessor._mamba_lazy_spec_update": _lazy_swap(
        "SchedulerBatchResultProcessor._mamba_lazy_spec_update"
    ),
    "Scheduler.run_batch": scheduler_run_batch,
    "Scheduler.process_batch_result": scheduler_process_batch_result,
    "Scheduler.on_idle": scheduler_on_idle,
}
