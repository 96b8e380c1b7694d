"""The ledger at its edges: the last step its fence column can hold, a corrupt record moved by
each write path, the actor named by a refused id of a multi-actor batch, and a multi-actor batch
on the per-slot path. Each test also shows its check failing on a broken variant."""

from __future__ import annotations

import numpy as np
import pytest
from slotwarden.runtime.ledger import transition
from slotwarden.runtime.ledger.transition import Columns, as_lists, compile_events, look_up, look_up_mixed, slot_views
from slotwarden.runtime.ledger.transition import look_up_slots, write, write_slots
from slotwarden.model.errors import BadActor, BadSlotId, FenceError
from slotwarden.model.vocabulary import NOBODY, Actor, Event, State
from slotwarden.runtime.ledger import slots as ledger_slots
from slotwarden.runtime.ledger.ledger import STEP_MAX, SlotLedger


# -- the fence counter: launch refuses before a step would not fit the int32 fence column -----
class Wrapping(SlotLedger):
    """Broken variant: `launch` without the limit (the fence column then cannot hold the step)."""

    def launch(self, done=None):
        self.check_thread()
        self.launched += 1
        self._pending[self.launched] = done or (lambda: True)
        return self.launched


def near_the_limit(cls) -> tuple[SlotLedger, Actor, np.ndarray]:
    ledger = cls(4)
    ledger.launched = ledger.completed = STEP_MAX - 1
    r = Actor.request(1)
    ids = ledger.alloc(2, r)
    ledger.apply(Event.ADMIT, ids, r)
    return ledger, r, ids


def test_launch_refuses_the_step_past_the_fence_columns_range():
    ledger, r, ids = near_the_limit(SlotLedger)
    assert ledger.launch() == STEP_MAX  # the last step that fits
    before = ledger.snapshot()
    with pytest.raises(FenceError, match="no further step"):
        ledger.launch()
    assert ledger.launched == STEP_MAX and ledger.snapshot()["counters"] == before["counters"]
    ledger.apply(Event.FINISH, ids, r)  # releases still name a step that fits
    assert ledger.cols.fence[ids].tolist() == [STEP_MAX] * 2
    assert ledger.fence(STEP_MAX).tolist() == ids.tolist()
    assert ledger.audit().clean


def test_without_the_limit_a_release_is_half_written():
    """What the refusal prevents: past 2**31 - 1 a FINISH raises while it writes (the fence does
    not fit), after the owner was cleared: the batch is no longer all or nothing."""
    ledger, r, ids = near_the_limit(Wrapping)
    ledger.launch()
    ledger.launch()  # not refused
    before = ledger.snapshot()
    with pytest.raises((OverflowError, ValueError)):  # numpy or a memoryview refuses the value
        ledger.apply(Event.FINISH, ids, r)
    assert ledger.cols.owner[ids].tolist() != before["owner"][ids].tolist()  # written in part


# -- a corrupt record: every write path leaves the stray field alike --------------------------
def corrupt_columns() -> Columns:
    """Slots 1-3 RELEASED (fence 1), slot 4 CACHING (fence 1, cache node 7); slots 1 and 4 hold
    a stray borrower, slot 2 a stray owner (fields those states hold clear)."""
    n = 5
    cols = Columns(
        np.array([0, 6, 6, 6, 7], dtype=np.uint8),
        np.array([NOBODY, NOBODY, 9, NOBODY, 7], dtype=np.int64),
        np.array([NOBODY, 3, NOBODY, NOBODY, 3], dtype=np.int64),
        np.array([0, 1, 1, 1, 1], dtype=np.int32),
        np.zeros(n, dtype=np.uint8),
        np.zeros(n, dtype=np.uint8),
    )
    assert State(int(cols.state[1])) is State.RELEASED and State(int(cols.state[4])) is State.CACHING
    return cols


def fenced_three_ways(ids: np.ndarray) -> list[Columns]:
    """The FENCE of step 1 on `ids`, written by the uniform form (one key, where the batch is
    uniform), the key-per-slot form and the per-slot path, each on its own copy."""
    table = compile_events()[Event.FENCE]
    out = []
    for path in ("uniform", "key per slot", "per slot"):
        cols = Columns(*(c.copy() for c in corrupt_columns()[:6]))
        if path == "per slot":
            mv, lists = slot_views(cols), as_lists(table)
            keys, _, after = look_up_slots(mv, lists, ids.tolist(), [1] * ids.size)
            write_slots(mv, lists, ids.tolist(), keys, after, Event.FENCE, [1] * ids.size, NOBODY, 1)
        else:
            batch = (look_up if path == "uniform" else look_up_mixed)(cols, table, ids, 1)
            write(cols, table, batch, Event.FENCE, 1, NOBODY, 1)
        out.append(cols)
    return out


