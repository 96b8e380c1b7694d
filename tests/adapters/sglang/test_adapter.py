"""The SGLang adapter on SGLang's real objects: its normal sequences pass with zero refusals and
clean audits, the bug history is refused at the call with nothing changed, and the call-site
table matches SGLang's source."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from slotwarden.adapters.sglang.drill import installed

if installed.skip_reason() is not None:
    pytest.skip(installed.skip_reason(), allow_module_level=True)

import slotwarden.adapters.sglang as sw  # noqa: E402
from slotwarden.adapters.sglang import sites  # noqa: E402
from slotwarden.adapters.sglang.hooks import HOOKS  # noqa: E402
from slotwarden.adapters.sglang.install import MODULES_LOADED  # noqa: E402
from slotwarden.model.errors import BadSlotId  # noqa: E402
from slotwarden.model.free import IllegalFree  # noqa: E402
from slotwarden.runtime.guarded_allocator import HeldSlots  # noqa: E402

from slotwarden.adapters.sglang.drill import flow, objects  # noqa: E402


def _clean(fx) -> None:
    slots = fx.pool.mamba_allocator
    audit = slots.guarded.audit()
    assert audit.problems == () and audit.leaks == (), audit
    assert audit.free_list_ok


def _done(fx) -> None:
    _clean(fx)
    assert fx.mamba_free() == fx.sizes.mamba_slots


def _radix(fx):
    a = objects.make_req([1, 2, 3, 4, 5, 6])
    flow.start(fx, a)
    flow.run(fx, a)
    flow.finish(fx, a)  # its state goes to the tree
    b = objects.make_req([1, 2, 3, 4, 5, 6, 7, 8])
    flow.start(fx, b)  # copy-on-write from a's node
    flow.run(fx, b)
    flow.finish(fx, b)
    return a, b


def _session(fx, sid="s1"):
    sess = objects.make_session(sid)
    turns = [objects.make_req(list(range(1, n)), session=sess) for n in (4, 6, 8, 9)]
    for i, turn in enumerate(turns):
        flow.start(fx, turn)
        if i == 2:
            flow.abort(fx, turn)  # the session gives its record up; the next turn prefills afresh
            continue
        flow.run(fx, turn)
        flow.finish(fx, turn)
    return sess


@pytest.mark.parametrize("extra_buffer", [False, True], ids=["no-buffer", "extra-buffer"])
def test_radix_insert_match_evict(guarded, extra_buffer):
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams

    fx = objects.build(extra_buffer=extra_buffer)
    assert isinstance(fx.pool.mamba_allocator, sw.GuardedSlots)
    _radix(fx)
    slots = fx.pool.mamba_allocator
    assert slots.ledger.audit().counts[4] >= 1  # the tree holds states (CACHE_OWNED)
    _clean(fx)
    fx.cache.evict(EvictParams(num_tokens=0, mamba_num=fx.sizes.mamba_slots))
    _done(fx)
    assert slots.unattributed == 0


@pytest.mark.parametrize("extra_buffer", [False, True], ids=["no-buffer", "extra-buffer"])
def test_session_turns_abort_close(guarded, extra_buffer):
    fx = objects.build(extra_buffer=extra_buffer)
    _session(fx)
    slots = fx.pool.mamba_allocator
    held = [s for s in range(1, fx.sizes.mamba_slots + 1) if slots.state(s).name == "PARKED"]
    assert held, "the session keeps its record between turns"
    fx.cache.release_session("s1")
    _clean(fx)
    assert fx.mamba_free() + fx.cache.mamba_evictable_size() + fx.cache.mamba_protected_size() == fx.sizes.mamba_slots


def test_flush_with_tree_and_session(guarded):
    fx = objects.build()
    _radix(fx)
    _session(fx, "s2")
    fx.cache.reset()
    fx.pool.clear()  # SGLang's flush_cache: legal with the tree and a session holding slots
    _done(fx)


def test_flush_refused_while_a_request_runs(guarded):
    fx = objects.build()
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)
    with pytest.raises(HeldSlots, match="used by requests"):
        fx.pool.clear()


def _lent_turn(fx):
    sess = objects.make_session("s")
    first = objects.make_req([1, 2, 3], session=sess)
    flow.start(fx, first)
    flow.run(fx, first)
    flow.finish(fx, first)
    turn = objects.make_req([1, 2, 3, 4], session=sess)
    flow.match(fx, turn)  # borrows the session's record
    return turn


def _pr_21404_rollback(fx, req) -> None:
    """The prefill rollback as PR 21404 wrote it (scheduler.py, before PR 23327's session check)."""
    fx.pool.mamba_allocator.free(req.kv.mamba_pool_idx.unsqueeze(-1))
    req.kv.mamba_pool_idx = None


def test_pr_21404_refused_at_the_call(guarded):
    fx = objects.build()
    turn = _lent_turn(fx)
    slots = fx.pool.mamba_allocator
    engine, ledger = slots.free_slots.clone(), slots.ledger.snapshot()
    with pytest.raises(IllegalFree, match="belongs to session") as caught:
        _pr_21404_rollback(fx, turn)
    assert any("last" in note or "slot" in note for note in caught.value.__notes__)
    assert torch.equal(slots.free_slots, engine)
    assert all(torch.equal(v, slots.ledger.snapshot()[k]) for k, v in ledger.items() if k != "counters")
    assert turn.kv.mamba_pool_idx is not None


def test_pr_21404_passes_bare():
    """The same statements without the adapter: the session's slot joins the free list."""
    sw.uninstall()
    fx = objects.build()
    turn = _lent_turn(fx)
    slot = int(turn.kv.mamba_pool_idx)
    _pr_21404_rollback(fx, turn)
    assert slot in fx.pool.mamba_allocator.free_slots.tolist()
    assert fx.session.slots["s"].kv.mamba_pool_idx is None  # the session's record lost its state


def test_sentinel_and_double_free_refused(guarded):
    fx = objects.build()
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)
    slots = fx.pool.mamba_allocator
    with pytest.raises(BadSlotId):
        slots.free(torch.tensor([-1]))  # PR 40044: the -1 "no slot" sentinel
    idx = a.kv.mamba_pool_idx.clone()
    fx.pool.free_mamba_cache(a)
    engine = slots.free_slots.clone()
    with pytest.raises(IllegalFree, match="double free"):
        slots.free(idx.unsqueeze(0))
    assert torch.equal(slots.free_slots, engine)


