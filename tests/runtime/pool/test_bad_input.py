"""StatePool: bad input raises a typed error and leaves the pool exactly as it was (every ledger
column and every state tensor), and a batch with one illegal slot moves none of the others."""

import numpy as np
import pytest
import torch

from slotwarden.model.errors import BadSlotId, IllegalMove, LifecycleError
from slotwarden.model.vocabulary import Actor, Event, Slot, State
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool
from pools import Frozen, populated

R1, R2, R7 = Actor.request(1), Actor.request(2), Actor.request(7)
S5, S6 = Actor.session(5), Actor.session(6)


# -- bad input: typed errors, and nothing changes ----------------------------------------------
BAD = [
    # (name, call, error type, text the message must hold)
    (
        "out of range",
        lambda p: p.finish([9], R1),
        BadSlotId,
        "bad slot id 9 for finish by request 1: not a slot of a pool of 8",
    ),
    (
        "far out of range",
        lambda p: p.finish(torch.tensor([1, 2, 1000]), R1),
        BadSlotId,
        "bad slot id 1000 for finish by request 1",
    ),
    (
        "pad slot",
        lambda p: p.finish([0], R1),
        BadSlotId,
        "bad slot id 0 for finish by request 1: slot 0 is the pad slot",
    ),
    ("pad slot in a batch", lambda p: p.finish([1, 0, 2], R1), BadSlotId, "bad slot id 0 for finish"),
    ("negative", lambda p: p.finish([-3], R1), BadSlotId, "bad slot id -3 for finish by request 1"),
    ("sentinel", lambda p: p.finish(torch.tensor([1, -1]), R1), BadSlotId, "bad slot id -1 for finish by request 1"),
    ("sentinel rollback", lambda p: p.rollback([-1], R7), BadSlotId, "bad slot id -1 for rollback by request 7"),
    (
        "float tensor",
        lambda p: p.finish(torch.tensor([1.0]), R1),
        BadSlotId,
        "slot ids must be integers, not torch.float32",
    ),
    ("list of floats", lambda p: p.finish([1.0, 2.0], R1), BadSlotId, "slot ids must be integers, not float64"),
    (
        "bool tensor",
        lambda p: p.finish(torch.tensor([True, False]), R1),
        BadSlotId,
        "slot ids must be integers, not torch.bool",
    ),
    ("bool list", lambda p: p.finish([True], R1), BadSlotId, "must be integers"),
    ("strings", lambda p: p.finish(["1"], R1), BadSlotId, "must be integers"),
    (
        "empty list",
        lambda p: p.finish([], R1),
        BadSlotId,
        "bad batch of slot ids for finish by request 1: an empty batch",
    ),
    ("empty tensor", lambda p: p.finish(torch.empty(0, dtype=torch.int64), R1), BadSlotId, "an empty batch"),
    (
        "duplicates",
        lambda p: p.finish([1, 2, 1], R1),
        BadSlotId,
        "bad slot id 1 for finish by request 1: named twice in one batch",
    ),
    ("duplicates beyond capacity", lambda p: p.finish([1] * 20, R1), BadSlotId, "named twice in one batch"),
    (
        "session fires finish",
        lambda p: p.fire(Event.FINISH, [1], S5),
        IllegalMove,
        "illegal finish by session 5 on slot 1 (state RUNNING, owner 1): only a request may fire it",
    ),
    (
        "request fires close",
        lambda p: p.fire(Event.CLOSE, [4], Actor.request(5)),
        IllegalMove,
        "illegal close by request 5 on slot 4 (state PARKED, owner 5): only a session may fire it",
    ),
    (
        "request fires a fence",
        lambda p: p.fire(Event.FENCE, [6], R1),
        IllegalMove,
        "illegal fence by request 1 on slot 6",
    ),
    (
        "wrong owner",
        lambda p: p.finish([1], R2),
        IllegalMove,
        "illegal finish by request 2 on slot 1 (state RUNNING, owner 1): only its owner may finish a RUNNING slot",
    ),
    (
        "not the borrower",
        lambda p: p.rollback([5], R2),
        IllegalMove,
        "illegal rollback by request 2 on slot 5 (state LENT, owner 6, lent to request 7): only the request it is "
        "lent to may rollback",
    ),
    (
        "lend without target",
        lambda p: p.fire(Event.LEND, [4], S5),
        IllegalMove,
        "illegal lend by session 5 on slot 4 (state PARKED, owner 5): it needs the request it is for",
    ),
    ("lend to the sentinel", lambda p: p.lend([4], S5, -1), IllegalMove, "it needs the request it is for"),
    ("park without target", lambda p: p.fire(Event.PARK, [1], R1), IllegalMove, "it needs the session it is for"),
    (
        "lend by another session",
        lambda p: p.lend([4], S6, 2),
        IllegalMove,
        "illegal lend by session 6 on slot 4 (state PARKED, owner 5)",
    ),
    (
        "double finish",
        lambda p: p.finish([6], Actor.request(4)),
        IllegalMove,
        "illegal finish by request 4 on slot 6 (state RELEASED, owner nobody): finish is not allowed from RELEASED",
    ),
    (
        "finish a free slot",
        lambda p: p.finish([7], R1),
        IllegalMove,
        "slot 7 (state FREE, owner nobody): finish is not allowed from FREE",
    ),
    ("rollback a running slot", lambda p: p.rollback([1], R1), IllegalMove, "rollback is not allowed from RUNNING"),
    (
        "close with a turn in flight",
        lambda p: p.close(S6),
        IllegalMove,
        "illegal close by session 6 on slot 5 (state LENT, owner 6, lent to request 7): close is not allowed from LENT",
    ),
    (
        "one illegal slot in a batch",
        lambda p: p.finish([1, 2, 7, 3], R1),
        IllegalMove,
        "illegal finish by request 1 on slot 7 (state FREE",
    ),
    ("alloc named by id", lambda p: p.fire(Event.ALLOC, [7], R1), BadSlotId, "alloc takes a count here"),
    ("early fence event", lambda p: p.fire(Event.FENCE, [6], Actor.fence(1)), LifecycleError, "fence of step 1"),
]


