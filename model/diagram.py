"""State diagrams drawn from the `transitions` machine built from the declaration.

Mermaid and Graphviz DOT text need nothing but the Python dependencies; SVG and PNG are
rendered from the DOT text by pygraphviz (the `render` extra), which bundles graphviz.

Every state is drawn with an explicit label, never the renderer's default: its name and the
kind of its owner ("PARKED · session"), filled with its group's colour (`model.palette`, the
colours of `slotwarden demo --plot` too). Groups of several states are boxes around their
states, a legend names every group's colour, and every edge label names the event and who may
fire it. A view may highlight one event (all its edges) or one state, and may draw moves the
lifecycle refuses (`Refused`, checked against the rules), dashed, next to the legal ones. The
plain Mermaid `stateDiagram-v2` cannot colour an edge, so such a Mermaid view is a `flowchart`.
"""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError, shown
from collections import defaultdict
from typing import NamedTuple

from slotwarden.model import palette
from slotwarden.model.declaration import Lifecycle, StateSpec
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.machine import SlotMachine
from slotwarden.model.vocabulary import Event, State

FORMATS = ("mermaid", "dot", "svg", "png")


class RenderUnavailable(SlotwardenError, RuntimeError):
    """SVG/PNG output needs pygraphviz, which is not installed."""


class UnknownName(SlotwardenError, ValueError):
    """A name to highlight that is neither an event nor a state of the lifecycle."""


class Refused(NamedTuple):
    """A move the lifecycle refuses, drawn dashed: `source --event--> dest`, with a note."""

    source: State
    event: Event
    dest: State
    note: str = "refused"


def refused(
    source: State, event: Event, dest: State, note: str = "refused", lifecycle: Lifecycle = LIFECYCLE
) -> Refused:
    """A `Refused` move, checked: raises ValueError when a rule of `lifecycle` makes that move."""
    if any(r.source is source and r.event is event and r.dest is dest for r in lifecycle.rules):
        raise ValueError(f"{source.name} --{event.name}--> {dest.name} is a declared rule, not a refused move")
    return Refused(source, event, dest, note)


def parse_highlight(name: str, lifecycle: Lifecycle = LIFECYCLE) -> Event | State:
    """The event or state `name` names (any case), else `UnknownName` listing the choices."""
    key = name.strip().upper()
    events = {e.event.name: e.event for e in lifecycle.events}
    states = {s.state.name: s.state for s in lifecycle.states}
    if key in events and key in states:
        raise UnknownName(f"{shown(name)} names both an event and a state")
    if key in events:
        return events[key]
    if key in states:
        return states[key]
    raise UnknownName(
        f"unknown event or state {shown(name)}; events: {', '.join(e.lower() for e in events)}; "
        f"states: {', '.join(states)}"
    )


def node_label(spec: StateSpec) -> str:
    """What a state's box says: its name and the kind of its owner ('PARKED · session')."""
    owner = spec.owner.name.lower() if spec.owner is not None else "nobody"
    return f"{spec.state.name} · {owner}"


def _moves(lifecycle: Lifecycle):
    """(source, dest, event, label) for every transition of the `transitions` machine."""
    machine = SlotMachine(lifecycle).machine
    for name, event in machine.events.items():
        for source, transitions in event.transitions.items():
            for t in transitions:
                who = ", ".join(c.func.__name__ for c in t.conditions)
                yield source, t.dest, Event[name.upper()], f"{name} ({who})"


def edges(lifecycle: Lifecycle = LIFECYCLE) -> dict:
    """{(source, dest): [label, ...]} read from the `transitions` machine's event table."""
    found: dict = defaultdict(list)
    for source, dest, _, label in _moves(lifecycle):
        found[(source, dest)].append(label)
    return dict(found)


def _arrows(lifecycle: Lifecycle, highlight) -> dict:
    """{(source, dest, highlighted): [label, ...]}: a highlighted event gets arrows of its own."""
    found: dict = defaultdict(list)
    for source, dest, event, label in _moves(lifecycle):
        found[(source, dest, event is highlight)].append(label)
    return dict(found)