def test_trace_is_accepted_by_check_trace(tmp_path):
    sw.uninstall()
    path = tmp_path / "sglang.trace"
    sw.install(trace=str(path))
    try:
        fx = objects.build()
        _radix(fx)
        _session(fx)
        fx.cache.reset()
        fx.pool.clear()  # a trace ends with every slot free, or check-trace reports the leaks
    finally:
        sw.uninstall()
    done = subprocess.run(
        [sys.executable, "-m", "slotwarden", "check-trace", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


# -- the call-site table ---------------------------------------------------------------------------
def missing_sites(table, found) -> list:
    listed = {(s.file, s.function) for s in table}
    return sorted(k for k in found if k not in listed)


def test_every_mamba_call_site_is_in_the_table():
    found = sites.scan(sites.sglang_root())
    assert len(found) >= 20, "the scan finds SGLang's call sites"
    assert missing_sites(sites.SITES, found) == []
    root = sites.sglang_root()
    for site in sites.SITES:  # every row names a function SGLang has
        assert f"def {site.function.split('.')[-1]}(" in (root / site.file).read_text(), site
    # a table that drops one site fails the check
    assert missing_sites(sites.SITES[1:], found) == [(sites.SITES[0].file, sites.SITES[0].function)]


def test_every_hook_is_in_the_table_and_installed(guarded):
    named = {s.hook for s in sites.SITES if s.how in ("hook", "inside", "unguarded") and s.hook}
    assert named - set(HOOKS) <= {"HybridReqToTokenPool.mamba_allocator"}
    assert set(HOOKS) <= named
    for key in HOOKS:
        cls = MODULES_LOADED[key.split(".")[0]]
        assert hasattr(getattr(cls, key.split(".", 1)[1]), "__wrapped__"), key
