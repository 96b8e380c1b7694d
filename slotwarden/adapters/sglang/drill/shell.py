"""Real Scheduler methods on a minimal scheduler shell: `_get_new_batch_prefill_raw`, `flush_cache`.

`shell(fx, waiting)` is `object.__new__(Scheduler)` with only the attributes those methods read:
the real pools and cache, a real SchedulePolicy ("fcfs") and an empty real ScheduleBatch as the
running batch; the rest (grammar manager, worker, metrics, counters) are inert values: no queued
grammar, no LoRA, no HiCache, no chunking, no disaggregation. `prefill_round` runs the method under
the pipeline-parallel micro-batch size the scheduler's __init__ would set. The prefill batch's
construction needs a model config, so `ScheduleBatch.init_new(...).prepare_for_extend()` is stood
in (only inside the call) by `_Extend`, which runs flow.allocate for each admitted request, as
alloc_for_extend does: everything up to and including the admission rollback and
alloc_group_end is SGLang's code. `flush_cache` runs whole, its idle check included.
"""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

from sglang.srt.disaggregation.utils import DisaggregationMode
from sglang.srt.managers import scheduler as scheduler_module
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.managers.schedule_policy import SchedulePolicy
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.runtime_context import get_parallel

from slotwarden.adapters.sglang.drill import flow


class _Extend(SimpleNamespace):
    """Stands in for the prefill ScheduleBatch: its prepare_for_extend allocates as alloc_for_extend."""

    @classmethod
    def init_new(cls, reqs, req_to_token_pool, token_to_kv_pool_allocator, tree_cache, *args, **kwargs):
        return cls(reqs=list(reqs), fx=SimpleNamespace(pool=req_to_token_pool, cache=tree_cache))

    def prepare_for_extend(self):
        for req in self.reqs:
            flow.allocate(self.fx, req)


def shell(fx, waiting, max_prefill_tokens: int = 64) -> Scheduler:
    """A Scheduler with only what _get_new_batch_prefill_raw reads."""
    s = object.__new__(Scheduler)
    s.waiting_queue = list(waiting)
    s.tree_cache, s.req_to_token_pool, s.token_to_kv_pool_allocator = fx.cache, fx.pool, fx.kv_allocator
    s.policy = SchedulePolicy("fcfs", fx.cache, False, False, False)
    s.running_batch = ScheduleBatch(reqs=[], batch_is_full=False)
    s.grammar_manager = SimpleNamespace(has_waiting_grammars=lambda: False, grammar_queue=[], clear=lambda: None)
    s.metrics_reporter = SimpleNamespace(reset_metrics=lambda: None, is_stats_logging_rank=False)
    s.dllm_manager = SimpleNamespace(any_staging_reqs=lambda: False)
    s.disaggregation_mode = DisaggregationMode.NULL
    s.beam_coordinator = SimpleNamespace(pending_member_rows=lambda batch: 0)
    s.tp_worker = SimpleNamespace(model_runner=SimpleNamespace(attn_backend=None, prefill_aware_swa=False))
    s.new_token_ratio_tracker = SimpleNamespace(current=0.5)
    s.load_inquirer = SimpleNamespace(_get_num_pending_tokens=lambda chunk_deduct=0: 0)
    s.page_size = fx.sizes.page
    s.max_prefill_tokens = max_prefill_tokens
    s.max_prefill_bs = s.max_running_requests = fx.sizes.rows
    s.processed_tokens_counter = s.priority_scheduling_preemption_threshold = 0
    s.chunked_req = s.chunked_prefill_size = s.dynamic_chunk_sizer = s.min_free_slots_delayer = None
    s.dllm_config = s.truncation_align_size = s.hisparse_coordinator = s.model_config = None
    s.enable_priority_preemption = s.is_hybrid_swa = s.enable_lora = s.is_mixed_chunk = False
    s.enable_hicache_storage = s.enable_lmcache = s.enable_overlap = s.enable_priority_scheduling = False
    s.enable_hierarchical_cache = s.enable_unified_cache_external_linker = False
    s.enable_hisparse = s._engine_paused = False
    s.spec_algorithm = s.last_batch = s.draft_worker = None
    return s


def prefill_round(fx, sched: Scheduler):
    """One call of the real method; returns (the batch it built or None, the running batch)."""
    with get_parallel().override(pp_max_micro_batch_size=fx.sizes.rows):
        with mock.patch.object(scheduler_module, "ScheduleBatch", _Extend):
            return Scheduler._get_new_batch_prefill_raw(sched, None, sched.running_batch)


def flush_cache(sched: Scheduler) -> bool:
    """The real Scheduler.flush_cache: when idle, tree reset, then the pools cleared."""
    return Scheduler.flush_cache(sched)


class FreeSpy:
    """Wraps a MambaSlotAllocator's free (instance attribute) to note each call's caller and slots."""

    def __init__(self, allocator):
        self.allocator, self.real, self.calls = allocator, allocator.free, []

    def __enter__(self):
        import sys

        def free(index):
            caller = sys._getframe(1).f_code.co_name
            self.calls.append((caller, [int(i) for i in index.reshape(-1).tolist()]))
            return self.real(index)

        self.allocator.free = free
        return self

    def __exit__(self, *exc):
        del self.allocator.free
