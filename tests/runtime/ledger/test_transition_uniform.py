"""The vectorised kernel's shortcut for a uniform batch (one state, one relation to its actor:
one key, scalar scatters, no clearing of a field the state holds clear) against its key-per-slot
form, on arbitrary well-formed columns: keys that select
the same moves, the same states before and after, and the same columns once written, for one
actor and for one actor per slot."""

from __future__ import annotations

import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from slotwarden.runtime.ledger import transition
from slotwarden.runtime.ledger.transition import Columns, compile_events, expand, look_up, look_up_mixed, write
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.table import ILLEGAL
from slotwarden.model.vocabulary import MAX_READERS, NOBODY, Event, State

CAP = 6
people = st.sampled_from([NOBODY, 0, 1, 2])


@st.composite
def cases(draw):
    n = CAP + 1
    # few distinct values, so that uniform batches are common and mixed ones too
    cols = Columns(
        np.array(draw(st.lists(st.sampled_from(list(State)), min_size=n, max_size=n)), dtype=np.uint8),
        np.array(draw(st.lists(people, min_size=n, max_size=n)), dtype=np.int64),
        np.array(draw(st.lists(people, min_size=n, max_size=n)), dtype=np.int64),
        np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int32),
        np.zeros(n, dtype=np.uint8),
        np.array(draw(st.lists(st.sampled_from([0, 1, MAX_READERS]), min_size=n, max_size=n)), dtype=np.uint8),
    )
    for slot in range(n):  # well-formed records: a field the state does not use is clear
        spec = LIFECYCLE.spec(State(int(cols.state[slot])))
        if spec.owner is None:
            cols.owner[slot] = NOBODY
        if not spec.lent:
            cols.borrower[slot] = NOBODY
        if not spec.fenced:
            cols.fence[slot] = 0
        if not spec.shared:
            cols.readers[slot] = 0
    ids = np.array(draw(st.lists(st.integers(1, CAP), min_size=1, max_size=CAP, unique=True)), dtype=np.int64)
    event = draw(st.sampled_from(list(Event)))
    if draw(st.booleans()):
        actor = draw(st.integers(0, 3))
    else:
        actor = np.array(draw(st.lists(st.integers(0, 2), min_size=ids.size, max_size=ids.size)), dtype=np.int64)
    return (fuse(cols) if draw(st.booleans()) else cols), ids, event, actor


def copy(cols: Columns) -> Columns:
    """A deep copy; fused columns (state and last event in one 16-bit word, as the ledger keeps
    them) stay fused."""
    if cols.code is None:
        return Columns(*(c.copy() for c in cols[:6]))
    code = cols.code.copy()
    pair = code.view(np.uint8).reshape(-1, 2)
    low = cols.state.__array_interface__["data"][0] - cols.code.__array_interface__["data"][0]  # the state's byte
    rest = Columns(*(c.copy() for c in cols[:6]))
    return rest._replace(state=pair[:, low], last_event=pair[:, 1 - low], code=code)


def fuse(cols: Columns, swapped: bool = False) -> Columns:
    """`cols` with state and last event moved into the two bytes of one 16-bit word (`swapped`:
    each in the other's byte, a layout the fused scatter does not expect)."""
    code = np.zeros(cols.state.size, dtype=np.uint16)
    low = (0 if sys.byteorder == "little" else 1) ^ swapped
    pair = code.view(np.uint8).reshape(-1, 2)
    pair[:, low], pair[:, 1 - low] = cols.state, cols.last_event
    return cols._replace(state=pair[:, low], last_event=pair[:, 1 - low], code=code)


