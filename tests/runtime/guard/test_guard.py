"""LedgerGuard in front of a plain tensor free list of SGLang's `MambaSlotAllocator` shape.

Without the guard the free list silently takes a double free (8 slots, 9 free) or a `-1`; with
it, each bad engine call raises at the call and the engine's free list is untouched."""

import pytest
import torch

from slotwarden.model.errors import BadInput, BadSlotId, FenceError, IllegalMove
from slotwarden.model.vocabulary import Actor, Event, Slot, State
from slotwarden.runtime.guard import LedgerGuard
from engines import TensorFreeList, Untouched


R1, R2, R3 = Actor.request(1), Actor.request(2), Actor.request(3)
S5 = Actor.session(5)


def guarded(size: int = 8):
    engine = TensorFreeList(size)
    return engine, LedgerGuard(engine, size)


def running(guard: LedgerGuard, n: int, req: Actor) -> torch.Tensor:
    ids = guard.alloc(n, req)
    guard.fire(Event.ADMIT, ids, req)
    return ids


def parked(guard: LedgerGuard, req: Actor = R1, session: int = 5) -> torch.Tensor:
    ids = running(guard, 1, req)
    guard.fire(Event.PARK, ids, req, session)
    return ids


# -- the bug, without the guard ----------------------------------------------------------------
def test_without_the_guard_a_double_free_is_silently_accepted():
    engine = TensorFreeList(8)
    ids = engine.alloc(1)
    engine.free(ids)
    engine.free(ids)  # nothing stops it
    assert engine.available_size() == 9  # 8 slots, 9 free: the real bug
    assert engine.alloc(9) is not None  # and the same slot is handed out twice


def test_without_the_guard_a_sentinel_and_the_pad_slot_are_accepted():
    engine = TensorFreeList(8)
    engine.free(torch.tensor([-1]))  # PR 40044 / 40250
    engine.free(torch.tensor([0]))
    assert engine.available_size() == 10


def test_without_the_guard_a_rollback_frees_a_session_slot_to_another_request():  # PR 21404
    engine = TensorFreeList(2)
    session_slot = engine.alloc(1)  # parked in a session, lent to its turn
    engine.free(session_slot)  # the batch builder's rollback frees it
    assert engine.alloc(2).tolist() == [2, 1]  # ... and it is handed to someone else


# -- the guard raises at the call --------------------------------------------------------------
def test_guard_allocates_through_the_engine_and_records_the_owner():
    engine, guard = guarded()
    ids = guard.alloc(3, R1)
    assert ids.tolist() == [1, 2, 3]
    assert engine.available_size() == 5
    assert guard.ledger.held_by(R1).tolist() == [1, 2, 3]
    assert all(guard.ledger.record(i) == Slot(State.TAKEN, owner=1) for i in (1, 2, 3))


def test_double_finish_raises_and_the_free_list_is_untouched():
    engine, guard = guarded()
    ids = running(guard, 1, R1)
    assert guard.fire(Event.FINISH, ids, R1).tolist() == []  # released: not free before the fence
    frozen = Untouched(engine, guard)
    with pytest.raises(
        IllegalMove,
        match=(
            r"illegal finish by request 1 on slot 1 \(state RELEASED, owner nobody\): finish is not allowed from "
            r"RELEASED"
        ),
    ):
        guard.fire(Event.FINISH, ids, R1)
    frozen.check()
    assert guard.fence().tolist() == [1]
    assert engine.available_size() == 8
    frozen = Untouched(engine, guard)
    with pytest.raises(IllegalMove, match=r"slot 1 \(state FREE, owner nobody\): finish is not allowed from FREE"):
        guard.fire(Event.FINISH, ids, R1)  # once more, after the fence
    frozen.check()
    assert engine.available_size() == 8  # never 9


def test_rollback_after_finish_raises():
    engine, guard = guarded()
    ids = running(guard, 2, R1)
    guard.fire(Event.FINISH, ids, R1)
    frozen = Untouched(engine, guard)
    with pytest.raises(
        IllegalMove,
        match=r"illegal rollback by request 1 on slot 1 \(state RELEASED.*rollback is not allowed from RELEASED",
    ):
        guard.fire(Event.ROLLBACK, ids, R1)
    frozen.check()


def test_rollback_of_an_admitted_request_raises():  # PR 16067
    engine, guard = guarded()
    ids = running(guard, 1, R1)
    frozen = Untouched(engine, guard)
    with pytest.raises(IllegalMove, match=r"rollback is not allowed from RUNNING"):
        guard.fire(Event.ROLLBACK, ids, R1)
    frozen.check()


@pytest.mark.parametrize("event", [Event.FINISH, Event.ABORT, Event.ROLLBACK, Event.RETRACT])
def test_the_engine_freeing_a_parked_session_slot_raises(event):  # PR 21404 -> 23327, 26941
    engine, guard = guarded()
    ids = parked(guard)  # request 1's turn parked its state in session 5: request 1 keeps no handle
    frozen = Untouched(engine, guard)
    with pytest.raises(
        IllegalMove, match=rf"illegal {event.name.lower()} by request 1 on slot 1 \(state PARKED, owner 5\)"
    ):
        guard.fire(event, ids, R1)
    frozen.check()


