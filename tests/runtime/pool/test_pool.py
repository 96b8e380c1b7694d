"""StatePool: tensors, zeroed allocation, copy/fork, queries, audit and the flight recorder (bad
input: test_bad_input.py)."""

import pytest
import torch

from slotwarden.model.errors import BadInput, BadSlotId, IllegalCopy, IllegalMove
from slotwarden.model.vocabulary import Actor, ActorKind, Event, Group, Slot, State
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool
from pools import CFG, Frozen, dirty, populated

R1, R2, R7 = Actor.request(1), Actor.request(2), Actor.request(7)
S5, S6 = Actor.session(5), Actor.session(6)


# -- tensors ---------------------------------------------------------------------------------
def test_tensors_have_the_configured_shapes_and_dtypes():
    pool = StatePool(CFG)
    assert [tuple(t.shape) for t in pool.conv] == [(2, 9, 6, 3), (2, 9, 3, 3)]
    assert tuple(pool.ssm.shape) == (2, 9, 2, 3, 5)
    assert all(t.dtype is torch.bfloat16 for t in pool.conv)
    assert pool.ssm.dtype is torch.float32
    assert all(t.device.type == "cpu" for t in pool.tensors)
    assert all(int(t.count_nonzero()) == 0 for t in pool.tensors)
    assert pool.capacity == 8 and pool.available() == 8


def test_dtypes_follow_the_config():
    cfg = PoolConfig(
        num_slots=2,
        layers=1,
        conv_dims=(4,),
        heads=1,
        head_dim=2,
        state_size=2,
        conv_dtype=torch.float16,
        ssm_dtype=torch.bfloat16,
    )
    pool = StatePool(cfg)
    assert pool.conv[0].dtype is torch.float16 and pool.ssm.dtype is torch.bfloat16


# -- alloc -----------------------------------------------------------------------------------
def test_alloc_zeroes_exactly_the_slots_it_hands_out():
    pool = StatePool(CFG)
    dirty(pool)
    before = [t.clone() for t in pool.tensors]
    ids = pool.alloc(3, R1)
    assert isinstance(ids, torch.Tensor) and ids.dtype is torch.int64
    assert ids.tolist() == [1, 2, 3]
    for b, t in zip(before, pool.tensors):
        assert int(t[:, 1:4].count_nonzero()) == 0
        assert torch.equal(t[:, 4:], b[:, 4:])  # other slots keep their state
        assert torch.equal(t[:, 0], b[:, 0])  # the pad slot is never touched
    assert pool.state_of(ids) == [State.TAKEN] * 3
    assert all(pool.ledger.record(i) == Slot(State.TAKEN, owner=1) for i in (1, 2, 3))


def test_a_reused_slot_is_zeroed_again():
    pool = StatePool(CFG)
    ids = pool.alloc(8, R1)
    pool.rollback(ids[5:], R1)
    dirty(pool, seed=1)
    again = pool.alloc(2, R2)
    assert again.tolist() == [6, 7]
    for t in pool.tensors:
        assert int(t[:, 6:8].count_nonzero()) == 0 and int(t[:, 8].count_nonzero()) > 0


def test_alloc_beyond_capacity_returns_none_and_changes_nothing():
    pool = populated()
    frozen = Frozen(pool)
    assert pool.available() == 2
    assert pool.alloc(3, R2) is None
    assert pool.alloc(100, R2) is None
    assert frozen.unchanged()
    assert pool.alloc(2, R2).tolist() == [7, 8]
    assert pool.alloc(1, R2) is None


@pytest.mark.parametrize("n", [0, -1, True, 1.5, "2", None])
def test_alloc_of_a_bad_count_raises_and_changes_nothing(n):
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(BadInput, match=r"bad count .* for alloc by request 2: alloc needs a positive count"):
        pool.alloc(n, R2)
    assert frozen.unchanged()


def test_alloc_by_a_session_raises_and_changes_nothing():
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(
        IllegalMove, match=r"illegal alloc by session 5 on slot 7 \(state FREE, owner nobody\): only a request"
    ):
        pool.alloc(1, S5)
    assert frozen.unchanged()


# -- copy and fork ---------------------------------------------------------------------------
def test_copy_copies_state_between_slots_the_actor_holds():
    pool = populated()
    before = [t.clone() for t in pool.tensors]
    pool.copy(torch.tensor([1]), torch.tensor([3]), R1)
    for b, t in zip(before, pool.tensors):
        assert torch.equal(t[:, 3], b[:, 1])
        assert torch.equal(t[:, 1], b[:, 1]) and torch.equal(t[:, 2], b[:, 2])
    # from a borrowed slot into a slot of the borrower's own, and back into the borrowed slot
    seven = pool.alloc(1, R7).tolist()
    pool.copy([5], seven, R7)
    pool.copy(seven, [5], R7)
    for b, t in zip(before, pool.tensors):
        assert torch.equal(t[:, 7], b[:, 5]) and torch.equal(t[:, 5], b[:, 5])


