"""One colour per group of states, shared by every picture slotwarden draws.

The lifecycle diagrams (`slotwarden diagram`, docs/lifecycle.svg) fill each state's box with
its group's colour, and `slotwarden demo --plot` stacks slot counts per group in the same
colours, so the two pictures read alike. A group declared later and not listed here still gets
a colour of its own (`SPARE`, chosen by the group's number), never an error.
"""

from __future__ import annotations

from enum import IntEnum

from slotwarden.model.vocabulary import Group

GROUP_COLOURS = {
    Group.FREE: "#d9d9d9",
    Group.BATCH_OWNED: "#4c78a8",
    Group.SESSION_OWNED: "#f58518",
    Group.RELEASED: "#e45756",
    Group.CACHE_OWNED: "#54a24b",
}
"""Fill colour of each group (hex RGB)."""

SPARE = ("#b279a2", "#9d755d", "#72b7b2", "#eeca3b")
"""Fills for groups without an entry in `GROUP_COLOURS`, picked by the group's number."""

HIGHLIGHT = "#7b2cbf"
"""The contrasting colour of whatever a diagram highlights (an event's edges, a state)."""

REFUSED = "#b00020"
"""The colour of a move the lifecycle refuses, drawn dashed."""

LINE = "#333333"
"""Outlines and ordinary edges."""


def colour(group: IntEnum) -> str:
    """The fill colour of `group`: its own entry, else a spare one (stable for the group)."""
    return GROUP_COLOURS.get(group) or SPARE[int(group) % len(SPARE)]


def ink(fill: str) -> str:
    """Black or white, whichever reads better on `fill` (a #rrggbb colour)."""
    r, g, b = rgb(fill)
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b >= 140 else "#ffffff"


def rgb(hex_colour: str) -> tuple[int, int, int]:
    """(r, g, b) in 0..255 of a #rrggbb colour."""
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