def _groups(lifecycle: Lifecycle) -> dict:
    members: dict = defaultdict(list)
    for spec in lifecycle.states:
        members[spec.group].append(spec)
    return members


def _alone(group, specs) -> bool:
    """A group of one state named like the group is drawn as that state alone (FREE, RELEASED)."""
    return [s.state.name for s in specs] == [group.name]


def mermaid(lifecycle: Lifecycle = LIFECYCLE) -> str:
    """The lifecycle as a Mermaid `stateDiagram-v2` (renders on GitHub)."""
    lines = ["stateDiagram-v2", "    direction LR", f"    [*] --> {lifecycle.initial.name}"]
    for group, specs in _groups(lifecycle).items():
        if _alone(group, specs):
            lines.append(f"    {group.name}")
            continue
        lines.append(f"    state {group.name} {{")
        lines.extend(f"        {s.state.name}" for s in specs)
        lines.append("    }")
    for (src, dst), labels in edges(lifecycle).items():
        lines.append(f"    {src} --> {dst}: {' / '.join(labels)}")
    return "\n".join(lines) + "\n"


def mermaid_flow(lifecycle: Lifecycle = LIFECYCLE, highlight: Event | State | None = None, refuse: tuple = ()) -> str:
    """The lifecycle as a Mermaid `flowchart`, coloured like the rendered diagram: group fills,
    the highlighted event's edges or state in `palette.HIGHLIGHT`, refused moves dashed."""
    lines = ["flowchart LR"]
    for group, specs in _groups(lifecycle).items():
        boxed = not _alone(group, specs)
        if boxed:
            lines.append(f"    subgraph {group.name}")
        pad = "        " if boxed else "    "
        lines.extend(f'{pad}{s.state.name}["{node_label(s)}"]:::g{group.name}' for s in specs)
        if boxed:
            lines.append("    end")
    hot, n = [], 0
    for (src, dst, lit), labels in _arrows(lifecycle, highlight).items():
        lines.append(f'    {src} -->|"{" / ".join(labels)}"| {dst}')
        if lit:
            hot.append(str(n))
        n += 1
    first_refused = n
    for r in refuse:
        lines.append(f'    {r.source.name} -.->|"{r.event.name.lower()}: {r.note}"| {r.dest.name}')
    for group in _groups(lifecycle):
        fill = palette.colour(group)
        lines.append(f"    classDef g{group.name} fill:{fill},color:{palette.ink(fill)},stroke:{palette.LINE}")
    if hot:
        lines.append(
            f"    linkStyle {','.join(hot)} stroke:{palette.HIGHLIGHT},stroke-width:3px,color:{palette.HIGHLIGHT}"
        )
    if refuse:
        ids = ",".join(str(first_refused + i) for i in range(len(refuse)))
        lines.append(
            f"    linkStyle {ids} stroke:{palette.REFUSED},stroke-width:2px,stroke-dasharray:6 "
            f"4,color:{palette.REFUSED}"
        )
    if isinstance(highlight, State):
        lines.append(f"    style {highlight.name} stroke:{palette.HIGHLIGHT},stroke-width:4px")
    return "\n".join(lines) + "\n"


def _legend(lifecycle: Lifecycle, highlight, refuse: tuple) -> str:
    """An HTML-like Graphviz label: one row per group's colour, then what is highlighted/refused."""
    rows = ['<TR><TD COLSPAN="2"><B>groups</B></TD></TR>']
    for group in _groups(lifecycle):
        rows.append(
            f'<TR><TD BGCOLOR="{palette.colour(group)}" WIDTH="20"> </TD><TD ALIGN="LEFT">{group.name}</TD></TR>'
        )
    if highlight is not None:
        what = highlight.name.lower() if isinstance(highlight, Event) else highlight.name
        rows.append(f'<TR><TD BGCOLOR="{palette.HIGHLIGHT}"> </TD><TD ALIGN="LEFT">highlighted: {what}</TD></TR>')
    if refuse:
        rows.append(
            f'<TR><TD BGCOLOR="{palette.REFUSED}"> </TD><TD ALIGN="LEFT">dashed: refused by the lifecycle</TD></TR>'
        )
    body = "".join(rows)
    return f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="4">{body}</TABLE>>'


