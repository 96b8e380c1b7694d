"""Tiny real SGLang 0.5.23 objects on CPU: the pools, the radix cache, its session, requests.

`build(extra_buffer=...)` makes one `Fixture`: HybridReqToTokenPool (its MambaPool and
MambaSlotAllocator), a HybridLinearKVPool with its TokenToKVPoolAllocator, and a
UnifiedRadixCache forced onto the Python tree core (so MambaComponent's Python hooks run), with
its MambaComponent and StreamingSession. `make_req` gives each Req its own rid (SGLang's own tests
give every Req rid=0). Written after SGLang's kit `sglang/test/kits/unified_radix_cache/fixtures.py`.
Import only after `stubs.install()` (tests/adapters/sglang's conftest and verify's job do it).
"""

from __future__ import annotations

import itertools
from array import array
from dataclasses import dataclass
from types import SimpleNamespace

import torch
from sglang.kernels.ops.attention.fla.chunk_delta_h import CHUNK_SIZE as FLA_CHUNK_SIZE
from sglang.srt.configs.mamba_utils import Mamba2CacheParams, Mamba2StateShape
from sglang.srt.environ import envs
from sglang.srt.managers.schedule_batch import Req
from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.memory_pool import HybridLinearKVPool, HybridReqToTokenPool
from sglang.srt.mem_cache.unified_cache.components.base import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
from sglang.srt.sampling.sampling_params import SamplingParams
from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

NUM_LAYERS = 4
FULL_LAYERS = (3,)
MAMBA_LAYERS = [i for i in range(NUM_LAYERS) if i not in FULL_LAYERS]


@dataclass(frozen=True)
class Sizes:
    """The pool sizes; small so a leak shows in a count."""

    mamba_slots: int = 6
    rows: int = 4
    kv_tokens: int = 128
    context: int = 64
    page: int = 1


@dataclass
class Fixture:
    """One set of real SGLang objects wired as the scheduler wires them."""

    pool: HybridReqToTokenPool
    kv_allocator: TokenToKVPoolAllocator
    cache: UnifiedRadixCache
    sizes: Sizes
    extra_buffer: bool

    @property
    def mamba_allocator(self):
        return self.pool.mamba_allocator

    @property
    def mamba(self):
        return self.cache.components[ComponentType.MAMBA]

    @property
    def session(self):
        return self.cache.session

    def mamba_free(self) -> int:
        return self.pool.mamba_allocator.available_size()

    def kv_free(self) -> int:
        return self.kv_allocator.available_size()


def _server_args(sizes: Sizes, extra_buffer: bool) -> ServerArgs:
    args = ServerArgs(model_path="dummy", page_size=sizes.page)
    # the dummy model has no HF config to read the chunk size from
    args._mamba_cache_chunk_size = max(FLA_CHUNK_SIZE, sizes.page)
    return args


def build(extra_buffer: bool = False, sizes: Sizes = Sizes(), backend: str = "python", lazy: bool = False) -> Fixture:
    """Fresh pools and cache on the tree core `backend` ("python", or SGLang's default "rust");
    `lazy`: extra buffers in lazy mode (one track slot a request, a second one at each boundary)."""
    set_global_server_args_for_scheduler(_server_args(sizes, extra_buffer))
    with envs.SGLANG_MAMBA_SSM_DTYPE.override("bfloat16"):
        shape = Mamba2StateShape.create(
            tp_world_size=1,
            intermediate_size=32,
            n_groups=1,
            num_heads=2,
            head_dim=8,
            state_size=4,
            conv_kernel=4,
        )
        params = Mamba2CacheParams(shape=shape, layers=MAMBA_LAYERS)
    pool = HybridReqToTokenPool(
        size=sizes.rows,
        mamba_size=sizes.mamba_slots,
        mamba_spec_state_size=sizes.rows,
        max_context_len=sizes.context,
        device="cpu",
        enable_memory_saver=False,
        cache_params=params,
        mamba_layer_ids=MAMBA_LAYERS,
        enable_mamba_extra_buffer=extra_buffer,
        enable_mamba_extra_buffer_lazy=lazy,
        speculative_num_draft_tokens=3,
    )
    kv_pool = HybridLinearKVPool(
        size=sizes.kv_tokens,
        dtype=torch.bfloat16,
        page_size=sizes.page,
        head_num=1,
        head_dim=8,
        full_attention_layer_ids=list(FULL_LAYERS),
        device="cpu",
        enable_memory_saver=False,
        mamba_pool=pool.mamba_pool,
    )
    kv_allocator = TokenToKVPoolAllocator(
        size=sizes.kv_tokens, dtype=torch.bfloat16, device="cpu", kvcache=kv_pool, need_sort=False
    )
    init = CacheInitParams(
        req_to_token_pool=pool,
        token_to_kv_pool_allocator=kv_allocator,
        page_size=sizes.page,
        disable=False,
        tree_components=(ComponentType.FULL, ComponentType.MAMBA),
        enable_mamba_extra_buffer=extra_buffer,
        eviction_policy="lru",
    )
    with envs.SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND.override(backend):
        cache = UnifiedRadixCache(params=init)
    assert cache._tree_core_backend == backend, cache._tree_core_backend
    return Fixture(pool, kv_allocator, cache, sizes, extra_buffer)


_rids = itertools.count(1)


def make_req(tokens, session=None, max_new_tokens: int = 1) -> Req:
    """A real Req with a distinct rid and its fill ids ready, as the tokenizer manager sends it."""
    req = Req(
        rid=f"req-{next(_rids)}",
        origin_input_text="",
        origin_input_ids=array("q", tokens),
        sampling_params=SamplingParams(temperature=0, max_new_tokens=max_new_tokens),
    )
    req.session = session
    req.extra_key = None
    req.output_ids = array("q")
    req.refresh_fill_ids()
    return req


def make_session(session_id: str) -> SimpleNamespace:
    """The parts of session_controller.Session that StreamingSession reads."""
    return SimpleNamespace(session_id=session_id, streaming=True, finish_req=lambda req: None, abort_req=lambda: None)
