"""The contenders of `slotwarden bench pool`: one alloc+free round trip of n slots each.

- ``sglang``: SGLang's real ``MambaSlotAllocator`` (loaded from its own module file, not copied):
  a device tensor free list, ``alloc`` slices it, ``free`` does ``torch.cat``.
- ``pylist``: a Python free list keyed by request id, as TensorRT-LLM and LMDeploy keep theirs.
- ``strict`` / ``off``: our `SlotLedger` with ``check="strict"`` / ``check="off"``: alloc, then
  ROLLBACK (a candidate that takes its slots and gives them back: the counterpart of alloc+free).
- ``lifecycle``: the strict ledger's full request round trip: alloc, ADMIT, FINISH, launch, fence.
- ``scattered``: ``strict`` on a ledger whose free ring was shuffled once (seeded): its allocs hand
  out scattered ids, never runs of consecutive slots.
- ``guarded``: `GuardedAllocator` (SGLang's allocator API on the strict ledger) around a second
  SGLang allocator: alloc, free, as an engine that swaps it in would call them (needs sglang).

Each comes twice: bookkeeping alone, and zeroing the state it hands out (the pool in `alloc`, the
baselines with the very same `zero_slots` call after theirs)."""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import os
from typing import Callable

import numpy as np
import torch

from slotwarden.kernels.slots import zero_slots
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.guarded_allocator import GuardedAllocator, acting
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.pool import StatePool

SGLANG_VERSION = "0.5.23"
SGLANG_MODULE = ("srt", "mem_cache", "allocator", "mamba.py")
INSTALL_HINT = f"pip install --no-deps sglang=={SGLANG_VERSION}"


CONTENDERS = ("sglang", "pylist", "strict", "off", "lifecycle", "scattered", "guarded")
LABELS = {
    "sglang": "SGLang MambaSlotAllocator",
    "pylist": "Python list by request id",
    "strict": "SlotLedger check=strict",
    "off": "SlotLedger check=off",
    "lifecycle": "strict, full lifecycle",
    "scattered": "strict, scattered ids",
    "guarded": "GuardedAllocator(SGLang)",
}
DOING = {
    "sglang": "alloc(n); free(ids)",
    "pylist": "alloc(rid, n): pop n ids; free(rid): pop dict entry, extend list",
    "strict": "alloc(n, request); apply(ROLLBACK, ids, request)",
    "off": "alloc(n, request); apply(ROLLBACK, ids, request)",
    "lifecycle": "alloc; ADMIT; FINISH; launch(); fence()",
    "scattered": "as strict, the free ring shuffled once",
    "guarded": "with acting(request): alloc(n); free(ids)",
}


def load_sglang_allocator():
    """SGLang's `MambaSlotAllocator` class, loaded from its module file alone (importing the
    `sglang` package would pull its heavy dependencies), or None if sglang is not installed."""
    spec = importlib.util.find_spec("sglang")  # a top-level name: finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = os.path.join(root, *SGLANG_MODULE)
        if os.path.exists(path):
            mod_spec = importlib.util.spec_from_file_location("_slotwarden_bench_sglang_mamba", path)
            module = importlib.util.module_from_spec(mod_spec)
            mod_spec.loader.exec_module(module)
            return module.MambaSlotAllocator
    return None


def sglang_version() -> str | None:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


class ListSlotPool:
    """The baseline: a Python free list, and the slots of each request in a dict (as TensorRT-LLM
    and LMDeploy keep them). A repeated free is a silent no-op; nothing records ownership rules."""

    def __init__(self, size: int):
        self.free_ids = list(range(size, 0, -1))  # slot 0 is the pad slot; pops from the end
        self.owned: dict[int, list[int]] = {}

    def alloc(self, request_id: int, n: int) -> list[int] | None:
        if n > len(self.free_ids):
            return None
        ids = self.free_ids[-n:]
        del self.free_ids[-n:]
        self.owned[request_id] = ids
        return ids

    def free(self, request_id: int) -> None:
        ids = self.owned.pop(request_id, None)
        if ids:
            self.free_ids.extend(ids)


def _counter():
    box = [0]

    def nxt() -> int:
        box[0] += 1
        return box[0]

    return nxt