def agree(cols, ids, event, actor) -> str | None:
    """Where the uniform form and the key-per-slot form differ (None: nowhere)."""
    table = compile_events()[event]
    got, want = expand(look_up(cols, table, ids, actor)), look_up_mixed(cols, table, ids, actor)
    for field in ("before", "after"):
        if getattr(got, field).tolist() != getattr(want, field).tolist():
            return f"{field}: {getattr(got, field).tolist()} != {getattr(want, field).tolist()}"
    # keys may differ in a bit that cannot change the outcome at that state: compare what they select
    rows = np.stack(table[:5])
    if rows[:, got.key].tolist() != rows[:, want.key].tolist():
        return f"key: {got.key.tolist()} and {want.key.tolist()} select different moves"
    if (want.after == ILLEGAL).any():
        return None
    a, b = copy(cols), copy(cols)
    write(a, table, look_up(a, table, ids, actor), event, actor, 2, 5)
    write(b, table, look_up_mixed(b, table, ids, actor), event, actor, 2, 5)
    for name, x, y in zip(Columns._fields, a, b):
        if x is not None and x.tolist() != y.tolist():
            return f"written {name}: {x.tolist()} != {y.tolist()}"
    return None


@settings(max_examples=300, deadline=None)
@given(cases())
def test_the_uniform_shortcut_is_the_key_per_slot_form(case):
    assert agree(*case) is None


def test_uniform_batches_take_the_shortcut():
    """The shortcut is taken (scalars) for one request's running slots, and for slots each
    finished by its own request; a batch of two states is looked up per slot."""
    table = compile_events()[Event.FINISH]
    cols = Columns(
        np.array([0, 2, 2, 2, 1], dtype=np.uint8),
        np.array([NOBODY, 7, 7, 8, 7], dtype=np.int64),
        np.full(5, NOBODY, dtype=np.int64),
        np.zeros(5, dtype=np.int32),
        np.zeros(5, dtype=np.uint8),
        np.zeros(5, dtype=np.uint8),
    )
    one = look_up(cols, table, np.array([1, 2]), 7)
    each = look_up(cols, table, np.array([1, 2, 3]), np.array([7, 7, 8]))
    mixed = look_up(cols, table, np.array([2, 4]), 7)
    assert isinstance(one.key, int) and one.after == int(State.RELEASED)
    assert isinstance(each.key, int) and each.after == int(State.RELEASED)
    assert isinstance(mixed.key, np.ndarray)


def test_a_shortcut_that_takes_one_value_for_the_actor_is_caught(monkeypatch):
    """The comparison can fail: a uniform form that takes a field holding one value for all the
    slots to be the actor's (a lent slot rolled back by a request that is not its borrower)."""
    monkeypatch.setattr(transition, "_relation_bit", lambda column, actor_id, n: 1)
    cols = Columns(
        np.array([0, 4, 4], dtype=np.uint8),  # LENT by session 3 to request 9
        np.array([NOBODY, 3, 3], dtype=np.int64),
        np.array([NOBODY, 9, 9], dtype=np.int64),
        np.zeros(3, dtype=np.int32),
        np.zeros(3, dtype=np.uint8),
        np.zeros(3, dtype=np.uint8),
    )
    assert agree(cols, np.array([1, 2]), Event.ROLLBACK, 9) is None  # the borrower: both agree
    assert agree(cols, np.array([1, 2]), Event.ROLLBACK, 5) is not None  # request 5 is refused per slot


def test_a_fused_column_in_the_wrong_byte_order_is_caught():
    """The comparison can fail: state and last event swapped in their word, so that the uniform
    form's one scatter writes each into the other's byte while the key-per-slot form writes them
    apart (ROLLBACK of two TAKEN slots by their owner)."""
    n = CAP + 1
    cols = Columns(
        np.full(n, int(State.TAKEN), dtype=np.uint8),
        np.full(n, 1, dtype=np.int64),
        np.full(n, NOBODY, dtype=np.int64),
        np.zeros(n, dtype=np.int32),
        np.zeros(n, dtype=np.uint8),
        np.zeros(n, dtype=np.uint8),
    )
    ids = np.array([1, 2], dtype=np.int64)
    assert agree(fuse(cols), ids, Event.ROLLBACK, 1) is None
    assert "written state" in agree(fuse(cols, swapped=True), ids, Event.ROLLBACK, 1)
