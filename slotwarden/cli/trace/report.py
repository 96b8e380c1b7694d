"""What `check-trace` finds in a trace: each slot's moves, the lines the model refuses, the
slots left held at the end, and the report that gathers them (read by the text report and the
plot alike)."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import NOBODY, Slot
from slotwarden.runtime.trace import TraceLine


class Move(NamedTuple):
    """One slot's move on one trace line (`line`, the whole line, may move other slots too)."""

    lineno: int
    line: TraceLine
    before: Slot
    after: Slot
    slot: int

    def __str__(self) -> str:
        ev = self.line.event if isinstance(self.line.event, str) else self.line.event.name.lower()
        to = "" if self.line.target == NOBODY else f" -> {self.line.target}"
        where = f"line {self.lineno} (step {self.line.step})"
        return f"{where}: {ev} by {self.line.actor}{to}: {show(self.before)} -> {show(self.after)}"


class Finding(NamedTuple):
    """A line the model refuses: the error, the slot it names, and that slot's recent moves."""

    lineno: int
    line: TraceLine
    slot: int | None
    error: str
    history: tuple  # Move, oldest first


class Leak(NamedTuple):
    slot: int
    record: Slot
    last: Move | None


class Report(NamedTuple):
    """What a replay found. It keeps windows, not the whole trace (`slotwarden.cli.trace.replay`):
    `findings` are the first illegal moves (`illegal` counts them all) and `moves` the plot's
    window, each slot's moves on those lines and its last move before them."""

    capacity: int
    lines: int
    events: Counter
    slots: tuple  # every slot id a line moved
    findings: tuple  # Finding, in line order: the first FINDINGS
    leaks: tuple  # Leak, in slot order
    moves: tuple  # Move, in line order: the timeline the plot draws
    illegal: int = 0  # every illegal move, kept or not
    last: int = 0  # the number of the last event line

    @property
    def clean(self) -> bool:
        return not self.findings and not self.leaks


def show(s: Slot) -> str:
    """`LENT (session 5, lent to request 3)`: the state and who holds the slot."""
    return s.state.name + (f" ({holder(s)})" if holder(s) else "")


def holder(s: Slot) -> str:
    """Who holds `s`, in words (empty for a slot nobody holds)."""
    kind = LIFECYCLE.spec(s.state).owner
    if kind is None or s.owner == NOBODY:
        return ""
    return f"{kind.name.lower()} {s.owner}" + (f", lent to request {s.borrower}" if s.borrower != NOBODY else "")
