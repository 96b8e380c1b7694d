"""The proofs over a launched step's write set: each a contracted function (as in
`move_proofs`) around the model's check (`slotwarden.model.launch.check_step`) of a step, whose
postcondition is one property of the step: an accepted step keeps it.

Why so small a step is enough: the check judges each id a row names (the slot it writes, the
slot it reads besides) alone, against that slot's record, fill and lock holders, and then only
compares the ids written. So each proof explores one symbolic slot (a well-formed record of any
state built from ints, as `record_of` does, its fill and the request holding a lock on it) under
one row of any kind, actor and ids; a read proof puts it beside the row's own slot, a slot the row
may write and read; `writes_disjoint` explores two rows of any kinds and ids over fixed records.
The declaration under proof is `STEP_SUBJECT[0]` (with the lifecycle `SUBJECT[0]`), so a test can
point the proofs at a wrong one.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.errors import IllegalStep
from slotwarden.model.launch import check_step
from slotwarden.model.lifecycle import WRITE_SET
from slotwarden.model.proofs.move import SUBJECT, record_of
from slotwarden.model.properties import (  # noqa: F401  the contracts in the docstrings call them
    exclusive,
    ids_in_pool,
    pads_to_pad,
    reads_committed,
    reads_filled,
    reads_held,
    writes_disjoint,
    writes_held,
)
from slotwarden.model.vocabulary import NOBODY, Slot, State
from slotwarden.model.write_set import Fill, Row, RowKind, WriteSet

STEP_SUBJECT: list[WriteSet] = [WRITE_SET]
"""The write-set declaration under proof (a one-element list so tests can swap it)."""


class Launch(NamedTuple):
    """A step offered to the check: its rows, the pool's records, fills and lock holders, and
    whether the check accepted it."""

    rows: tuple
    slots: tuple
    fills: tuple
    locks: dict
    accepted: bool


def offer(rows: tuple, slots: tuple, fills: tuple, locks: dict) -> Launch:
    """The step `rows` offered to the check of the declaration under proof."""
    try:
        check_step(rows, slots, fills, locks, STEP_SUBJECT[0], SUBJECT[0])
    except IllegalStep:
        return Launch(rows, slots, fills, locks, False)
    return Launch(rows, slots, fills, locks, True)


def alone(kind: RowKind, actor: int, write: int, source: int, state: State, owner: int, borrower: int,
          readers: int, fill: Fill, lock: int) -> Launch:  # fmt: skip
    """A row over a pool of one slot: in `state` (its owner, borrower, lock count), filled
    `fill`, with request `lock` holding a lock on it."""
    slot = record_of(state, owner, borrower, 0, readers, SUBJECT[0])
    return offer((Row(kind, actor, write, source),), (slot,), (fill,), {1: (lock,)})


def beside(kind: RowKind, actor: int, source: int, state: State, owner: int, borrower: int, readers: int,
           fill: Fill, lock: int, own_fill: Fill) -> Launch:  # fmt: skip
    """A row writing its own slot 1 (running, owned by the row's actor, filled `own_fill`) and
    reading `source` besides, over a pool whose slot 2 is the symbolic one."""
    own = Slot(State.RUNNING, actor, NOBODY)
    slot = record_of(state, owner, borrower, 0, readers, SUBJECT[0])
    return offer((Row(kind, actor, 1, source),), (own, slot), (own_fill, fill), {2: (lock,)})


def prove_writes_held(kind: RowKind, actor: int, write: int, state: State, owner: int, borrower: int,
                      readers: int, fill: Fill, lock: int) -> Launch:  # fmt: skip
    """Property 15, one row: an accepted row writes only a slot its request holds.

    pre: exclusive(record_of(state, owner, borrower, 0, readers, SUBJECT[0]), SUBJECT[0])
    post: not __return__.accepted or writes_held(__return__.rows, __return__.slots, SUBJECT[0])
    """
    return alone(kind, actor, write, write, state, owner, borrower, readers, fill, lock)


def prove_pads_to_pad(kind: RowKind, actor: int, write: int, source: int, state: State, owner: int,
                      borrower: int, readers: int, fill: Fill, lock: int) -> Launch:  # fmt: skip
    """Property 15, one row: an accepted pad row addresses only the pad slot.

    pre: exclusive(record_of(state, owner, borrower, 0, readers, SUBJECT[0]), SUBJECT[0])
    post: not __return__.accepted or pads_to_pad(__return__.rows)
    """
    return alone(kind, actor, write, source, state, owner, borrower, readers, fill, lock)


def prove_ids_in_pool(kind: RowKind, actor: int, write: int, source: int, state: State, owner: int,
                      borrower: int, readers: int, fill: Fill, lock: int) -> Launch:  # fmt: skip
    """Property 15, one row: an accepted row addresses the pad slot or a real slot, never -1 or
    an id past the pool.

    pre: exclusive(record_of(state, owner, borrower, 0, readers, SUBJECT[0]), SUBJECT[0])
    post: not __return__.accepted or ids_in_pool(__return__.rows, 1)
    """
    return alone(kind, actor, write, source, state, owner, borrower, readers, fill, lock)


def prove_reads_held(kind: RowKind, actor: int, source: int, state: State, owner: int, borrower: int,
                     readers: int, fill: Fill, lock: int) -> Launch:  # fmt: skip
    """Property 15, one row: an accepted row reads only a slot its request holds or a published
    cached slot it holds a lock on.

    pre: exclusive(record_of(state, owner, borrower, 0, readers, SUBJECT[0]), SUBJECT[0])
    post: not __return__.accepted or reads_held(__return__.rows, __return__.slots, __return__.locks, SUBJECT[0])
    """
    return beside(kind, actor, source, state, owner, borrower, readers, fill, lock, Fill.WRITTEN)


def prove_reads_filled(kind: RowKind, actor: int, source: int, state: State, owner: int, borrower: int,
                       readers: int, fill: Fill, lock: int, own_fill: Fill) -> Launch:  # fmt: skip
    """Property 15, one row: an accepted row never reads a slot (its own or its source) that no
    zeroing, copy or step has filled since it was taken.

    pre: exclusive(record_of(state, owner, borrower, 0, readers, SUBJECT[0]), SUBJECT[0])
    post: not __return__.accepted or reads_filled(__return__.rows, __return__.fills)
    """
    return beside(kind, actor, source, state, owner, borrower, readers, fill, lock, own_fill)


def prove_reads_committed(kind: RowKind, actor: int, source: int, state: State, owner: int, borrower: int,
                          readers: int, fill: Fill, lock: int) -> Launch:  # fmt: skip
    """Property 16, one row: an accepted row reads no window slot a verify has written.

    pre: exclusive(record_of(state, owner, borrower, 0, readers, SUBJECT[0]), SUBJECT[0])
    post: not __return__.accepted or reads_committed(__return__.rows, __return__.slots)
    """
    return beside(kind, actor, source, state, owner, borrower, readers, fill, lock, Fill.WRITTEN)


def prove_writes_disjoint(first: RowKind, a1: int, w1: int, second: RowKind, a2: int, w2: int) -> Launch:
    """Property 15, two rows: no slot but the pad slot is written by both rows of an accepted
    step, over a pool of a request's running slot and a session's slot lent to another request
    (both filled, none locked: whether a row may address a slot is the one-row proofs' to say).

    post: not __return__.accepted or writes_disjoint(__return__.rows)
    """
    slots = (Slot(State.RUNNING, 1, NOBODY), Slot(State.LENT_RUNNING, 5, 2))
    rows = (Row(first, a1, w1, w1), Row(second, a2, w2, w2))
    return offer(rows, slots, (Fill.WRITTEN, Fill.WRITTEN), {})