@pytest.mark.parametrize("call, error, text", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_raises_typed_and_leaves_the_pool_exactly_as_it_was(call, error, text):
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(error) as err:
        call(pool)
    assert text in str(err.value)
    assert isinstance(err.value, LifecycleError)
    assert frozen.unchanged()
    assert pool.audit().clean


def test_a_batch_with_one_illegal_slot_moves_none_of_the_others():
    pool = populated()
    with pytest.raises(IllegalMove, match="slot 7"):
        pool.finish([1, 2, 7], R1)
    assert pool.state_of([1, 2, 3]) == [State.RUNNING] * 3
    with pytest.raises(IllegalMove, match=r"slot 5 .*\(and 1 more slots in this batch\)"):
        pool.fire(Event.CLOSE, [4, 5, 8], S5)  # 5 is session 6's (and lent), 8 is free
    assert pool.ledger.record(4) == Slot(State.PARKED, owner=5)
    # the same batch without the bad slot goes through
    assert pool.finish([1, 2], R1).tolist() == [1, 2]
    assert pool.state_of([1, 2, 3]) == [State.RELEASED, State.RELEASED, State.RUNNING]


def test_ids_may_be_any_integer_array_like():
    pool = populated()
    pool.admit(pool.alloc(1, R2), R2)  # slot 7
    pool.finish(np.array([7], dtype=np.int32), R2)
    pool.finish(torch.tensor([3, 1], dtype=torch.int32), R1)
    pool.finish((2,), R1)
    assert pool.state_of([1, 2, 3, 7]) == [State.RELEASED] * 4


@pytest.mark.gpu
def test_ids_on_the_device_are_checked_like_host_ids():
    cfg = PoolConfig(num_slots=4, layers=1, conv_dims=(4,), heads=1, head_dim=2, state_size=2, device="cuda")
    pool = StatePool(cfg)
    ids = pool.alloc(2, R1)
    frozen = Frozen(pool)
    with pytest.raises(BadSlotId, match="pad slot"):
        pool.admit(torch.tensor([1, 0], device="cuda"), R1)
    with pytest.raises(IllegalMove):
        pool.finish(ids.cuda(), R1)
    assert frozen.unchanged()
    pool.admit(ids.cuda(), R1)
    assert pool.state_of(ids) == [State.RUNNING] * 2
