"""The table of SGLang's Mamba call sites: each mapped to the moves it makes, or left unguarded
with the reason. docs/sglang.md shows it (`slotwarden docs` writes it there); a test scans
SGLang's source (`scan`) and fails on a call site missing from the table or on a `hook` that
`hooks.HOOKS` does not wrap.

`how` is one of: `hook` (the method is wrapped, `hook` names the wrapper), `inside` (the call
runs inside a wrapped method, `hook` names it), `holder` (not wrapped: a free acts as the
request that uses the slot, as the lifecycle's free rule reads it), `trusted` (an alloc owned
by the anonymous request; its free acts as that owner: state errors still raise) and
`unguarded` (passes through: another index space or a path the adapter does not model).
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
from typing import NamedTuple

CALLS = ("alloc", "free", "alloc_group_begin", "alloc_group_end", "clear")


class Site(NamedTuple):
    file: str  # under sglang/srt/
    function: str  # Class.method, or a module function
    how: str
    moves: str  # the lifecycle moves, with their actor, or why it is unguarded
    hook: str = ""


_MP, _MC, _SB = "mem_cache/memory_pool.py", "mem_cache/unified_cache/components/mamba.py", "managers/schedule_batch.py"
_BR, _LM = (
    "managers/scheduler_components/batch_result_processor.py",
    "mem_cache/storage/lmcache/lmcache_unified_radix_cache.py",
)
_LAZY = "lazy extra buffers: a boundary's old track slot, freed by the Req that holds it"
_LMC = "LMCache external loads: their own slot flow, not modelled"
_HA = "mem_cache/hybrid_cache/hybrid_pool_assembler.py"
_HIC = (
    "HiCache's host pool takes the (guarded) allocator's alloc and free as callbacks: its load-back "
    "allocs are owned by the anonymous request, freed by their holder"
)

SITES = (
    Site(
        _MP,
        "HybridReqToTokenPool.alloc",
        "hook",
        "ALLOC by each Req in SGLang's loop order, then ADMIT of the batch's slots (TAKEN, or LENT by its session)",
        "HybridReqToTokenPool.alloc",
    ),
    Site(
        _MP,
        "HybridReqToTokenPool._alloc_ping_pong_buffer",
        "inside",
        "ALLOC of the track slots by the Req",
        "HybridReqToTokenPool.alloc",
    ),
    Site(
        _MP,
        "HybridReqToTokenPool.free_mamba_cache",
        "hook",
        "a free by the Req: ROLLBACK (TAKEN) or FINISH "
        "(RUNNING), fenced; CLOSE by the session for a record an aborted turn's session gave up",
        "HybridReqToTokenPool.free_mamba_cache",
    ),
    Site(
        _MP,
        "HybridReqToTokenPool.clear",
        "hook",
        "flush: refused while a request uses a slot; else UNLOCK, "
        "EVICT, CLOSE and FENCE of every slot, then the engine's clear",
        "HybridReqToTokenPool.mamba_allocator",
    ),
    Site(
        _MC,
        "MambaComponent.finalize_match_result_in_cache",
        "hook",
        "copy-on-write: ALLOC by the matching Req (its eviction retry: EVICT by the tree)",
        "MambaComponent.finalize_match_result_in_cache",
    ),
    Site(
        _MC,
        "MambaComponent._alloc_mamba_slot",
        "inside",
        "ALLOC + ADMIT by the running Req (a checkpoint copy, a new track slot)",
        "MambaComponent.prepare_for_caching_req",
    ),
    Site(
        _MC,
        "MambaComponent.prepare_for_caching_req",
        "hook",
        "ALLOC + ADMIT by the Req; int8 mode: FINISH of the donated track slot",
        "MambaComponent.prepare_for_caching_req",
    ),
    Site(
        _MC,
        "MambaComponent._free_mamba_value",
        "inside",
        "EVICT by the owning node (from apply_component_action); "
        "a free by the Req of an unused copy (from cleanup_after_caching_req)",
        "MambaComponent.apply_component_action",
    ),
    Site(
        _MC,
        "MambaComponent.cleanup_after_caching_req",
        "hook",
        "a free by the Req of what the tree did not take",
        "MambaComponent.cleanup_after_caching_req",
    ),
    Site(
        _MC,
        "MambaComponent.apply_component_action",
        "hook",
        "EVICT of each slot by the node that owns it; refused for a slot a tree lock holds",
        "MambaComponent.apply_component_action",
    ),
    Site(
        _MC,
        "MambaComponent.update_external_linker_load",
        "unguarded",
        "external cache linker (storage offload)",
        "MambaComponent.update_external_linker_load",
    ),
    Site(
        _MC,
        "MambaComponent.build_external_linker_transfer",
        "unguarded",
        "external cache linker",
        "MambaComponent.build_external_linker_transfer",
    ),
    Site(
        _MC,
        "MambaComponent._alloc_request_state_slot",
        "unguarded",
        "HiCache load-back (CPU offload)",
        "MambaComponent._alloc_request_state_slot",
    ),
    Site(
        _MC,
        "MambaComponent._adopt_loaded_state",
        "hook",
        "a load-back's state copied into the Req's slot: filled, for the step check's first read",
        "MambaComponent._adopt_loaded_state",
    ),
    Site(
        _MC,
        "MambaComponent.finalize_load_back",
        "unguarded",
        "HiCache load-back (CPU offload)",
        "MambaComponent.finalize_load_back",
    ),
    Site(
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache.checkpoint_into_tree",
        "hook",
        "INSERT by the Req",
        "UnifiedRadixCache.checkpoint_into_tree",
    ),
    Site(
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache.insert",
        "hook",
        "INSERT of the donated slot into "
        "the node the tree put it on (only if the tree took it), published by the step's FENCE",
        "UnifiedRadixCache.insert",
    ),
    Site(
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache.lock",
        "hook",
        "LOCK of the node's slot by the lock (a slot not yet published is locked at its FENCE)",
        "UnifiedRadixCache.lock",
    ),
    Site(
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache.unlock",
        "hook",
        "UNLOCK by the lock",
        "UnifiedRadixCache.unlock",
    ),
    Site(
        "session/streaming_session.py",
        "StreamingSession.take",
        "hook",
        "first turn: ADMIT, its state slot PARK to the session, LEND back to the turn, ADMIT (its track "
        "slots stay its own)",
        "StreamingSession.take",
    ),
    Site(
        "session/streaming_session.py",
        "StreamingSession.try_match_prefix",
        "hook",
        "a later turn: LEND by the session (nothing when it borrows already)",
        "StreamingSession.try_match_prefix",
    ),
    Site(
        "session/streaming_session.py",
        "StreamingSession.try_cache_finished_req",
        "hook",
        "the turn gives the "
        "record back: FINISH (running) or ROLLBACK (lent), a first turn's own track slots PARK; an aborted "
        "turn: ABORT (its own slots PARK), then its release is the session's CLOSE",
        "StreamingSession.try_cache_finished_req",
    ),
    Site(
        "session/streaming_session.py",
        "StreamingSession._free_slot_mamba",
        "hook",
        "CLOSE by the session",
        "StreamingSession._free_slot_mamba",
    ),
    Site(
        "managers/scheduler.py",
        "Scheduler._get_new_batch_prefill_raw",
        "holder",
        "the prefill rollback: a free by "
        "the Req that uses the slot (a session's lent slot: refused); the alloc group passes through",
    ),
    Site(
        "managers/scheduler.py",
        "Scheduler.run_batch",
        "hook",
        "a step launched: releases wait for its FENCE",
        "Scheduler.run_batch",
    ),
    Site(
        "managers/scheduler.py",
        "Scheduler.process_batch_result",
        "hook",
        "FENCE of the batch's step",
        "Scheduler.process_batch_result",
    ),
    Site("managers/scheduler.py", "Scheduler.on_idle", "hook", "FENCE of every step", "Scheduler.on_idle"),
    Site(
        "mem_cache/common.py",
        "release_kv_cache",
        "holder",
        "a copy-on-write slot of a Req without a KV row: a free by the Req that holds it",
    ),
    Site(
        _SB,
        "ScheduleBatch.mamba_lazy_prealloc_at_boundary",
        "hook",
        "lazy extra buffers: ALLOC + ADMIT of a boundary's track slot by each Req at a boundary",
        "ScheduleBatch.mamba_lazy_prealloc_at_boundary",
    ),
    Site(_SB, "ScheduleBatch.mamba_lazy_undo_prealloc_at_boundary", "holder", _LAZY),
    Site(
        _SB,
        "ScheduleBatch.mamba_lazy_spec_prepare",
        "hook",
        "lazy extra buffers: ALLOC + ADMIT of the pending track slot by each Req a crossing may reach",
        "ScheduleBatch.mamba_lazy_spec_prepare",
    ),
    Site(
        _BR,
        "SchedulerBatchResultProcessor._mamba_lazy_spec_update",
        "hook",
        _LAZY + "; a session's lent one goes back to the session (FINISH), which releases it (CLOSE)",
        "SchedulerBatchResultProcessor._mamba_lazy_spec_update",
    ),
    Site(
        _BR,
        "SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary",
        "hook",
        _LAZY + "; a session's lent one goes back to the session (FINISH), which releases it (CLOSE)",
        "SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary",
    ),
    Site(
        "disaggregation/decode.py",
        "HybridMambaDecodeReqToTokenPool.clear",
        "unguarded",
        "PD disaggregation's decode pool: its own allocator, not wrapped",
    ),
    Site(
        "mem_cache/allocator/unified_mamba.py",
        "UnifiedMambaTokenToKVPoolAllocator.clear",
        "unguarded",
        "unified memory: its allocator (virtual ids) is not wrapped",
    ),
    Site(
        "mem_cache/allocator/unified_hybrid_swa.py",
        "UnifiedMambaSWATokenToKVPoolAllocator.clear",
        "unguarded",
        "unified memory: its allocator is not wrapped",
    ),
    Site(_HA, "build_hybrid_mamba_stack", "trusted", _HIC),
    Site(_HA, "build_hybrid_mamba_swa_stack", "trusted", _HIC),
    Site(_LM, "LMCacheUnifiedRadixCache.reset", "unguarded", _LMC),
    Site(_LM, "LMCacheUnifiedRadixCache._start_external_load", "unguarded", _LMC),
    Site(_LM, "LMCacheUnifiedRadixCache._finish_failed_load", "unguarded", _LMC),
    Site(_LM, "LMCacheUnifiedRadixCache._finalize_retired_flow", "unguarded", _LMC),
    Site(_LM, "LMCacheUnifiedRadixCache._publish_external_loaded_prefix", "unguarded", _LMC),
)


def sglang_root() -> pathlib.Path | None:
    spec = importlib.util.find_spec("sglang")
    return None if spec is None or spec.origin is None else pathlib.Path(spec.origin).parent / "srt"


def scan(root: pathlib.Path) -> dict[tuple[str, str], list[str]]:
    """Every function of SGLang's source under `root` that calls `mamba_allocator.<call>(...)`
    or takes it as a callback: (file, Class.method) -> ["free:1831", ...]."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text) if "mamba_allocator" in text else None
        except (SyntaxError, UnicodeDecodeError):
            continue
        if tree is None:
            continue
        _Scan(str(path.relative_to(root)), found).visit(tree)
    return found


class _Scan(ast.NodeVisitor):
    def __init__(self, file: str, found: dict):
        self.file, self.found, self.stack = file, found, []

    def _scoped(self, node):
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Attribute(self, node):
        """`mamba_allocator.<call>`, called or captured as a bound method (a callback)."""
        if node.attr in CALLS:
            base = node.value
            name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            if name == "mamba_allocator":
                self.found.setdefault((self.file, ".".join(self.stack)), []).append(f"{node.attr}:{node.lineno}")
        self.generic_visit(node)


def markdown() -> str:
    """The table, as docs/sglang.md shows it."""
    rows = ["| SGLang call site (`sglang/srt/`) | how | moves, or why unguarded |", "|---|---|---|"]
    rows += [f"| `{s.file}` `{s.function}` | {s.how} | {s.moves} |" for s in SITES]
    return "\n".join(rows) + "\n"
