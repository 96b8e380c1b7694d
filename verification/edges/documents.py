"""The declaration's pictures and pages say what it declares.

- `edges()`, which the diagrams draw from the `transitions` machine, holds exactly the
  declaration's rules (source, event, destination); each view (Mermaid states, the seed bug's
  flowchart with its refused move, a highlighted state in DOT and Mermaid) names every state and every
  edge label, and the refused move's note;
- the generated docs (lifecycle.md, sglang.md and, with pygraphviz, the SVGs) are the
  committed files under docs/ byte for byte;
- names to highlight, refused moves and formats are checked: a declared rule is no refused
  move, an unknown name or format is refused naming it; the ink reads on white, black and the
  refused red; each group has its own fill.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from slotwarden.cli.docs import generated
from slotwarden.model import palette
from slotwarden.model.diagram import UnknownName, dot, edges, mermaid, mermaid_flow, parse_highlight, refused, render
from slotwarden.model.document import seed_bug
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import Event, Group, State

DOCS = Path(__file__).resolve().parents[2] / "docs"


def problems() -> list[str]:
    return _edges() + _views() + _committed() + _names()


def _edges() -> list[str]:
    drawn = {(src, dst, label.split(" ")[0]) for (src, dst), labels in edges().items() for label in labels}
    declared = {(r.source.name, r.dest.name, r.event.name.lower()) for r in LIFECYCLE.rules}
    if drawn != declared:
        return [f"the diagram's edges differ from the rules: drawn only {drawn - declared}, missing {declared - drawn}"]
    return []


def _views() -> list[str]:
    out = []
    view = seed_bug()
    texts = {
        "mermaid": mermaid(),
        "mermaid flowchart of the seed bug": mermaid_flow(highlight=view.highlight, refuse=view.refuse),
        "dot with PARKED highlighted": dot(highlight=State.PARKED),
        "mermaid flowchart with PARKED highlighted": mermaid_flow(highlight=State.PARKED),
        "dot of the seed bug": render("dot", highlight=view.highlight, refuse=view.refuse).decode(),
    }
    labels = {label for found in edges().values() for label in found}
    for name, text in texts.items():
        missing = [s.name for s in State if s.name not in text] + [x for x in labels if x not in text]
        if "seed bug" in name and view.refuse[0].note not in text:
            missing.append(view.refuse[0].note)
        if "PARKED highlighted" in name and palette.HIGHLIGHT not in text:
            missing.append(f"the highlight colour {palette.HIGHLIGHT}")
        if missing:
            out.append(f"the {name} view does not name {missing[:6]}")
    if render("mermaid") != mermaid().encode():
        out.append("render('mermaid') is not the Mermaid state diagram")
    return out


def _committed() -> list[str]:
    if not DOCS.is_dir():
        return [f"no docs/ folder at {DOCS} to compare the generated docs with"]
    svg = importlib.util.find_spec("pygraphviz") is not None
    return [
        f"docs/{name} differs from what the declaration generates (`slotwarden docs` rewrites it)"
        for name, data in generated(svg=svg).items()
        if not (DOCS / name).is_file() or (DOCS / name).read_bytes() != data
    ]


def _names() -> list[str]:
    out = []
    if parse_highlight(" Lend ") is not Event.LEND or parse_highlight("parked") is not State.PARKED:
        out.append("parse_highlight misreads 'Lend' or 'parked'")
    for thunk, kind, words in (
        (lambda: parse_highlight("nothing"), UnknownName, "unknown event or state 'nothing'; events: alloc"),
        (lambda: refused(State.LENT, Event.ROLLBACK, State.PARKED), ValueError, "is a declared rule"),
        (lambda: render("gif"), ValueError, "unknown diagram format 'gif'"),
    ):
        try:
            thunk()
            out.append(f"accepted, not {kind.__name__} saying {words!r}")
        except Exception as e:  # noqa: BLE001 (the error is what is judged)
            if not isinstance(e, kind) or words not in str(e):
                out.append(f"{type(e).__name__} {str(e)[:100]!r}; want {kind.__name__} saying {words!r}")
    for fill, ink in (("#ffffff", "#000000"), ("#000000", "#ffffff"), (palette.REFUSED, "#ffffff")):
        if palette.ink(fill) != ink:
            out.append(f"the ink on {fill} is {palette.ink(fill)}, not {ink}")
    if len({palette.colour(g) for g in Group}) != len(Group):
        out.append("two groups share a fill colour")
    return out