def test_a_lent_slot_rolled_back_by_its_borrower_goes_back_to_its_session():
    engine, guard = guarded()
    ids = parked(guard)
    guard.fire(Event.LEND, ids, S5, 2)
    frozen = Untouched(engine, guard)
    with pytest.raises(
        IllegalMove,
        match=(
            r"illegal rollback by request 3 on slot 1 \(state LENT, owner 5, lent to request 2\): only the request "
            r"it is lent to"
        ),
    ):
        guard.fire(Event.ROLLBACK, ids, R3)
    with pytest.raises(IllegalMove, match="illegal rollback by request 1 on slot 1"):
        guard.fire(Event.ROLLBACK, ids, R1)  # the turn that parked it has no handle left
    frozen.check()
    back = guard.fire(Event.ROLLBACK, ids, R2)  # legal: the slot returns to the session ...
    assert back.tolist() == []  # ... and nothing reaches the engine's free list
    assert torch.equal(engine.free_slots, frozen.free)
    assert guard.ledger.record(1) == Slot(State.PARKED, owner=5)
    assert guard.fence().tolist() == [] and torch.equal(engine.free_slots, frozen.free)


def test_rollback_of_a_lent_running_slot_raises_and_finish_returns_it_to_the_session():
    engine, guard = guarded()
    ids = parked(guard)
    guard.fire(Event.LEND, ids, S5, 2)
    guard.fire(Event.ADMIT, ids, R2)
    frozen = Untouched(engine, guard)
    with pytest.raises(
        IllegalMove,
        match=(
            r"illegal rollback by request 2 on slot 1 \(state LENT_RUNNING, owner 5, lent to request 2\): rollback "
            r"is not allowed"
        ),
    ):
        guard.fire(Event.ROLLBACK, ids, R2)
    with pytest.raises(IllegalMove, match=r"only a session may fire it"):
        guard.fire(Event.CLOSE, ids, R2)
    with pytest.raises(IllegalMove, match=r"close is not allowed from LENT_RUNNING"):
        guard.fire(Event.CLOSE, ids, S5)  # the session closes while its turn runs
    frozen.check()
    assert guard.fire(Event.FINISH, ids, R2).tolist() == []
    assert guard.ledger.record(1) == Slot(State.PARKED, owner=5)
    assert torch.equal(engine.free_slots, frozen.free)
    guard.fire(Event.CLOSE, ids, S5)  # only the session's close releases it, at the fence
    assert torch.equal(engine.free_slots, frozen.free)
    assert guard.fence().tolist() == [1]
    assert engine.free_slots.tolist()[-1] == 1 and engine.available_size() == 8


@pytest.mark.parametrize(
    "ids, text",
    [
        (torch.tensor([0]), "bad slot id 0 for finish by request 1: slot 0 is the pad slot"),
        (torch.tensor([-1]), "bad slot id -1 for finish by request 1"),
        (torch.tensor([1, -1]), "bad slot id -1"),
        (torch.tensor([9]), "bad slot id 9 for finish by request 1: not a slot of a pool of 8"),
        (torch.tensor([1, 1]), "named twice"),
        (torch.tensor([1.0]), "must be integers"),
        (torch.empty(0, dtype=torch.int64), "an empty batch"),
    ],
)
def test_freeing_the_pad_slot_or_a_sentinel_raises(ids, text):
    engine, guard = guarded()
    running(guard, 2, R1)
    frozen = Untouched(engine, guard)
    with pytest.raises(BadSlotId) as err:
        guard.fire(Event.FINISH, ids, R1)
    assert text in str(err.value)
    frozen.check()


def test_released_slots_reach_the_engine_only_at_the_fence():
    engine, guard = guarded()
    ids = running(guard, 3, R1)
    done = []
    step = guard.launch(lambda: bool(done))
    guard.fire(Event.FINISH, ids[:2], R1)
    assert engine.available_size() == 5
    assert guard.fence().tolist() == []  # the step may still read them
    with pytest.raises(FenceError):
        guard.fence(step)
    with pytest.raises(FenceError, match="fence of step 1"):
        guard.fire(Event.FENCE, ids[:2], Actor.fence(step))
    assert engine.available_size() == 5
    done.append(True)
    assert guard.fence().tolist() == [1, 2]
    assert engine.free_slots.tolist() == [4, 5, 6, 7, 8, 1, 2]


def test_a_candidate_rollback_gives_its_slots_back_at_once():
    engine, guard = guarded()
    ids = guard.alloc(2, R1)
    assert guard.fire(Event.ROLLBACK, ids.flip(0), R1).tolist() == [2, 1]
    assert engine.free_slots.tolist() == [3, 4, 5, 6, 7, 8, 2, 1]