@pytest.mark.parametrize(
    "src, dst, actor, error, text",
    [
        (
            [7],
            [1],
            R1,
            IllegalCopy,
            r"illegal copy by request 1 with slot 7 \(state FREE, owner nobody\): a slot that nobody holds cannot be "
            r"copied from",
        ),
        ([6], [1], R1, IllegalCopy, r"slot 6 \(state RELEASED, owner nobody\): a slot that nobody holds"),
        (
            [1],
            [4],
            R1,
            IllegalCopy,
            r"illegal copy by request 1 with slot 4 \(state PARKED, owner 5\): copy into a slot request 1 does not "
            r"hold",
        ),
        ([1], [7], R1, IllegalCopy, r"slot 7 \(state FREE, owner nobody\): copy into a slot"),
        ([4], [2], S5, IllegalCopy, r"slot 2 \(state RUNNING, owner 1\): copy into a slot session 5 does not hold"),
        ([1, 2], [3], R1, BadSlotId, r"copy of 2 slots into 1"),
        ([1, 2], [2, 3], R1, BadSlotId, r"bad slot id 2 for copy by request 1: copy source and destination overlap"),
        ([0], [1], R1, BadSlotId, r"bad slot id 0 for copy by request 1: slot 0 is the pad slot"),
        ([1], [-1], R1, BadSlotId, r"bad slot id -1 for copy"),
        ([1], [3, 3], R1, BadSlotId, r"named twice"),
        ([], [], R1, BadSlotId, r"an empty batch"),
    ],
)
def test_copy_refuses_and_changes_nothing(src, dst, actor, error, text):
    pool = populated()
    frozen = Frozen(pool)
    with pytest.raises(error, match=text):
        pool.copy(src, dst, actor)
    assert frozen.unchanged()


def test_fork_gives_a_new_slot_with_a_copy_of_the_state():
    pool = populated()
    before = [t.clone() for t in pool.tensors]
    ids = pool.fork(5, R7)  # copy-on-write from the session prefix lent to request 7
    assert ids.tolist() == [7]
    assert pool.ledger.record(7) == Slot(State.TAKEN, owner=7)
    assert pool.ledger.record(5) == Slot(State.LENT, owner=6, borrower=7)
    assert pool.fork(2, R1).tolist() == [8]  # from a running slot of its own
    for b, t in zip(before, pool.tensors):
        assert torch.equal(t[:, 7], b[:, 5]) and torch.equal(t[:, 5], b[:, 5])
        assert torch.equal(t[:, 8], b[:, 2])


# Whose state may be read: a slot the actor holds (owns, or borrows), never another's.
FOREIGN = {
    "another request's running slot": (2, R2, "request 2 does not hold slot 2 \\(held by request 1\\)"),
    "another session's parked slot": (4, R1, "request 1 does not hold slot 4 \\(held by session 5\\)"),
    "another session's parked slot, by a session": (4, S6, "session 6 does not hold slot 4 \\(held by session 5\\)"),
    "a slot lent to another request": (
        5,
        R2,
        "request 2 does not hold slot 5 \\(held by session 6, lent to request 7\\)",
    ),
}


@pytest.mark.parametrize("name", FOREIGN)
def test_copy_and_fork_refuse_to_read_another_actors_slot(name):
    """Fails on a pool that reads any held slot: another request's or session's state is not
    the actor's to read (a cross-request leak of recurrent state)."""
    src, actor, text = FOREIGN[name]
    pool = populated()
    own = pool.alloc(1, actor).tolist() if actor.kind is ActorKind.REQUEST else [5]  # session 6's lent slot
    frozen = Frozen(pool)
    with pytest.raises(IllegalCopy, match=rf"slot {src} \(state .*\): {text}: it cannot be copied from") as err:
        pool.copy([src], own, actor)
    assert (err.value.slot_id, err.value.actor) == (src, actor)
    assert frozen.unchanged()
    if actor.kind is ActorKind.REQUEST:
        with pytest.raises(IllegalCopy, match=rf"{text}: it cannot be forked"):
            pool.fork(src, actor)
        assert frozen.unchanged()  # nothing allocated


def test_fork_refuses_a_slot_nobody_holds_and_returns_none_when_full():
    pool = populated()
    frozen = Frozen(pool)
    for src in (7, 6):
        with pytest.raises(IllegalCopy, match=rf"slot {src} .*a slot that nobody holds cannot be forked"):
            pool.fork(src, R2)
    for src in (0, -1, 9):
        with pytest.raises(BadSlotId, match=rf"bad slot id {src}"):
            pool.fork(src, R2)
    with pytest.raises(IllegalMove, match="only a request may fire it"):
        pool.fork(4, S5)  # its own parked slot: readable, but a session allocates nothing
    assert frozen.unchanged()
    pool.alloc(2, R2)
    frozen = Frozen(pool)
    assert pool.fork(7, R2) is None
    assert frozen.unchanged()


