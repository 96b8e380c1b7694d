"""The bytes a world's key is made of: a plain value or an epoch as one byte (and back), a
slot set as a one-byte mask (and back), and `OutOfRange`, raised for a world the compact
encoding cannot hold (kept exactly as `(EXACT, world)` instead)."""

from __future__ import annotations

from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import ActorKind

EXACT = "exact"
"""The tag of a key that holds its world as it is (a world outside the compact range)."""

CACHE_OWNED = frozenset(spec.state for spec in LIFECYCLE.states if spec.owner is ActorKind.CACHE)
"""The states whose owner is a cache node (named by the slot itself, in no actor's mask)."""
NOONE = (-1,)  # the description of nobody holding a slot (`Codec.slot_renaming`)
SLOT_BYTES = 3  # a slot in the header: state, fence, readers (owner and borrower: the actors' masks)


class OutOfRange(ValueError):
    """A world the compact encoding cannot hold (kept as `(EXACT, world)` instead)."""


def small(v) -> int:
    """A plain value (None, a bool, a small int) as one byte: None -> 0, v -> v + 3."""
    if v is None:
        return 0
    if not -3 < v < 253:
        raise OutOfRange(v)
    return int(v) + 3


def epoch_byte(v: int) -> int:
    """An epoch (relative to the last completed step) as one byte: v -> v + 8."""
    if not -8 <= v < 248:
        raise OutOfRange(v)
    return v + 8


def value_of(b: int):
    return None if b == 0 else b - 3


BITS = tuple(tuple(k for k in range(8) if m >> k & 1) for m in range(256))  # mask -> its bits
SLOT_SETS = tuple(frozenset(k + 1 for k in bits) for bits in BITS)  # mask -> the slot ids it names
