"""The validation layer at the public edge: events, actors, targets, ids, counts, steps and
configs are normalised or refused with a typed error naming the bad value, and a refused call
changes nothing (ledger, free list, state tensors, recorder)."""

import numpy as np
import pytest
import torch

from slotwarden.model.errors import BadActor, BadInput, BadSlotId, FenceError, IllegalMove, LifecycleError
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Slot, State
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.pool import StatePool

from engines import TensorFreeList, Untouched
from pools import Frozen, populated

CFG = PoolConfig(num_slots=4, layers=1, conv_dims=(4,), heads=1, head_dim=2, state_size=2)
R1, R2 = Actor.request(1), Actor.request(2)


# -- events ----------------------------------------------------------------------------------
def test_an_event_given_as_a_plain_int_is_that_event():
    pool = StatePool(CFG)
    frozen = Frozen(pool)
    # 0 is ALLOC: named by id it would take slot 3 while the free list still holds it
    with pytest.raises(BadSlotId, match="alloc takes a count here"):
        pool.fire(0, [3], R1)
    assert frozen.unchanged() and pool.ledger.record(3) == Slot(State.FREE)
    ids = pool.alloc(1, R1)
    pool.fire(int(Event.ADMIT), ids, R1)
    pool.launch(lambda: False)
    pool.fire(np.int64(Event.FINISH), ids, R1)
    frozen = Frozen(pool)
    with pytest.raises(FenceError, match="fence of step 1"):  # 9 is FENCE: not before its step finished
        pool.fire(9, ids, Actor.fence(1))
    assert frozen.unchanged() and pool.ledger.record(1).state is State.RELEASED
    with pytest.raises(IllegalMove, match="illegal admit by request 1 on slot 1 \\(state RELEASED"):
        pool.fire(2, ids, R1)  # the recorder holds Events, so the history renders
    assert all(type(m.event) is Event for m in pool.history(1))


@pytest.mark.parametrize("event", ["finish", None, 42, -1, True, 2.0, Event, object()])
def test_a_junk_event_is_a_typed_error_that_names_it(event):
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(BadInput, match=r"bad event .*not an event") as err:
        pool.fire(event, [1], R1)
    assert err.value.value is event and err.value.argument == "event"
    assert frozen.unchanged()


# -- actors ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "actor, text",
    [
        (Actor.request(NOBODY), "request -1.*-1 is NOBODY"),
        (Actor.request(-(2**63) - 1), "an actor id is an int64"),
        (Actor.request(1.5), "an actor id is an int, not float"),
        (Actor.request(1.0), "not float"),
        (Actor.request(True), "not bool"),
        (Actor.request("1"), "not str"),
        (Actor.request(None), "not NoneType"),
        (Actor.request(2**63), "an actor id is an int64"),
        (Actor(7, 1), "unknown actor kind 7"),
        (Actor("request", 1), "unknown actor kind"),
        ((0, 1), "not an Actor"),
        (1, "not an Actor"),
        (None, "not an Actor"),
    ],
)
def test_a_junk_actor_is_refused_at_every_entry_and_changes_nothing(actor, text):
    pool = populated()
    frozen = Frozen(pool)
    calls = [
        lambda: pool.alloc(1, actor),
        lambda: pool.finish([1], actor),
        lambda: pool.fire(Event.CLOSE, [4], actor),
        lambda: pool.close(actor),
        lambda: pool.copy([1], [2], actor),
        lambda: pool.zero([1], actor),
        lambda: pool.fork(1, actor),
        lambda: pool.held_by(actor),
    ]
    for call in calls:
        with pytest.raises(BadActor, match=text):
            call()
    assert frozen.unchanged()


def test_an_int_or_float_actor_id_never_aliases_another_request():
    pool = StatePool(CFG)
    pool.alloc(1, R1)
    for alias in (Actor.request(1.0), Actor.request(True), Actor.request(np.float64(1))):
        with pytest.raises(BadActor):
            pool.alloc(1, alias)
    assert pool.held_by(R1).tolist() == [1] and pool.available() == 3


def test_numpy_ints_and_int_kinds_are_normalised():
    pool = StatePool(CFG)
    ids = pool.alloc(np.int32(2), Actor(0, np.int64(7)))
    assert ids.tolist() == [1, 2]
    assert pool.ledger.record(1) == Slot(State.TAKEN, owner=7)
    entry = pool.ledger.recorder.entries[-1]
    assert type(entry.actor.kind) is ActorKind and type(entry.actor.id) is int
    pool.admit(ids, Actor.request(np.int16(7)))
    pool.park(ids[:1], Actor.request(7), np.int64(3))
    assert pool.ledger.record(1) == Slot(State.PARKED, owner=3)


@pytest.mark.parametrize("target", [1.5, "3", None, True, 2**63, -2])
def test_a_junk_target_is_refused(target):
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(BadInput, match="bad target"):
        pool.park([1], R1, target)
    with pytest.raises(BadInput, match="bad target"):
        pool.lend([4], Actor.session(5), target)
    assert frozen.unchanged()