@pytest.mark.parametrize("n", [0, -1, True])
def test_alloc_of_a_bad_count_never_reaches_the_engine(n):
    engine, guard = guarded()
    frozen = Untouched(engine, guard)
    with pytest.raises(BadInput, match="alloc needs a positive count"):
        guard.alloc(n, R1)  # the engine would slice free[:-1] for n = -1
    frozen.check()


def test_alloc_by_a_session_never_reaches_the_engine():
    engine, guard = guarded()
    frozen = Untouched(engine, guard)
    with pytest.raises(IllegalMove, match=r"illegal alloc by session 5 .*only a request may fire it"):
        guard.alloc(1, S5)
    frozen.check()


def test_alloc_beyond_the_engine_returns_none_and_changes_nothing():
    engine, guard = guarded(4)
    guard.alloc(3, R1)
    frozen = Untouched(engine, guard)
    assert guard.alloc(2, R2) is None
    frozen.check()


def test_alloc_by_naming_ids_is_refused():
    engine, guard = guarded()
    frozen = Untouched(engine, guard)
    with pytest.raises(BadSlotId, match="alloc through alloc"):
        guard.fire(Event.ALLOC, torch.tensor([1]), R1)
    frozen.check()


def test_the_guard_catches_a_slot_the_engine_hands_out_twice():
    engine, guard = guarded(4)
    ids = guard.alloc(1, R1)
    engine.free(ids)  # an unguarded path freed request 1's slot behind the guard's back
    guard.alloc(3, R2)
    with pytest.raises(IllegalMove, match=r"illegal alloc by request 3 on slot 1 \(state TAKEN, owner 1\)"):
        guard.alloc(1, R3)
    assert guard.ledger.record(1) == Slot(State.TAKEN, owner=1)
    assert engine.free_slots.tolist() == [1]  # the engine's alloc was undone


def test_a_session_lifecycle_through_the_guard_is_conserved():
    engine, guard = guarded(4)
    slot = parked(guard, R1, 5)
    for turn in (2, 3, 4):
        guard.fire(Event.LEND, slot, S5, turn)
        guard.fire(Event.ROLLBACK, slot, Actor.request(turn))  # did not fit this time
        guard.fire(Event.LEND, slot, S5, turn)
        guard.fire(Event.ADMIT, slot, Actor.request(turn))
        guard.launch()
        guard.fire(Event.FINISH, slot, Actor.request(turn))
        guard.fence()
        assert engine.available_size() == 3
    guard.fire(Event.CLOSE, slot, S5)
    guard.fence()
    assert sorted(engine.free_slots.tolist()) == [1, 2, 3, 4]
    assert guard.ledger.audit(set(), set()).clean


class ShapedWrong(TensorFreeList):
    """An engine whose alloc hands its slots out as something other than a 1-D tensor."""

    def __init__(self, size: int, shape):
        super().__init__(size)
        self.shape = shape

    def alloc(self, n: int):
        ids = super().alloc(n)
        return None if ids is None else self.shape(ids)


@pytest.mark.parametrize(
    "shape", [lambda ids: ids.tolist(), lambda ids: ids.reshape(1, -1)], ids=["a list", "a 2-D tensor"]
)
def test_an_engine_alloc_of_the_wrong_shape_is_refused_typed_and_handed_back(shape):
    """Old code: AttributeError ('numel') for a list, torch's RuntimeError for a 2-D tensor."""
    engine = ShapedWrong(4, shape)
    guard = LedgerGuard(engine, 4)
    before = Untouched(engine, guard)
    with pytest.raises(BadSlotId, match=r"alloc by request 2: the engine's alloc\(2\) gave .*not a 1-D tensor"):
        guard.alloc(2, R2)
    assert sorted(engine.free_slots.tolist()) == sorted(before.free.tolist())  # handed back
    assert guard.ledger.snapshot()["counters"] == before.ledger["counters"]
    assert guard.ledger.audit(set(), set()).clean


def test_an_engine_alloc_that_cannot_be_handed_back_is_still_refused_typed():
    engine = ShapedWrong(4, lambda ids: "slots")
    guard = LedgerGuard(engine, 4)
    with pytest.raises(BadSlotId, match="not a 1-D tensor") as caught:
        guard.alloc(1, R2)
    assert caught.value.__cause__ is not None  # the engine's own failure, chained


@pytest.mark.parametrize("call", [lambda p: p.alloc(1, None), lambda p: p.fire(Event.FINISH, [1], None)])
def test_a_fresh_pools_first_call_by_no_actor_is_refused_typed(call):
    from slotwarden.model.errors import BadActor
    from slotwarden.runtime.config import PoolConfig
    from slotwarden.runtime.pool import StatePool

    pool = StatePool(PoolConfig(num_slots=4, layers=1, conv_dims=(4,), heads=1, head_dim=2, state_size=2))
    with pytest.raises(BadActor, match="bad actor None"):
        call(pool)
    assert pool.available() == 4