def dot(lifecycle: Lifecycle = LIFECYCLE, highlight: Event | State | None = None, refuse: tuple = ()) -> str:
    """The lifecycle as Graphviz DOT: explicit, coloured node labels, the groups of several
    states as clusters, a legend; `highlight` and `refuse` as in `mermaid_flow`."""
    line = palette.LINE
    lines = [
        "digraph slot_lifecycle {",
        "    rankdir=LR;",
        '    graph [fontname="Helvetica", charset="UTF-8"];',
        f'    node [shape=box, style="rounded,filled", fontname="Helvetica", color="{line}"];',
        f'    edge [fontname="Helvetica", fontsize=10, color="{line}"];',
        '    start [shape=point, label="", width=0.12];',
        f"    start -> {lifecycle.initial.name};",
    ]
    for group, specs in _groups(lifecycle).items():
        boxed = not _alone(group, specs)
        if boxed:
            lines.append(f"    subgraph cluster_{group.name} {{")
            lines.append(f'        label="{group.name}"; labeljust=l; style=rounded; color=gray40;')
        fill = palette.colour(group)
        for s in specs:
            extra = f', color="{palette.HIGHLIGHT}", penwidth=3' if s.state is highlight else ""
            lines.append(
                f'    {"    " if boxed else ""}{s.state.name} [label="{node_label(s)}", fillcolor="{fill}", '
                f'fontcolor="{palette.ink(fill)}"{extra}];'
            )
        if boxed:
            lines.append("    }")
    for (src, dst, lit), labels in _arrows(lifecycle, highlight).items():
        label = "\\n".join(labels)
        extra = f', color="{palette.HIGHLIGHT}", fontcolor="{palette.HIGHLIGHT}", penwidth=2.5' if lit else ""
        lines.append(f'    {src} -> {dst} [label="{label}"{extra}];')
    for r in refuse:
        c = palette.REFUSED
        lines.append(
            f'    {r.source.name} -> {r.dest.name} [label="{r.event.name.lower()}: {r.note}", style=dashed, '
            f'color="{c}", fontcolor="{c}", penwidth=2, constraint=false];'
        )
    lines.append(
        "    legend [shape=plain, style=filled, fillcolor=white, fontsize=10, "
        f"label={_legend(lifecycle, highlight, refuse)}];"
    )
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(
    fmt: str, lifecycle: Lifecycle = LIFECYCLE, highlight: Event | State | None = None, refuse: tuple = ()
) -> bytes:
    """The diagram in `fmt` (one of FORMATS) as bytes; SVG/PNG need pygraphviz. With a
    `highlight` or refused moves, Mermaid output is a flowchart (see `mermaid_flow`)."""
    if fmt == "mermaid":
        plain = highlight is None and not refuse
        return (mermaid(lifecycle) if plain else mermaid_flow(lifecycle, highlight, refuse)).encode()
    if fmt == "dot":
        return dot(lifecycle, highlight, refuse).encode()
    if fmt not in FORMATS:
        raise ValueError(f"unknown diagram format {shown(fmt)}; choose one of {', '.join(FORMATS)}")
    try:
        import pygraphviz
    except ImportError as exc:
        raise RenderUnavailable(
            f"--format {fmt} needs pygraphviz: pip install 'slotwarden[render]' "
            "(or use --format mermaid / --format dot, which need nothing more)"
        ) from exc
    return pygraphviz.AGraph(string=dot(lifecycle, highlight, refuse)).draw(format=fmt, prog="dot")
