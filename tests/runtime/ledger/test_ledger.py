"""SlotLedger: the host ownership ledger on its own (free list order, fences, checks, snapshot)."""

import numpy as np
import pytest
import torch

from slotwarden.model.errors import BadActor, BadInput, BadSlotId, FenceError, IllegalMove, LifecycleError
from slotwarden.model.vocabulary import NOBODY, Actor, Event, Group, Slot, State
from slotwarden.runtime.ledger.ledger import SlotLedger

R1, R2, S5 = Actor.request(1), Actor.request(2), Actor.session(5)


def same(a: dict, b: dict) -> bool:
    assert a.keys() == b.keys()
    return all(a[k] == b[k] if k == "counters" else torch.equal(a[k], b[k]) for k in a)


def test_new_ledger_is_all_free_in_id_order():
    led = SlotLedger(5)
    assert led.available() == 5
    assert led.free_list().tolist() == [1, 2, 3, 4, 5]
    assert led.counts() == {
        Group.FREE: 5,
        Group.BATCH_OWNED: 0,
        Group.SESSION_OWNED: 0,
        Group.RELEASED: 0,
        Group.CACHE_OWNED: 0,
    }
    assert all(led.record(i) == Slot(State.FREE) for i in range(1, 6))
    assert led.audit().clean


@pytest.mark.parametrize("capacity", [0, -1, 2.0, "3", None])
def test_capacity_must_be_a_positive_int(capacity):
    with pytest.raises(ValueError, match="capacity of at least 1 slot"):
        SlotLedger(capacity)


def test_check_mode_is_validated():
    with pytest.raises(ValueError, match="check must be one of"):
        SlotLedger(4, check="lenient")


def test_alloc_takes_the_head_freed_slots_join_the_tail_fences_free_in_id_order():
    led = SlotLedger(6)
    a = led.alloc(3, R1)
    assert a.tolist() == [1, 2, 3]
    assert led.free_list().tolist() == [4, 5, 6]
    led.apply(Event.ROLLBACK, [3, 1], R1)  # a candidate that did not fit: free at once, in batch order
    assert led.free_list().tolist() == [4, 5, 6, 3, 1]
    b = led.alloc(4, R2)
    assert b.tolist() == [4, 5, 6, 3]
    led.apply(Event.ADMIT, b, R2)
    led.apply(Event.FINISH, [6, 3, 4], R2)  # released at epoch 0: still held by the step in flight
    assert led.free_list().tolist() == [1]
    assert [led.record(i).state for i in (3, 4, 6)] == [State.RELEASED] * 3
    assert led.fence().tolist() == [3, 4, 6]
    assert led.free_list().tolist() == [1, 3, 4, 6]


def test_the_free_ring_wraps_around():
    led = SlotLedger(3)
    for turn in range(10):
        ids = led.alloc(2, Actor.request(turn))
        led.apply(Event.ROLLBACK, ids[::-1].copy(), Actor.request(turn))
        assert sorted(led.free_list().tolist()) == [1, 2, 3]
        assert led.audit().clean
    assert len(led.free_list()) == 3


def test_release_waits_for_the_fence_of_the_step_in_flight():
    led = SlotLedger(4)
    ids = led.alloc(2, R1)
    led.apply(Event.ADMIT, ids, R1)
    finished = []
    step = led.launch(lambda: bool(finished))
    assert step == 1
    led.apply(Event.FINISH, [1], R1)
    assert led.record(1) == Slot(State.RELEASED, fence=1)
    assert led.fence().tolist() == []  # step 1 is still on the device
    with pytest.raises(FenceError, match="before the device finished it"):
        led.fence(1)
    with pytest.raises(FenceError, match="only 1 steps were launched"):
        led.fence(2)
    assert led.record(1).state is State.RELEASED
    finished.append(True)
    assert led.finished_steps() == 1
    assert led.fence().tolist() == [1]
    assert led.completed == 1
    assert led.free_list().tolist() == [3, 4, 1]


def test_a_fence_fired_as_an_event_cannot_run_ahead_of_the_device():
    led = SlotLedger(4)
    ids = led.alloc(1, R1)
    led.apply(Event.ADMIT, ids, R1)
    led.launch(lambda: False)  # step 1 never finishes here
    led.apply(Event.FINISH, ids, R1)
    before = led.snapshot()
    with pytest.raises(FenceError, match="fence of step 1 .*finished only step 0"):
        led.apply(Event.FENCE, ids, Actor.fence(1))
    with pytest.raises(FenceError, match="fence of step 9"):
        led.apply(Event.FENCE, ids, Actor.fence(9))
    assert same(before, led.snapshot())
    with pytest.raises(IllegalMove, match="waits for the fence of step 1"):
        led.apply(Event.FENCE, ids, Actor.fence(0))  # a finished step, but too early for this slot
    assert same(before, led.snapshot())


