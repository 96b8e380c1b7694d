"""The step check's first-read rule on SGLang's real objects: a slot SGLang allocates holds its
previous tenant's state until the batch's deferred clear or copy-on-write fills it, or a
load-back copies a state in; a row reading it before then is refused."""

from __future__ import annotations

import pytest

from slotwarden.adapters.sglang.drill import installed

if installed.skip_reason() is not None:
    pytest.skip(installed.skip_reason(), allow_module_level=True)

from slotwarden.adapters.sglang.drill import flow, objects  # noqa: E402
from slotwarden.model.errors import IllegalStep  # noqa: E402
from slotwarden.model.write_set import Fill  # noqa: E402


def _fill(fx, req) -> Fill:
    return Fill(int(fx.pool.mamba_allocator.guard.fills[int(req.kv.mamba_pool_idx)]))


def cached():
    """A fixture whose tree caches the state of a request's prompt [1..8], written by its step."""
    fx = objects.build()
    a = objects.make_req([1, 2, 3, 4, 5, 6, 7, 8])
    flow.start(fx, a)
    flow.step(fx, [a])
    flow.run(fx, a)
    flow.finish(fx, a)
    fx.pool.mamba_allocator.fence(None)
    return fx


def test_a_new_slot_is_zeroed_by_its_batch_and_written_by_its_step(guarded):
    fx = objects.build()
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)
    assert _fill(fx, a) is Fill.STALE and a.kv.mamba_needs_clear
    assert len(flow.step(fx, [a])) == 1
    assert _fill(fx, a) is Fill.WRITTEN


def test_a_slot_whose_clear_was_dropped_is_refused_at_its_step(guarded):
    """A request whose deferred clear never reaches the batch (a path that sets the index
    without the alloc's clear) reads the slot's previous tenant: refused, nothing launched."""
    fx = objects.build(sizes=objects.Sizes(mamba_slots=2))
    slots = fx.pool.mamba_allocator
    a, b = objects.make_req([1, 2, 3]), objects.make_req([7, 8, 9])
    flow.start(fx, a)
    flow.start(fx, b)
    b.kv.mamba_needs_clear = False  # the dropped clear
    with pytest.raises(IllegalStep, match="stale") as refused:
        flow.step(fx, [a, b])
    assert refused.value.row == 1 and slots.ledger.launched == 0


def test_a_copy_on_write_from_the_cache_fills_the_slot(guarded):
    fx = cached()
    b = objects.make_req([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    flow.start(fx, b)
    assert b.kv.mamba_cow_src_index is not None and _fill(fx, b) is Fill.STALE
    assert len(flow.step(fx, [b])) == 1 and _fill(fx, b) is Fill.WRITTEN


def test_a_load_back_fills_the_slot(guarded):
    fx = objects.build()
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)
    fx.mamba._adopt_loaded_state(a)  # a host state copied in: the batch has nothing to clear
    assert not a.kv.mamba_needs_clear and _fill(fx, a) is Fill.COPIED
    assert len(flow.step(fx, [a])) == 1


def test_without_the_load_back_hook_the_loaded_slot_would_be_refused(guarded, monkeypatch):
    """The broken variant the test above rules out: a load-back the adapter does not see."""
    fx = objects.build()
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)
    monkeypatch.setattr(fx.pool.mamba_allocator, "copied", lambda dst, src=None: None)
    fx.mamba._adopt_loaded_state(a)
    with pytest.raises(IllegalStep, match="stale"):
        flow.step(fx, [a])


def test_without_the_batchs_fills_a_new_slot_would_be_refused(guarded, monkeypatch):
    """The broken variant the first test rules out: the batch's clears not reported."""
    fx = objects.build()
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)
    monkeypatch.setattr(fx.pool.mamba_allocator, "filled", lambda batch, outside=False: None)
    with pytest.raises(IllegalStep, match="stale"):
        flow.step(fx, [a])


def test_two_requests_of_one_batch_may_copy_one_cached_prefix(guarded):
    fx = cached()
    b, c = objects.make_req([1, 2, 3, 4, 5, 6, 7, 8, 9]), objects.make_req([1, 2, 3, 4, 5, 6, 7, 8, 10])
    flow.start(fx, b)
    flow.start(fx, c)
    assert int(b.kv.mamba_cow_src_index) == int(c.kv.mamba_cow_src_index)
    assert len(flow.step(fx, [b, c])) == 1 and _fill(fx, b) is _fill(fx, c) is Fill.WRITTEN


def test_by_default_the_adapter_judges_no_first_read():
    """`install()` without `first_read`: a dropped clear is not refused, no fills are kept."""
    import slotwarden.adapters.sglang as sw

    sw.uninstall()
    sw.install()
    try:
        fx = objects.build()
        a = objects.make_req([1, 2, 3])
        flow.start(fx, a)
        a.kv.mamba_needs_clear = False
        assert fx.pool.mamba_allocator.guard.fills is None and len(flow.step(fx, [a])) == 1
    finally:
        sw.uninstall()


def test_the_plugin_switch_turns_first_reads_on(monkeypatch):
    import slotwarden.adapters.sglang as sw
    from slotwarden.adapters.sglang import plugin

    sw.uninstall()
    monkeypatch.setenv(plugin.SWITCH, "1")
    monkeypatch.setenv(plugin.FIRST_READ, "1")
    try:
        plugin.load()
        assert sw.installed().first_read
    finally:
        sw.uninstall()
