"""The write-set declaration API: what the rows of a launched step may address, as data.

A launched step indexes the state through its rows: each row writes one slot and reads its own
slot and, for a copy-on-write source, one more. A `RowSpec` says, for one kind of row, whose
row it is and in which (state, relation) its actor may write or read a slot; a pad row
addresses only the pad slot. `Fill` says what a slot holds since it was taken: a read needs a
fill the declaration calls readable. `declare_write_set` refuses a state or relation the
lifecycle cannot have, a row kind declared twice, and a pad slot that is no int; whether what it
allows is safe is for the proofs (`slotwarden.model.proofs.launch`) to say.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable, NamedTuple

from slotwarden.model.declaration import Lifecycle, relations_for
from slotwarden.model.errors import DeclarationError, shown
from slotwarden.model.vocabulary import ActorKind, Relation, State


class RowKind(IntEnum):
    """What a batch row of a launched step stands for."""

    REQUEST = 0  # a request of the running batch
    PAD = 1  # a padding row: fills the batch up to a captured size (a CUDA graph's)


class Fill(IntEnum):
    """What a slot's state holds since the slot was taken (ALLOC)."""

    STALE = 0  # whatever its previous tenant left
    ZEROED = 1  # zeroed since it was taken
    COPIED = 2  # a copy of a state the taker may read (a prefix, a fork source)
    WRITTEN = 3  # written by a step that read it filled


class Row(NamedTuple):
    """One batch row of a launched step: its kind, its actor's id (NOBODY for a pad row), the
    slot it writes and the slot it reads besides (`source`; the written slot when it reads
    only its own)."""

    kind: RowKind
    actor: int
    write: int
    source: int


@dataclass(frozen=True)
class Access:
    """A slot a row's actor may address: one in `state` to which it stands in relation `by`."""

    state: State
    by: Relation
    why: str = ""


@dataclass(frozen=True)
class RowSpec:
    """One kind of row: the kind of actor it acts for (None: nobody), the slots it may write
    and read, and whether it addresses only the pad slot."""

    kind: RowKind
    actor: ActorKind | None
    writes: tuple[Access, ...] = ()
    reads: tuple[Access, ...] = ()
    pad_only: bool = False
    doc: str = ""


@dataclass(frozen=True)
class WriteSet:
    """A checked write-set declaration. Build it with `declare_write_set`."""

    rows: tuple[RowSpec, ...]
    pad_slot: int
    readable: frozenset  # the fills a read may find
    _by_kind: dict

    def row(self, kind) -> RowSpec | None:
        """The spec of rows of `kind`, or None: no such row may be launched."""
        return self._by_kind.get(kind)

    def may_write(self, spec: RowSpec, state: State, by: Relation) -> bool:
        return any(a.state is state and a.by is by for a in spec.writes)

    def may_read(self, spec: RowSpec, state: State, by: Relation) -> bool:
        return any(a.state is state and a.by is by for a in spec.reads)


def declare_write_set(
    lifecycle: Lifecycle, rows: Iterable[RowSpec], pad_slot: int, readable: Iterable[Fill]
) -> WriteSet:
    """Check a write-set declaration against `lifecycle`; raise `DeclarationError` naming the
    first fault."""
    rows, readable = tuple(rows), frozenset(readable)
    by_kind: dict = {}
    for r in rows:
        if not isinstance(r.kind, RowKind):
            raise DeclarationError(f"unknown row kind {shown(r.kind)}")
        if r.kind in by_kind:
            raise DeclarationError(f"row kind {r.kind.name} is declared twice")
        by_kind[r.kind] = r
        if r.pad_only and (r.actor is not None or r.writes or r.reads):
            raise DeclarationError(f"a {r.kind.name} row addresses only the pad slot: it has no actor, no access")
        if not r.pad_only and not isinstance(r.actor, ActorKind):
            raise DeclarationError(f"a {r.kind.name} row addresses real slots, so it names the kind of its actor")
        for a in r.writes + r.reads:
            if not isinstance(a.state, State) or a.state not in {s.state for s in lifecycle.states}:
                raise DeclarationError(f"a {r.kind.name} row addresses unknown state {shown(a.state)}")
            if a.by not in relations_for(lifecycle.spec(a.state), r.actor):
                raise DeclarationError(
                    f"a {r.actor.name.lower()} cannot stand in relation {shown(a.by)} to a {a.state.name} slot"
                )
    for f in readable:
        if not isinstance(f, Fill):
            raise DeclarationError(f"unknown fill {shown(f)}")
    if not isinstance(pad_slot, int) or isinstance(pad_slot, bool):
        raise DeclarationError(f"the pad slot {shown(pad_slot)} is not a slot id")
    return WriteSet(rows, pad_slot, readable, by_kind)


class _AllWritten:
    def __getitem__(self, i: int) -> Fill:
        return Fill.WRITTEN


ALL_WRITTEN = _AllWritten()
"""Fills for a check that tracks none (a trace's replay, an engine's guard): every slot is WRITTEN."""
