"""The codes and constants the ledger's paths share: state codes as ints and bytes, the switch-over
batch size between the per-slot and the vectorised path, the check modes."""

from __future__ import annotations

import sys

import numpy as np

from slotwarden.model.declaration import Source
from slotwarden.model.table import ILLEGAL
from slotwarden.model.vocabulary import ActorKind, Event, State

from slotwarden.runtime import inputs


CHECKS = ("strict", "off")
_ALLOC, _FENCE, _SCHEDULER = Event.ALLOC, Event.FENCE, ActorKind.SCHEDULER  # enum member look-ups cost
_FREE = int(State.FREE)
_RELEASED = int(State.RELEASED)
_FREE_BYTE, _ILLEGAL_BYTE, _RELEASED_BYTE = bytes((_FREE,)), bytes((ILLEGAL,)), bytes((_RELEASED,))
_ID_MAX = inputs.ID_MAX
_INT64, _UNIT = np.dtype(np.int64), (8,)
_ONE = np.zeros(1, dtype=np.int64)  # copied for a one-slot alloc's result (never written itself)
_TOP = 7 if sys.byteorder == "little" else 0  # the byte of an int64 that holds its sign
_SCRATCH = ("stamp",)
_EPOCH, _FENCE_POS = int(Source.EPOCH), 3  # the fence's source "the step in flight", its place in `Columns`
STEP_MAX = int(np.iinfo(np.int32).max)
"""The last step a ledger can launch: a slot's fence (int32) names the step it waits for."""
RUN_MIN = 128
"""Vectorised batches of at least this many slots that are one run of consecutive slots take the
run lane (the columns read and written as slices, see `batch`); below it a slice gains nothing
over a short gather (the tests move `SlotLedger.run_min` to compare the two)."""
SMALL = 2
"""Off the ledger's lane (which takes the usual call of any size), batches of up to this many
slots take the per-slot path (Python over the same columns, the table read as lists); larger
ones a batch path. All give the same result, and any batch the per-slot path would refuse is
handed whole to a batch path, which raises. A batch path's cost hardly grows with n, the
per-slot path's grows with every slot: the switch-over is where they meet (the tests move
`SlotLedger.small` to run both)."""