def test_a_fence_fired_as_an_event_for_a_finished_step_frees():
    led = SlotLedger(4)
    ids = led.alloc(1, R1)
    led.apply(Event.ADMIT, ids, R1)
    led.launch()
    led.apply(Event.FINISH, ids, R1)
    led.apply(Event.FENCE, ids, Actor.fence(1))
    assert led.record(1) == Slot(State.FREE)
    assert led.free_list().tolist() == [2, 3, 4, 1]


def test_a_batch_longer_than_the_pool_is_a_duplicate_not_a_crash():
    led = SlotLedger(3)
    led.alloc(3, R1)
    before = led.snapshot()
    for ids in ([1, 1, 1, 1], [1, 2, 3, 1], [2] * 10):
        with pytest.raises(BadSlotId, match="named twice in one batch"):
            led.apply(Event.ADMIT, ids, R1)
    assert same(before, led.snapshot())


def test_snapshot_is_unchanged_by_a_refused_batch_of_real_ids():
    led = SlotLedger(4)
    led.alloc(2, R1)
    before = led.snapshot()
    with pytest.raises(IllegalMove):
        led.apply(Event.ADMIT, [3, 4], R1)
    with pytest.raises(BadSlotId):
        led.apply(Event.ADMIT, [2, 3, 2], R1)
    assert same(before, led.snapshot())


def test_the_recorder_keeps_its_own_copy_of_the_ids():
    led = SlotLedger(4)
    ids = led.alloc(2, R1)
    ids[:] = 4  # the caller reuses its buffer
    mine = np.array([1, 2])
    led.apply(Event.ADMIT, mine, R1)
    mine[:] = 3
    assert [m.event for m in led.recorder.history(1)] == [Event.ALLOC, Event.ADMIT]
    assert [m.event for m in led.recorder.history(2)] == [Event.ALLOC, Event.ADMIT]
    assert led.recorder.history(3) == [] and led.recorder.history(4) == []


def test_alloc_is_all_or_nothing():
    led = SlotLedger(3)
    led.alloc(2, R1)
    before = led.snapshot()
    assert led.alloc(2, R2) is None
    assert same(before, led.snapshot())
    for n in (0, -1, True, 1.0, "1"):
        with pytest.raises(BadInput, match="alloc needs a positive count"):
            led.alloc(n, R2)
    with pytest.raises(IllegalMove, match="only a request may fire it"):
        led.alloc(1, S5)
    assert same(before, led.snapshot())
    assert led.alloc(np.int64(1), R2).tolist() == [3]


def test_alloc_by_id_is_refused_when_the_ledger_keeps_the_free_list():
    led = SlotLedger(3)
    before = led.snapshot()
    with pytest.raises(BadSlotId, match="alloc takes a count here"):
        led.apply(Event.ALLOC, [1], R1)
    assert same(before, led.snapshot())


def test_a_ledger_without_free_list_allocates_named_ids():
    led = SlotLedger(4, free_list=False)
    assert led.available() == 0
    with pytest.raises(BadSlotId, match="keeps no free list"):
        led.alloc(1, R1)
    led.apply(Event.ALLOC, [3, 1], R1)
    assert led.held_by(R1).tolist() == [1, 3]
    with pytest.raises(IllegalMove, match="alloc is not allowed from TAKEN"):
        led.apply(Event.ALLOC, [3], R2)
    led.apply(Event.ROLLBACK, [3, 1], R1)
    assert led.counts()[Group.FREE] == 4
    assert led.audit().clean


def test_held_by_and_state_of():
    led = SlotLedger(6)
    led.alloc(2, R1)
    led.apply(Event.ADMIT, [1, 2], R1)
    led.apply(Event.PARK, [2], R1, 5)
    led.apply(Event.LEND, [2], S5, 2)
    led.alloc(1, Actor.request(5))  # a request whose id equals the session's: a different actor
    assert led.held_by(R1).tolist() == [1]
    assert led.held_by(S5).tolist() == [2]
    assert led.held_by(R2).tolist() == [2]  # borrowed
    assert led.held_by(Actor.request(5)).tolist() == [3]
    assert led.held_by(Actor.fence(0)).tolist() == []
    assert led.state_of([3, 2, 1, 4]).tolist() == [State.TAKEN, State.LENT, State.RUNNING, State.FREE]
    assert led.state_of([]).tolist() == []
    with pytest.raises(BadSlotId):
        led.state_of([0])


