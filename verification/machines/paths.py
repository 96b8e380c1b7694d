"""The ledger's code paths by name, for the machines and tests that drive each one.

A `SlotLedger` moves a batch of up to `small` slots a slot at a time in Python; a larger one
by its compiled move (`mover`, where the extension is built: a batch in a few runs of
consecutive slots a run at a time, any other a slot at a time in C) or by the numpy kernel.
`use(ledger, path)` pins a ledger to one of them for every batch size a machine makes."""

from __future__ import annotations

from slotwarden.runtime.ledger.ledger import SlotLedger

PATHS = ("per-slot", "compiled", "compiled slot by slot", "numpy")


def use(ledger: SlotLedger, path: str) -> None:
    """Send every batch of `ledger` down `path` (one of `PATHS`)."""
    if path not in PATHS:
        raise ValueError(f"not a path of the ledger: {path!r} (one of {PATHS})")
    if path == "per-slot":
        ledger.small = 1 << 30  # any batch a machine makes
        return
    ledger.small = 0
    if path == "numpy":
        ledger.mover = None
    elif ledger.mover is not None and path == "compiled slot by slot":
        ledger.mover.runs = 0