# -- queries ---------------------------------------------------------------------------------
def test_queries():
    pool = populated()
    assert pool.available() == 2
    assert pool.held_by(R1).tolist() == [1, 2, 3]
    assert pool.held_by(S5).tolist() == [4]
    assert pool.held_by(S6).tolist() == [5]
    assert pool.held_by(R7).tolist() == [5]  # borrowed
    assert pool.held_by(R2).tolist() == []  # handed over at park: no stale handle
    assert pool.held_by(Actor.request(4)).tolist() == []
    assert pool.state_of([1, 4, 5, 6, 7]) == [State.RUNNING, State.PARKED, State.LENT, State.RELEASED, State.FREE]
    assert pool.state_of(torch.tensor([8])) == [State.FREE]
    assert pool.ledger.record(5) == Slot(State.LENT, owner=6, borrower=7)
    assert pool.ledger.record(6) == Slot(State.RELEASED, fence=1)
    assert pool.ledger.free_list().tolist() == [7, 8]


def test_audit_conservation_and_leaks():
    pool = populated()
    audit = pool.audit()
    assert audit.counts == {
        Group.FREE: 2,
        Group.BATCH_OWNED: 3,
        Group.SESSION_OWNED: 2,
        Group.RELEASED: 1,
        Group.CACHE_OWNED: 0,
    }
    assert sum(audit.counts.values()) == pool.capacity
    assert audit.free_list_ok and not audit.problems and not audit.leaks and audit.clean
    assert pool.audit(live_requests={1, 7}, live_sessions={5, 6}).clean
    # request 1 vanished without finishing; session 6's turn (request 7) vanished too
    audit = pool.audit(live_requests=set(), live_sessions={5, 6})
    leaks = {leak.slot: leak for leak in audit.leaks}
    assert sorted(leaks) == [1, 2, 3, 5]
    assert (leaks[1].state, leaks[1].owner, leaks[1].last_event) == (State.RUNNING, 1, Event.ADMIT)
    assert "alloc by request 1" in leaks[1].history and "admit by request 1" in leaks[1].history
    assert (leaks[5].state, leaks[5].owner, leaks[5].borrower, leaks[5].last_event) == (State.LENT, 6, 7, Event.LEND)
    assert "lend by session 6 -> 7" in leaks[5].history
    audit = pool.audit(live_requests={1, 7}, live_sessions={6})
    assert [(leak.slot, leak.owner, leak.last_event) for leak in audit.leaks] == [(4, 5, Event.PARK)]


def test_audit_flags_a_release_whose_fence_has_passed():
    pool = populated()
    pool.ledger._pending[1] = lambda: True
    pool.fence()  # frees slot 6
    pool.finish([1], R1)  # released at epoch 1, which is already fenced
    audit = pool.audit()
    assert [(leak.slot, leak.state, leak.last_event) for leak in audit.leaks] == [(1, State.RELEASED, Event.FINISH)]


def test_full_lifecycle_returns_to_quiescence():
    pool = populated()
    pool.finish([1, 2, 3], R1)
    pool.rollback([5], R7)  # the lent slot goes back to its session
    pool.close(S5)
    pool.close(S6)
    pool.ledger._pending[1] = lambda: True
    pool.launch()
    assert pool.fence().tolist() == [1, 2, 3, 4, 5, 6]
    assert pool.available() == 8 and pool.audit(set(), set()).clean
    assert pool.ledger.free_list().tolist() == [7, 8, 1, 2, 3, 4, 5, 6]
    assert pool.close(S5).tolist() == []


def test_the_error_message_carries_the_slots_history():
    pool = populated()
    with pytest.raises(IllegalMove) as err:
        pool.finish([5], Actor.request(3))  # request 3 parked slot 5 into session 6: no handle left
    text = str(err.value)
    assert text.startswith("illegal finish by request 3 on slot 5 (state LENT, owner 6, lent to request 7): ")
    assert "only the request it is lent to may finish a LENT slot" in text or "not allowed" in text
    history = text.split("\n", 1)[1]
    assert history.startswith("  slot 5: ")
    steps = history.split("; ")
    assert "alloc by request 3: FREE -> TAKEN" in steps[0]
    assert "admit by request 3: TAKEN -> RUNNING" in steps[1]
    assert "park by request 3 -> 6: RUNNING -> PARKED" in steps[2]
    assert "lend by session 6 -> 7: PARKED -> LENT" in steps[3]
    err = err.value
    assert (err.slot_id, err.event, err.actor) == (5, Event.FINISH, Actor.request(3))
    assert err.slot == Slot(State.LENT, owner=6, borrower=7)
    assert [m.event for m in pool.history(5)] == [Event.ALLOC, Event.ADMIT, Event.PARK, Event.LEND]