# -- ids -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "ids, text",
    [
        ([True, 2], "must be integers, not bool"),
        ([np.True_, 2], "must be integers, not bool"),
        ((1, False), "must be integers, not bool"),
        ([[1, 2]], "1-D"),
        (torch.tensor([[1, 2]]), "1-D"),
        (np.array([[1], [2]]), "1-D"),
        (torch.tensor(1), "1-D"),
        (np.int64(1), "a batch of slot ids is"),
        (1, "a batch of slot ids is"),
        ("12", "a batch of slot ids is"),
        (None, "a batch of slot ids is"),
        ({1, 2}, "a batch of slot ids is"),
        ([1, [2, 3]], "not a batch of slot ids"),
        ([2**70], "must be integers, not object"),
        (np.array([2**63], dtype=np.uint64), "bad slot id 9223372036854775808"),
        ([float("nan")], "must be integers, not float64"),
        (["1"], "must be integers"),
    ],
)
def test_junk_ids_are_a_typed_error_and_change_nothing(ids, text):
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(BadSlotId, match=text.replace("(", "\\(")):
        pool.finish(ids, R1)
    assert frozen.unchanged()


def test_the_model_and_the_runtime_both_refuse_a_bool_among_the_ids():
    from slotwarden.model import pool as model_pool

    with pytest.raises(BadSlotId):
        model_pool.apply(model_pool.new_pool(4), Event.ALLOC, [True, 2], R1)
    led = SlotLedger(4, free_list=False)
    before = led.snapshot()
    with pytest.raises(BadSlotId, match="not bool"):
        led.apply(Event.ALLOC, [True, 2], R1)
    assert all(torch.equal(before[k], v) for k, v in led.snapshot().items() if k != "counters")


def test_non_contiguous_and_reversed_ids_are_accepted_and_the_result_is_a_tensor():
    pool = populated()
    strided = torch.tensor([1, 9, 2, 9, 3])[::2]  # a view with stride 2
    assert pool.finish(strided, R1).tolist() == [1, 2, 3]
    pool2 = populated()
    backwards = np.array([1, 2, 3])[::-1]  # negative strides: torch.from_numpy refuses those
    assert pool2.finish(backwards, R1).tolist() == [3, 2, 1]
    assert pool2.state_of([1, 2, 3]) == [State.RELEASED] * 3
    one = np.array([4])[::-1]  # one element: numpy calls it contiguous, its stride is still negative
    assert pool2.on_device(one).tolist() == [4]
    assert pool2.fire(Event.CLOSE, one, Actor.session(5)).tolist() == [4]


# -- counts, steps, launches, queries, configs -----------------------------------------------
@pytest.mark.parametrize("step", [-1, 1.5, "1", True, float("nan")])
def test_a_junk_fence_step_is_refused(step):
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(BadInput, match="bad step"):
        pool.fence(step)
    assert frozen.unchanged()


@pytest.mark.parametrize("done", [1, "yes", True])
def test_a_launch_needs_a_callable(done):
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(BadInput, match="bad done"):
        pool.launch(done)
    assert frozen.unchanged()


@pytest.mark.parametrize("slot", [0, -1, 9, 1.0, None, "1"])
def test_single_slot_queries_refuse_junk(slot):
    pool = populated()
    with pytest.raises(BadSlotId):
        pool.ledger.record(slot)
    with pytest.raises(BadSlotId):
        pool.history(slot)
    with pytest.raises(BadSlotId):
        pool.fork(slot, R2)


@pytest.mark.parametrize("live", [[1.5], ["a"], 3, [NOBODY]])
def test_the_audit_refuses_junk_live_sets(live):
    pool = populated()
    with pytest.raises(BadInput):
        pool.audit(live_requests=live)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SlotLedger(True),
        lambda: SlotLedger(2**40),
        lambda: SlotLedger(4, free_list="no"),
        lambda: SlotLedger(4, recorder_depth=-1),
        lambda: SlotLedger(4, lifecycle=None),
        lambda: StatePool({"num_slots": 4}),
        lambda: LedgerGuard(object(), 4),
        lambda: LedgerGuard(TensorFreeList(4), 0),
    ],
)
def test_bad_configs_are_a_typed_error(make):
    with pytest.raises(BadInput):
        make()


def test_a_state_dtype_the_kernels_cannot_zero_is_refused_at_construction():
    cfg = PoolConfig(
        num_slots=4, layers=1, conv_dims=(4,), heads=1, head_dim=2, state_size=2, ssm_dtype=torch.float8_e4m3fn
    )
    with pytest.raises(BadInput, match="cannot be zeroed or copied"):
        StatePool(cfg)