def test_check_off_applies_the_table_without_checks():
    led = SlotLedger(4, check="off")
    ids = led.alloc(2, R1)
    led.apply(Event.ADMIT, ids, R1)
    assert led.state_of(ids).tolist() == [State.RUNNING] * 2


def test_audit_finds_leaks_and_attributes_them():
    led = SlotLedger(4)
    led.alloc(2, R1)
    led.apply(Event.ADMIT, [1, 2], R1)
    led.apply(Event.PARK, [2], R1, 5)
    assert led.audit(live_requests={1}, live_sessions={5}).clean
    audit = led.audit(live_requests=set(), live_sessions={5})
    assert [(leak.slot, leak.state, leak.owner, leak.last_event) for leak in audit.leaks] == [
        (1, State.RUNNING, 1, Event.ADMIT)
    ]
    assert "admit by request 1" in audit.leaks[0].history
    audit = led.audit(live_requests={1}, live_sessions=set())
    assert [(leak.slot, leak.owner, leak.last_event) for leak in audit.leaks] == [(2, 5, Event.PARK)]
    assert audit.counts[Group.SESSION_OWNED] == 1 and audit.free_list_ok


def test_audit_reports_a_corrupt_free_list():
    led = SlotLedger(4)
    led.alloc(1, R1)
    led._ring[1] = 3  # free list 3, 3, 4: slot 2 lost, 3 twice
    audit = led.audit()
    assert not audit.clean and not audit.free_list_ok
    assert any("duplicate" in p for p in audit.problems)
    assert any("not the set of FREE slots" in p for p in audit.problems)


def test_a_request_named_nobody_cannot_allocate():
    """NOBODY (-1) is the mark of an unowned field: a slot it took would have no owner anyone
    could match, and leak."""
    led = SlotLedger(3)
    with pytest.raises(LifecycleError):
        led.alloc(1, Actor.request(NOBODY))


def test_an_actor_id_of_nobody_is_refused_at_every_call_and_changes_nothing():
    led = SlotLedger(3)
    ids = led.alloc(1, R1)
    before = led.snapshot()
    for call in (
        lambda: led.alloc(1, Actor.request(NOBODY)),
        lambda: led.apply(Event.ADMIT, ids, Actor.request(NOBODY)),
        lambda: led.apply(Event.ROLLBACK, ids, Actor.request(NOBODY)),
        lambda: led.held_by(Actor.session(NOBODY)),
    ):
        with pytest.raises(BadActor, match=r"bad actor request -1|bad actor session -1") as err:
            call()
        assert "NOBODY" in str(err.value)
    assert same(before, led.snapshot())
    assert led.audit().clean


def test_conservation_counts_from_independent_sources_and_fails_on_a_broken_ledger():
    """free (the free list's count) + held (the owner column) + released (the state column)
    must be the capacity; each break below left the old per-group sum at the capacity."""
    led = SlotLedger(4)
    led.apply(Event.ADMIT, led.alloc(2, R1), R1)
    assert led.audit().clean

    lost_owner = SlotLedger(4)
    lost_owner.alloc(1, R1)
    lost_owner.cols.owner[1] = NOBODY  # a held slot nobody can release (a request named NOBODY took it)
    audit = lost_owner.audit()
    assert sum(audit.counts.values()) == 4  # the old clause held
    assert not audit.clean and audit.free_list_ok
    assert any("held (0, owner column)" in p and "= 3, not the capacity 4" in p for p in audit.problems), audit.problems
    assert any("slots [1] have an owner field that does not match" in p for p in audit.problems)

    stray_owner = SlotLedger(4)
    stray_owner.cols.owner[3] = 9  # an owner left behind on a free slot
    audit = stray_owner.audit()
    assert not audit.clean and any("= 5, not the capacity 4" in p for p in audit.problems)

    short_ring = SlotLedger(4, free_list=False)  # the guard's ledger: free from the state column
    short_ring.apply(Event.ALLOC, [2], R1)
    short_ring.cols.state[2] = int(State.FREE)  # freed behind the ledger's back, owner still set
    assert not short_ring.audit().clean

    junk_state = SlotLedger(4)
    junk_state.cols.state[4] = 200
    audit = junk_state.audit()  # no crash on a state the lifecycle does not declare
    assert not audit.clean and any("slots [4] hold no declared state" in p for p in audit.problems)
