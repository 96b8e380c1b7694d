"""Lazy extra buffers: a request holds one track slot and takes a second one at each track
boundary (ScheduleBatch.mamba_lazy_prealloc_at_boundary, mamba_lazy_spec_prepare); that alloc is
the request's own, admitted at once, and the boundary's old slot is freed by it after the decode."""

from __future__ import annotations

import pytest

from slotwarden.adapters.sglang.drill import installed

if installed.skip_reason() is not None:
    pytest.skip(installed.skip_reason(), allow_module_level=True)

from sglang.srt.managers.schedule_batch import ScheduleBatch  # noqa: E402
from sglang.srt.managers.scheduler_components.batch_result_processor import (  # noqa: E402
    SchedulerBatchResultProcessor,
)

from slotwarden.adapters.sglang import hooks  # noqa: E402
from slotwarden.adapters.sglang import who as W  # noqa: E402
from slotwarden.model.vocabulary import State  # noqa: E402

from slotwarden.adapters.sglang.drill import census, flow, objects, scenarios  # noqa: E402

INTERVAL = scenarios.TRACK_INTERVAL
_batch = scenarios.boundary_batch


def _boundary(fx, prepare) -> tuple:
    req = objects.make_req(list(range(1, 9)))
    flow.start(fx, req)
    assert req.kv.mamba_ping_pong_empty == [False, True]  # lazy: one track slot
    old = int(req.kv.mamba_ping_pong_track_buffer[0])
    batch = _batch(fx, [req], 2 * INTERVAL)
    prepare(batch)  # SGLang's own loop allocates the second slot
    new = int(req.kv.mamba_ping_pong_track_buffer[1])
    return req, batch, old, new


def _prealloc(batch):
    ScheduleBatch.mamba_lazy_prealloc_at_boundary(batch, INTERVAL)


def _spec(batch):
    ScheduleBatch.mamba_lazy_spec_prepare(batch, INTERVAL, 3)


@pytest.mark.parametrize("prepare", [_prealloc, _spec], ids=["prealloc_at_boundary", "spec_prepare"])
def test_a_boundarys_track_slot_is_the_requests_own(guarded, prepare):
    fx = objects.build(extra_buffer=True, lazy=True)
    slots = fx.pool.mamba_allocator
    req, batch, old, new = _boundary(fx, prepare)
    assert slots.unattributed == 0
    record = slots.ledger.record(new)
    assert record.state is State.RUNNING and record.owner == W.request(req).id
    # after the decode: the boundary is committed and the old slot freed by the request
    SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary(object(), req, batch, 1)
    assert slots.state(old) is State.RELEASED or slots.state(old) is State.FREE
    flow.run(fx, req)
    flow.finish(fx, req)
    scenarios.evict_all(fx)
    audit = slots.guarded.audit()
    assert audit.problems == () and audit.free_list_ok, audit
    census.assert_balanced(fx)
    assert fx.mamba_free() == fx.sizes.mamba_slots


def test_without_the_hook_the_boundarys_slot_is_unattributed(guarded, monkeypatch):
    """The broken variant the test above rules out: the method passed through unhooked."""
    import slotwarden.adapters.sglang as sw

    sw.uninstall()
    monkeypatch.delitem(hooks.HOOKS, "ScheduleBatch.mamba_lazy_prealloc_at_boundary")
    sw.install()
    fx = objects.build(extra_buffer=True, lazy=True)
    _boundary(fx, _prealloc)
    assert fx.pool.mamba_allocator.unattributed == 1


def _later_turn_boundary(fx):
    """A session's later turn (borrowing the whole record) reaches a boundary and decodes past it:
    SGLang swaps the record's old track slot for the turn's new one and frees the old."""
    sess = objects.make_session("s")
    first = objects.make_req(list(range(1, 9)), session=sess)
    flow.start(fx, first)
    flow.run(fx, first)
    flow.finish(fx, first)
    later = objects.make_req(list(range(1, 13)), session=sess)
    flow.start(fx, later)
    old = int(later.kv.mamba_ping_pong_track_buffer[later.kv.mamba_next_track_idx])
    batch = _batch(fx, [later], 3 * INTERVAL)
    ScheduleBatch.mamba_lazy_prealloc_at_boundary(batch, INTERVAL)
    SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary(
        object(), later, batch, later.kv.mamba_next_track_idx
    )
    return later, old


def test_a_later_session_turns_boundary_gives_the_old_slot_back_to_the_session(guarded):
    fx = objects.build(extra_buffer=True, lazy=True)
    slots = fx.pool.mamba_allocator
    later, old = _later_turn_boundary(fx)
    assert slots.state(old) in (State.RELEASED, State.FREE)  # returned, then released by the session
    flow.run(fx, later)
    flow.finish(fx, later)  # the turn's own new track slot goes to the session with the record
    record = fx.session.slots["s"]
    from slotwarden.adapters.sglang import records

    assert {slots.state(s) for s in records.slot_ids(record.kv)} == {State.PARKED}
    fx.cache.release_session("s")
    scenarios.evict_all(fx)
    audit = slots.guarded.audit()
    assert audit.problems == () and audit.free_list_ok, audit
    census.assert_balanced(fx)
    assert fx.mamba_free() == fx.sizes.mamba_slots and slots.unattributed == 0


def test_without_the_swap_the_borrowers_free_of_a_lent_slot_is_refused(guarded, monkeypatch):
    """The broken variant the test above rules out (the old mapping): the boundary's free taken
    as the holder's, a borrower freeing its session's lent slot, the seed bug's class."""
    import slotwarden.adapters.sglang as sw
    from slotwarden.model.free import IllegalFree

    sw.uninstall()
    monkeypatch.delitem(hooks.HOOKS, "SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary")
    sw.install()
    fx = objects.build(extra_buffer=True, lazy=True)
    with pytest.raises(IllegalFree, match="LENT_RUNNING"):
        _later_turn_boundary(fx)
