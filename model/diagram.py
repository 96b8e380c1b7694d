"""State diagrams drawn from the `transitions` machine built from the declaration.

Mermaid (`stateDiagram-v2`) and Graphviz DOT text need nothing but the Python dependencies;
SVG and PNG are rendered from the DOT text by pygraphviz (the `render` extra), which bundles
graphviz. Slots' states are grouped into the four states of the brief (BATCH_OWNED and
SESSION_OWNED as composite states). Every edge label names the event and who may fire it.
"""

from __future__ import annotations

from collections import defaultdict

from .declaration import Lifecycle
from .lifecycle import LIFECYCLE
from .machine import SlotMachine

FORMATS = ("mermaid", "dot", "svg", "png")


class RenderUnavailable(RuntimeError):
    """SVG/PNG output needs pygraphviz, which is not installed."""


def edges(lifecycle: Lifecycle = LIFECYCLE) -> dict:
    """{(source, dest): [label, ...]} read from the `transitions` machine's event table."""
    machine = SlotMachine(lifecycle).machine
    found: dict = defaultdict(list)
    for name, event in machine.events.items():
        for source, transitions in event.transitions.items():
            for t in transitions:
                who = ", ".join(c.func.__name__ for c in t.conditions)
                found[(source, t.dest)].append(f"{name} ({who})")
    return dict(found)


def _groups(lifecycle: Lifecycle) -> dict:
    members: dict = defaultdict(list)
    for spec in lifecycle.states:
        members[spec.group].append(spec.state.name)
    return members


def mermaid(lifecycle: Lifecycle = LIFECYCLE) -> str:
    """The lifecycle as a Mermaid `stateDiagram-v2` (renders on GitHub)."""
    lines = ["stateDiagram-v2", "    direction LR", f"    [*] --> {lifecycle.initial.name}"]
    for group, names in _groups(lifecycle).items():
        if names == [group.name]:
            lines.append(f"    {group.name}")
            continue
        lines.append(f"    state {group.name} {{")
        lines.extend(f"        {n}" for n in names)
        lines.append("    }")
    for (src, dst), labels in edges(lifecycle).items():
        lines.append(f"    {src} --> {dst}: {' / '.join(labels)}")
    return "\n".join(lines) + "\n"


def dot(lifecycle: Lifecycle = LIFECYCLE) -> str:
    """The lifecycle as Graphviz DOT, the composite states as clusters."""
    lines = [
        "digraph slot_lifecycle {",
        "    rankdir=LR;",
        '    graph [fontname="Helvetica"];',
        '    node [shape=box, style="rounded,filled", fillcolor=white, fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
        '    start [shape=point, label=""];',
        f"    start -> {lifecycle.initial.name};",
    ]
    for group, names in _groups(lifecycle).items():
        if names == [group.name]:
            lines.append(f"    {group.name};")
            continue
        lines.append(f"    subgraph cluster_{group.name} {{")
        lines.append(f'        label="{group.name}"; style=rounded; color=gray40;')
        lines.extend(f"        {n};" for n in names)
        lines.append("    }")
    for (src, dst), labels in edges(lifecycle).items():
        label = "\\n".join(labels)
        lines.append(f'    {src} -> {dst} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(fmt: str, lifecycle: Lifecycle = LIFECYCLE) -> bytes:
    """The diagram in `fmt` (one of FORMATS) as bytes; SVG/PNG need pygraphviz."""
    if fmt == "mermaid":
        return mermaid(lifecycle).encode()
    if fmt == "dot":
        return dot(lifecycle).encode()
    if fmt not in FORMATS:
        raise ValueError(f"unknown diagram format {fmt!r}; choose one of {', '.join(FORMATS)}")
    try:
        import pygraphviz
    except ImportError as exc:
        raise RenderUnavailable(
            f"--format {fmt} needs pygraphviz: pip install 'slotwarden[render]' "
            "(or use --format mermaid / --format dot, which need nothing more)"
        ) from exc
    return pygraphviz.AGraph(string=dot(lifecycle)).draw(format=fmt, prog="dot")