@pytest.mark.parametrize("ids", [[1, 2, 3], [1, 2, 3, 4]], ids=["uniform batch", "mixed batch"])
def test_every_write_path_treats_a_corrupt_record_alike(ids):
    uniform, per_key, per_slot = fenced_three_ways(np.array(ids, dtype=np.int64))
    for name in Columns._fields[:6]:
        a, b, c = (getattr(x, name).tolist() for x in (uniform, per_key, per_slot))
        assert a == b == c, f"{name}: uniform {a}, key per slot {b}, per slot {c}"
    assert uniform.borrower[1] == 3 and uniform.owner[2] == 9  # left for the audit to report
    want = [int(State.FREE)] * 3 + [int(State.CACHED) if 4 in ids else int(State.CACHING)]
    assert uniform.state.tolist()[1:] == want


def test_a_key_per_slot_form_that_clears_again_is_caught(monkeypatch):
    """Broken variant: the key-per-slot form writes the table's raw CLEARs (as it did), so it
    wipes the stray fields the other two leave."""
    raw = lambda table: (table.owner_from, table.borrower_from, table.fence_from, table.readers_from)  # noqa: E731
    monkeypatch.setattr(transition, "sources_of", raw)
    uniform, per_key, _ = fenced_three_ways(np.array([1, 2, 3], dtype=np.int64))
    assert uniform.borrower.tolist() != per_key.borrower.tolist()


def test_the_ledger_audit_reports_the_stray_field_whichever_path_moved_it():
    for small in (0, 8):
        ledger = SlotLedger(4)
        ledger.small = small
        r = Actor.request(1)
        ids = ledger.alloc(2, r)
        ledger.apply(Event.ADMIT, ids, r)
        ledger.apply(Event.FINISH, ids, r)
        ledger.cols.owner[ids[0]] = 5  # corrupt: a RELEASED slot names an owner
        ledger.launch()
        ledger.fence()
        assert ledger.cols.owner[ids].tolist() == [5, NOBODY]
        assert any("owner field" in p for p in ledger.audit().problems)


# -- a refused id of a multi-actor batch names its actor --------------------------------------
class Anonymous(SlotLedger):
    """Broken variant: the ids checked before the actors are known (the refusal names none)."""

    def apply_each(self, event, ids, actor_ids, before_write=None):
        self._ids(ids, event, None)
        return super().apply_each(event, ids, actor_ids, before_write)


@pytest.mark.parametrize("cls", [SlotLedger, Anonymous])
@pytest.mark.parametrize("small", [0, 8])
@pytest.mark.parametrize("bad", [[1, 0, 2], [1, 9, 2], [1, 2, 2]], ids=["pad slot", "past the capacity", "twice"])
def test_a_bad_id_of_a_multi_actor_batch_names_its_actor(cls, small, bad):
    ledger = cls(4)
    ledger.small = small
    with pytest.raises(BadSlotId) as err:
        ledger.apply_each(Event.FINISH, np.array(bad, dtype=np.int64), [10, 11, 12])
    named = err.value.actor
    if cls is Anonymous:
        assert named is None  # what the check below rejects
        return
    assert named == Actor.request(11) and err.value.slot_id == bad[1]
    assert "request 11" in str(err.value) or "11" in str(err.value)


# -- a multi-actor batch of a few slots takes the per-slot path ------------------------------
def test_a_few_slots_each_by_its_own_actor_go_a_slot_at_a_time(monkeypatch):
    """`apply_each` of up to `small` slots is moved by the per-slot path (it took the vectorised
    one for every size: its actors were compared as one actor's kind); the results agree."""
    calls = []
    real = ledger_slots.write_slots
    monkeypatch.setattr(ledger_slots, "write_slots", lambda *a: calls.append(len(a[2])) or real(*a))
    results = []
    for small in (8, 0):
        ledger = SlotLedger(6)
        ledger.small = small
        rs = [Actor.request(i) for i in (4, 5, 6)]
        ids = [int(ledger.alloc(1, r)[0]) for r in rs]
        calls.clear()
        ledger.apply_each(Event.ADMIT, np.array(ids), [4, 5, 6])
        results.append((calls[:], ledger.state_of(ids).tolist(), ledger.cols.owner.tolist()))
    assert results[0][0] == [3] and results[1][0] == []  # per slot, then vectorised
    assert results[0][1:] == results[1][1:]


# -- the first call: the cached "actor checked last" never lets a non-actor through ----------
class TrustsNone(SlotLedger):
    """Broken variant: the cache of the actor checked last starts as None, so a first call by
    `None` passes as that actor (it then fails deep inside, untyped, or writes an owner None)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._actor = None


@pytest.mark.parametrize("event", [Event.ADMIT, Event.FINISH, Event.ABORT])
def test_a_fresh_ledgers_first_call_by_no_actor_is_refused_typed(event):
    for cls, typed in ((SlotLedger, True), (TrustsNone, False)):
        ledger = cls(4)
        before = (ledger.record(1), ledger.available())
        with pytest.raises(Exception) as caught:
            ledger.apply(event, [1], None)
        assert (caught.type is BadActor) is typed, (cls.__name__, caught.value)
        if typed:
            assert (ledger.record(1), ledger.available()) == before
    with pytest.raises(BadActor):
        SlotLedger(4).alloc(1, None)
