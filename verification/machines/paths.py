"""The ledger's code paths by name, for the machines and tests that drive each one.

A `SlotLedger` as built moves the usual call by its lane (`ledger_lane`: one C call, any size)
and every other by its Python over its compiled move: that is "compiled". Off its lane, a batch
of up to `small` slots goes a slot at a time in Python ("per-slot"), a larger one by the Python
over the compiled move ("compiled python": a batch in a few runs of consecutive slots a run at a
time, scattered slots of one actor a column at a time, any other a slot at a time in C;
"compiled slot by slot": a slot at a time only) or by the numpy kernel ("numpy", or wherever
the extension is not built). `use(ledger, path)` pins a ledger to one of them for every batch
size a machine makes; the machines draw from `PATHS`."""

from __future__ import annotations

from slotwarden.runtime.ledger import ledger_lane
from slotwarden.runtime.ledger.ledger import SlotLedger

PATHS = ("per-slot", "compiled", "compiled slot by slot", "numpy")
EXTRA = ("compiled python",)
"""A path `use` takes beside `PATHS` (the judges run it; the machines' draws keep to `PATHS`)."""


def use(ledger: SlotLedger, path: str) -> None:
    """Send every batch of `ledger` down `path` (one of `PATHS`)."""
    if path not in PATHS + EXTRA:
        raise ValueError(f"not a path of the ledger: {path!r} (one of {PATHS + EXTRA})")
    if path == "per-slot":
        ledger_lane.unbind(ledger)  # the Python, a slot at a time
        ledger.small = 1 << 30  # any batch a machine makes
        return
    ledger.small = 0
    if path == "compiled":
        return  # as built: its lane, and its Python over the compiled move for the rest
    ledger_lane.unbind(ledger)  # the Python over the compiled move, or the numpy kernel
    if path == "numpy":
        ledger.mover = None
    elif ledger.mover is not None and path == "compiled slot by slot":
        ledger.mover.runs = 0
        ledger.mover.gather = 0