# -- the guard -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda g: g.alloc(1, Actor.request(NOBODY)),
        lambda g: g.alloc(1.5, R1),
        lambda g: g.alloc(1, Actor.request(1.5)),
        lambda g: g.fire(0, torch.tensor([1]), R1),
        lambda g: g.fire("finish", torch.tensor([1]), R1),
        lambda g: g.fire(Event.FINISH, torch.tensor([1]), Actor.request(NOBODY)),
        lambda g: g.fire(Event.FINISH, torch.tensor([[1]]), R1),
        lambda g: g.fire(Event.FINISH, [True], R1),
        lambda g: g.fence(-1),
        lambda g: g.launch(3),
    ],
)
def test_the_guard_refuses_junk_before_the_engine_is_asked(call):
    engine = TensorFreeList(4)
    guard = LedgerGuard(engine, 4)
    guard.fire(Event.ADMIT, guard.alloc(2, R1), R1)
    frozen = Untouched(engine, guard)
    with pytest.raises(LifecycleError):
        call(guard)
    frozen.check()


# -- a batch longer than the pool: refused by its length, before any conversion ----------------
# range(1, 2**62) would take a day and exabytes to convert: a call that answers at all has read
# only its length. (No timing asserted: the answer, the typed error and its text are the check.)
LONG = {
    "range 2**62": range(1, 2**62),
    "range 2**70": range(0, 2**70, 3),  # longer than sys.maxsize: len() itself overflows
    "list": list(range(1, 100_001)),
    "tuple": tuple(range(1, 100_001)),
    "array": np.arange(1, 100_001),
    "int32 array": np.arange(1, 100_001, dtype=np.int32),
    "tensor": torch.arange(1, 100_001),
}


def _long_calls():
    """Every entry point that takes a batch of ids: the ledger's, the pool's, the guard's and the
    allocator's, on a populated pool (or a guard with slot 1 taken)."""
    from slotwarden.runtime.guarded_allocator import GuardedAllocator, acting
    from slotwarden.trace_examples import FreeList

    def allocator(call):
        def run(ids):
            g = GuardedAllocator(FreeList(8, "cpu"))
            with acting(R1):
                g.alloc(1)
                call(g, ids)

        return run

    def pool(call):
        return lambda ids: call(populated(), ids)

    return {
        "ledger.apply": pool(lambda p, ids: p.ledger.apply(Event.FINISH, ids, R1)),
        "ledger.apply_each": pool(lambda p, ids: p.ledger.apply_each(Event.FINISH, ids, [1, 1, 1])),
        "ledger.checked_ids": pool(lambda p, ids: p.ledger.checked_ids(ids, "zero", R1)),
        "ledger.state_of": pool(lambda p, ids: p.ledger.state_of(ids)),
        "pool.fire": pool(lambda p, ids: p.fire(Event.FINISH, ids, R1)),
        "pool.fire_each": pool(lambda p, ids: p.fire_each(Event.FINISH, ids, [1, 1, 1])),
        "pool.lock": pool(lambda p, ids: p.lock(ids, R1)),
        "pool.fire_each(LOCK)": pool(lambda p, ids: p.fire_each(Event.LOCK, ids, [1, 1, 1])),
        "pool.zero": pool(lambda p, ids: p.zero(ids, R1)),
        "pool.copy": pool(lambda p, ids: p.copy(ids, ids, R1)),
        "guard.fire": allocator(lambda g, ids: g.guard.fire(Event.ROLLBACK, ids, R1)),
        "allocator.free": allocator(lambda g, ids: g.free(ids)),
        "allocator.admit": allocator(lambda g, ids: g.admit(ids)),
    }


@pytest.mark.parametrize("kind", LONG)
@pytest.mark.parametrize("call", list(_long_calls()))
def test_a_batch_longer_than_the_pool_is_refused_by_its_length(call, kind):
    ids = LONG[kind]
    n = len(ids) if kind != "range 2**70" else (2**70 + 2) // 3
    with pytest.raises(BadSlotId) as err:  # not a MemoryError, not a hang
        _long_calls()[call](ids)
    text = str(err.value)
    assert f"a batch of {n} ids, more than the" in text
    assert len(text) < 400, text


def test_a_long_batch_refused_changes_nothing():
    pool = populated()
    frozen = Frozen(pool)
    for ids in LONG.values():
        with pytest.raises(BadSlotId, match="a batch of"):
            pool.fire(Event.FINISH, ids, R1)
    assert frozen.unchanged()


def test_a_batch_as_long_as_the_pool_is_still_checked_id_by_id():
    ledger = SlotLedger(4)
    with pytest.raises(BadSlotId, match="bad slot id 1 .*named twice"):
        ledger.apply(Event.ADMIT, [1, 1, 2, 3], R1)  # 4 ids, not too long: the duplicate is named
    with pytest.raises(BadSlotId, match="a batch of 5 ids, more than the 4 slots"):
        ledger.apply(Event.ADMIT, [1, 1, 2, 3, 4], R1)  # was: named twice (the pigeonhole)