def bookkeeping_steps(capacity: int, device: torch.device, sglang_cls) -> dict[str, Callable[[int], None]]:
    """One alloc+free round trip of n slots per contender, bookkeeping only."""
    steps = {}
    rid = _counter()
    if sglang_cls is not None:
        sg = sglang_cls(capacity, str(device))

        def sglang(n):
            sg.free(sg.alloc(n))

        steps["sglang"] = sglang
    lp = ListSlotPool(capacity)

    def pylist(n):
        r = rid()
        lp.alloc(r, n)
        lp.free(r)

    steps["pylist"] = pylist
    for check in ("strict", "off"):
        ledger = SlotLedger(capacity, check=check)

        def checked(n, L=ledger):
            a = Actor.request(rid())
            L.apply(Event.ROLLBACK, L.alloc(n, a), a)

        steps[check] = checked
    lc = SlotLedger(capacity, check="strict")

    def lifecycle(n):
        a = Actor.request(rid())
        ids = lc.alloc(n, a)
        lc.apply(Event.ADMIT, ids, a)
        lc.apply(Event.FINISH, ids, a)
        lc.launch()
        lc.fence()

    steps["lifecycle"] = lifecycle
    shuffled = scattered_ledger(capacity)

    def scattered(n):
        a = Actor.request(rid())
        shuffled.apply(Event.ROLLBACK, shuffled.alloc(n, a), a)

    steps["scattered"] = scattered
    if sglang_cls is not None:
        steps["guarded"] = _guarded(sglang_cls(capacity, str(device)), rid)
    return steps


def scattered_ledger(capacity: int, seed: int = 0) -> SlotLedger:
    """A strict ledger whose free ring is in a shuffled order (every slot taken, then given back
    in a seeded random order): its allocs hand out scattered ids, in that order, round after round."""
    ledger = SlotLedger(capacity)
    a = Actor.request(0)
    ids = ledger.alloc(capacity, a)
    ledger.apply(Event.ROLLBACK, np.random.default_rng(seed).permutation(ids), a)
    return ledger


def _guarded(engine, rid, zero=None) -> Callable[[int], None]:
    guarded = GuardedAllocator(engine)

    def round_trip(n):
        with acting(Actor.request(rid())):
            ids = guarded.alloc(n)
            if zero is not None:
                zero(ids)
            guarded.free(ids)

    return round_trip


def zeroing_steps(pool: StatePool, sglang_cls) -> dict[str, Callable[[int], None]]:
    """The same round trips, each zeroing the state of the slots it allocates. The pool zeroes in
    `alloc`; the baselines call the same `zero_slots` on the same tensors after theirs."""
    steps = {}
    rid = _counter()
    tensors, capacity, device = pool.tensors, pool.capacity, pool.device
    if sglang_cls is not None:
        sg = sglang_cls(capacity, str(device))

        def sglang(n):
            ids = sg.alloc(n)
            zero_slots(tensors, ids)  # already int64 on the device
            sg.free(ids)

        steps["sglang"] = sglang
    lp = ListSlotPool(capacity)

    def pylist(n):
        r = rid()
        ids = lp.alloc(r, n)
        zero_slots(tensors, torch.tensor(ids, dtype=torch.int64).to(device, non_blocking=True))
        lp.free(r)

    steps["pylist"] = pylist
    for check in ("strict", "off"):
        p = copy.copy(pool)  # shares the state tensors; its own ledger
        p.ledger = SlotLedger(capacity, check=check)

        def checked(n, p=p):
            a = Actor.request(rid())
            p.rollback(p.alloc(n, a), a)

        steps[check] = checked
    lp_pool = copy.copy(pool)
    lp_pool.ledger = SlotLedger(capacity, check="strict")

    def lifecycle(n):
        a = Actor.request(rid())
        ids = lp_pool.alloc(n, a)
        lp_pool.admit(ids, a)
        lp_pool.finish(ids, a)
        lp_pool.launch()
        lp_pool.fence()

    steps["lifecycle"] = lifecycle
    sc_pool = copy.copy(pool)
    sc_pool.ledger = scattered_ledger(capacity)

    def scattered(n):
        a = Actor.request(rid())
        sc_pool.rollback(sc_pool.alloc(n, a), a)

    steps["scattered"] = scattered
    if sglang_cls is not None:
        steps["guarded"] = _guarded(sglang_cls(capacity, str(device)), rid, lambda ids: zero_slots(tensors, ids))
    return steps
