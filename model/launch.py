"""The model's check of a launched step's write set, read straight from the declaration.

`check_step` judges every row of a step against the slot records, their fills and the lock
record, as `WRITE_SET` declares (the row's kind, the (state, relation) of each slot it writes or
reads, the pad slot, the readable fills), and raises `IllegalStep` at the first row that breaks
it; then no real slot may be written by two rows. A step is accepted exactly when each of its
rows is accepted alone and its writes are distinct, so a proof over one row (and one over two,
for distinctness) covers every step. The runtime's batched check refuses the same steps.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from slotwarden.model.declaration import Lifecycle, relation_of
from slotwarden.model.errors import IllegalStep
from slotwarden.model.lifecycle import LIFECYCLE, WRITE_SET
from slotwarden.model.vocabulary import NOBODY, Actor, Relation, Slot
from slotwarden.model.write_set import Row, WriteSet


_AS = {Relation.NONE: "with no claim on it", Relation.OWNER: "as its owner", Relation.BORROWER: "as its borrower"}


def _as(by: Relation) -> str:
    return _AS.get(by, f"as a {by.name.lower()}")


def holder(slot: Slot, lifecycle: Lifecycle = LIFECYCLE) -> Actor | None:
    """Who holds `slot`: its owner (None: nobody)."""
    spec = lifecycle.spec(slot.state)
    return None if spec.owner is None or slot.owner == NOBODY else Actor(spec.owner, slot.owner)


def check_row(
    index: int,
    row: Row,
    slots: tuple,
    fills: tuple,
    locks: Mapping[int, Iterable[int]],
    write_set: WriteSet = WRITE_SET,
    lifecycle: Lifecycle = LIFECYCLE,
) -> None:
    """Raise `IllegalStep` unless the declaration lets row `index` write and read what it names."""
    spec = write_set.row(row.kind)
    pad = write_set.pad_slot
    if spec is None:
        raise IllegalStep(
            f"no row of kind {row.kind!r} is declared", row=index, slot_id=row.write, slot=None, holder=None, actor=None
        )
    if spec.pad_only:
        for i in (row.write, row.source):
            if i != pad:
                _refuse(
                    f"a {spec.kind.name.lower()} row addresses only the pad slot {pad}",
                    index,
                    i,
                    slots,
                    None,
                    lifecycle,
                )
        return
    actor = Actor(spec.actor, row.actor)
    for i, writes in ((row.write, True), (row.source, False)):
        if not 1 <= i <= len(slots):
            _refuse(f"not a slot of the pool (1..{len(slots)})", index, i, slots, actor, lifecycle)
        slot = slots[i - 1]
        by = relation_of(lifecycle.spec(slot.state), slot, actor)
        if writes and not write_set.may_write(spec, slot.state, by):
            _refuse(
                f"a {spec.kind.name.lower()} row may not write a {slot.state.name} slot {_as(by)}",
                index,
                i,
                slots,
                actor,
                lifecycle,
            )
        if not write_set.may_read(spec, slot.state, by):
            _refuse(
                f"a {spec.kind.name.lower()} row may not read a {slot.state.name} slot {_as(by)}",
                index,
                i,
                slots,
                actor,
                lifecycle,
            )
        if by in (Relation.READER, Relation.FULL) and row.actor not in locks.get(i, ()):
            _refuse("it reads a cached slot it holds no lock on", index, i, slots, actor, lifecycle)
        if fills[i - 1] not in write_set.readable:
            _refuse(
                f"its state is {fills[i - 1].name.lower()} (no zeroing or copy since it was taken)",
                index,
                i,
                slots,
                actor,
                lifecycle,
            )


def check_step(
    rows: tuple,
    slots: tuple,
    fills: tuple,
    locks: Mapping[int, Iterable[int]],
    write_set: WriteSet = WRITE_SET,
    lifecycle: Lifecycle = LIFECYCLE,
) -> None:
    """Raise `IllegalStep` at the first row the declaration refuses, then at the second row
    writing a real slot another row writes; return None for a step that may be launched."""
    for index, row in enumerate(rows):
        check_row(index, row, slots, fills, locks, write_set, lifecycle)
    seen: dict = {}
    for index, row in enumerate(rows):
        if row.write != write_set.pad_slot:
            if row.write in seen:
                _refuse(
                    f"row {seen[row.write]} writes it too", index, row.write, slots, _actor(write_set, row), lifecycle
                )
            seen[row.write] = index


def _actor(write_set: WriteSet, row: Row) -> Actor | None:
    spec = write_set.row(row.kind)
    return None if spec is None or spec.actor is None else Actor(spec.actor, row.actor)


def _refuse(reason: str, index: int, slot_id: int, slots: tuple, actor, lifecycle: Lifecycle):
    record = slots[slot_id - 1] if 1 <= slot_id <= len(slots) else None
    who = None if record is None else holder(record, lifecycle)
    raise IllegalStep(reason, row=index, slot_id=slot_id, slot=record, holder=who, actor=actor)
