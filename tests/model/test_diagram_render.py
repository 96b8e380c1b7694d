"""The rendered diagrams name every state, group and event, and are not blank inside the boxes.

Each check is also run on a diagram left to the renderer's default node labels (how
docs/lifecycle.svg was once drawn: seven empty boxes) and must reject it.
"""

import importlib.util
import io
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from slotwarden.cli.commands import main
from slotwarden.cli.docs import PICTURES, generated
from slotwarden.model import diagram, palette
from slotwarden.model.diagram import Refused, refused
from slotwarden.model.document import lifecycle_markdown, safety_properties, seed_bug
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import Event, Group, State

RENDER = pytest.mark.skipif(
    importlib.util.find_spec("pygraphviz") is None,
    reason="rendering needs pygraphviz (pip install 'slotwarden[render]')",
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
SVG = "{http://www.w3.org/2000/svg}"


def texts(svg: bytes) -> list[str]:
    """Every text element of an SVG, as drawn."""
    return ["".join(t.itertext()).strip() for t in ET.fromstring(svg).iter(f"{SVG}text")]


def drawn(svg: bytes) -> dict:
    """{(kind, title): [text, ...]} for graphviz's node, edge and cluster groups of an SVG."""
    found = {}
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        if g.get("class") in ("node", "edge", "cluster"):
            title = g.find(f"{SVG}title").text
            found.setdefault((g.get("class"), title), []).extend(
                "".join(t.itertext()).strip() for t in g.iter(f"{SVG}text")
            )
    return found


def missing(svg: bytes, lifecycle=LIFECYCLE) -> list[str]:
    """What the SVG fails to show: a state's name in its own box, a group's name anywhere, a
    rule's event at the head of an edge label line."""
    parts, everything = drawn(svg), texts(svg)
    edge_heads = {t.split(" ")[0] for (kind, _), lines in parts.items() if kind == "edge" for t in lines}
    gone = [
        s.state.name
        for s in lifecycle.states
        if not any(t.split(" ")[0] == s.state.name for t in parts.get(("node", s.state.name), []))
    ]
    gone += [s.group.name for s in lifecycle.states if s.group.name not in everything]
    gone += [r.event.name.lower() for r in lifecycle.rules if r.event.name.lower() not in edge_heads]
    return sorted(set(gone))


def renderer_default(dot_text: str) -> str:
    """The DOT text with the explicit node labels taken out. With the start point's label=""
    graphviz then draws every state's box empty (in a fresh process: see `render_fresh`)."""
    return re.sub(r'^(\s+\w+ \[)label="[^"]*", ', r"\1", dot_text, flags=re.M)


def render_fresh(dot_text: str, fmt: str) -> bytes:
    """`dot_text` rendered by graphviz in a new process, as `slotwarden docs` does. Graphviz
    keeps attribute defaults from one graph to the next within a process, so a graph that
    leaves its node labels to the default can come out differently after another one."""
    code = (
        "import sys, pygraphviz; "
        "sys.stdout.buffer.write(pygraphviz.AGraph(string=sys.stdin.read()).draw(format=sys.argv[1], prog='dot'))"
    )
    done = subprocess.run([sys.executable, "-c", code, fmt], input=dot_text.encode(), capture_output=True, check=True)
    return done.stdout


@RENDER
def test_svg_names_every_state_group_and_event():
    svg = diagram.render("svg")
    assert missing(svg) == []
    labels = texts(svg)
    for spec in LIFECYCLE.states:
        assert diagram.node_label(spec) in labels
    assert "PARKED · session" in labels and "FREE · nobody" in labels


@RENDER
def test_committed_svgs_name_every_state_group_and_event():
    for name in PICTURES:
        assert missing((DOCS / name).read_bytes()) == [], name


@RENDER
def test_the_svg_check_rejects_the_renderers_default_labels():
    blank = render_fresh(renderer_default(diagram.dot()), "svg")
    assert set(missing(blank)) >= {s.state.name for s in LIFECYCLE.states}


@RENDER
def test_the_svg_check_rejects_a_missing_event(monkeypatch):
    real = diagram._moves
    monkeypatch.setattr(diagram, "_moves", lambda lc: (m for m in real(lc) if m[2] is not Event.CLOSE))
    assert missing(diagram.render("svg")) == ["close"]


def test_every_state_is_filled_with_its_groups_colour():
    text = diagram.dot()
    for spec in LIFECYCLE.states:
        fill = palette.colour(spec.group)
        assert re.search(rf'^\s+{spec.state.name} \[label="[^"]+", fillcolor="{fill}"', text, re.M), spec.state.name
    for group in Group:  # the legend
        assert f'BGCOLOR="{palette.colour(group)}"' in text and f">{group.name}</TD>" in text


# -- the PNG: not blank inside the boxes -----------------------------------------------------
def boxes(svg: bytes) -> dict:
    """{state: (left, top, right, bottom)} of each node's outline in an SVG, in points of the
    page (graphviz translates the graph by the root group's transform)."""
    root = ET.fromstring(svg)
    tx, ty = (
        float(v) for v in re.search(r"translate\(([-\d.]+) ([-\d.]+)\)", root.find(f"{SVG}g").get("transform")).groups()
    )
    found = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "node":
            shape = g.find(f"{SVG}path")
            if shape is None:
                continue
            numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", shape.get("d"))]
            xs, ys = numbers[0::2], numbers[1::2]
            found[g.find(f"{SVG}title").text] = (min(xs) + tx, min(ys) + ty, max(xs) + tx, max(ys) + ty)
    return found


def blank_boxes(svg: bytes, png: bytes) -> list[str]:
    """The states whose box in the PNG holds nothing but its fill: no pixel in the middle of
    the box is far from the fill colour. `svg` is the same diagram, drawn by the same process
    (graphviz lays both out alike); it says where the boxes are."""
    Image = pytest.importorskip("PIL.Image", reason="the pixel check needs Pillow (comes with matplotlib)")
    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    scale = image.shape[1] / float(ET.fromstring(svg).get("width").removesuffix("pt"))  # pixels per point
    where = boxes(svg)
    blank = []
    for spec in LIFECYCLE.states:
        left, top, right, bottom = where[spec.state.name]
        dx, dy = (right - left) * 0.1, (bottom - top) * 0.25  # the middle, clear of the outline
        inside = image[
            int((top + dy) * scale) : int((bottom - dy) * scale), int((left + dx) * scale) : int((right - dx) * scale)
        ]
        corner = inside[0, 0]  # the fill, whatever it is
        inked = (np.abs(inside - corner).sum(axis=2) > 150).sum()
        if inked < 20:
            blank.append(spec.state.name)
    return blank


@RENDER
def test_png_boxes_are_not_blank():
    assert blank_boxes(diagram.render("svg"), diagram.render("png")) == []


@RENDER
def test_the_png_check_rejects_empty_boxes(monkeypatch):
    old = renderer_default(diagram.dot())
    states = {s.state.name for s in LIFECYCLE.states}
    assert set(blank_boxes(render_fresh(old, "svg"), render_fresh(old, "png"))) == states
    monkeypatch.setattr(diagram, "node_label", lambda spec: "")
    assert set(blank_boxes(diagram.render("svg"), diagram.render("png"))) == states


# -- highlight and refused moves -------------------------------------------------------------
@RENDER
def test_highlight_an_event_colours_every_edge_of_it_and_nothing_else():
    text = diagram.dot(highlight=Event.ROLLBACK)
    lit = [line for line in text.splitlines() if palette.HIGHLIGHT in line and "->" in line]
    assert len(lit) == sum(r.event is Event.ROLLBACK for r in LIFECYCLE.rules) == 5
    assert all('label="rollback (' in line and "abort" not in line for line in lit)
    assert "highlighted: rollback" in texts(diagram.render("svg", highlight=Event.ROLLBACK))


@RENDER
def test_highlight_a_state():
    text = diagram.dot(highlight=State.LENT)
    lit = [
        line.strip()
        for line in text.splitlines()
        if palette.HIGHLIGHT in line and not line.strip().startswith("legend")
    ]
    assert len(lit) == 1 and lit[0].startswith("LENT [")
    assert "highlighted: LENT" in texts(diagram.render("svg", highlight=State.LENT))


@RENDER
def test_cli_highlight_writes_svg(tmp_path):
    out = tmp_path / "h.svg"
    assert main(["diagram", "--format", "svg", "--highlight", "rollback", "-o", str(out)]) == 0
    assert missing(out.read_bytes()) == [] and palette.HIGHLIGHT in out.read_text()
    assert main(["diagram", "--format", "svg", "--highlight", "lent", "-o", str(out)]) == 0


@pytest.mark.parametrize("name", ["nonsense", "", "rolback"])
def test_cli_highlight_refuses_an_unknown_name_in_one_line(name, capsys):
    assert main(["diagram", "--highlight", name]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("slotwarden diagram: unknown event or state") and "rollback" in err and "LENT" in err


def test_mermaid_highlight_is_a_coloured_flowchart(capsys):
    assert main(["diagram", "--highlight", "rollback"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flowchart LR") and f"stroke:{palette.HIGHLIGHT}" in out


def test_a_refused_move_must_not_be_a_rule():
    with pytest.raises(ValueError, match="declared rule"):
        refused(State.LENT, Event.ROLLBACK, State.PARKED)


@RENDER
def test_seed_bug_picture_draws_the_refused_move_against_the_legal_one():
    view = seed_bug()
    assert view.refuse == (Refused(State.LENT, Event.ROLLBACK, State.FREE, view.refuse[0].note),)
    svg = generated()["seed-bug.svg"]
    assert missing(svg) == []
    assert any(t.startswith("rollback: refused") for t in texts(svg))
    text = diagram.dot(highlight=view.highlight, refuse=view.refuse)
    dashed = [line for line in text.splitlines() if "style=dashed" in line]
    assert len(dashed) == 1 and dashed[0].strip().startswith("LENT -> FREE") and palette.REFUSED in dashed[0]
    assert re.search(rf'LENT -> PARKED \[label="rollback \(borrowing request\)", color="{palette.HIGHLIGHT}"', text)


# -- the palette -----------------------------------------------------------------------------
def test_a_later_group_gets_a_spare_colour():
    from enum import IntEnum

    class Later(IntEnum):
        PINNED = 7

    assert palette.colour(Later.PINNED) in palette.SPARE
    assert len({palette.colour(g) for g in Group}) == len(Group)
    assert palette.ink(palette.colour(Group.BATCH_OWNED)) == "#ffffff"
    assert palette.ink(palette.colour(Group.FREE)) == "#000000"


def test_demo_plot_uses_the_palette(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    from slotwarden.cli import demo

    seen = []
    real = demo.colour
    monkeypatch.setattr(demo, "colour", lambda g: seen.append(g) or real(g))
    samples = [{g.name: 1 for g in Group}]
    result = {"samples": samples, "slots": 4, "workload": {"sessions": 1, "requests": 1}, "overlap": False}
    demo.plot(result, tmp_path / "p.png")
    assert sorted(seen) == sorted(Group)


# -- the reference page ----------------------------------------------------------------------
def test_lifecycle_page_has_every_rules_reason_and_every_propertys_checks():
    page = lifecycle_markdown()
    for r in LIFECYCLE.rules:
        assert r.why, f"rule {r.source.name} --{r.event.name}--> {r.dest.name} has no reason"
        row = f"| `{r.source.name}` | `{r.event.name.lower()}` |"
        assert any(line.startswith(row) and line.rstrip(" |").endswith(r.why) for line in page.splitlines())
    for p in safety_properties():
        assert p.checks, p.name
        assert f"| **{p.name}** | {p.text} | {'; '.join(p.checks)} |" in page
    for heading in ("## How to read this", "## Rules", "## Safety properties", "## Where to go next", "(howto.md)"):
        assert heading in page
    assert "slotwarden verify --report DIR" in page and "](seed-bug.svg)" in page


def test_every_proof_is_listed_under_its_property():
    from slotwarden.model.proofs import PROOFS

    listed = " ".join(c for p in safety_properties() for c in p.checks)
    for fn in PROOFS.values():
        assert f"`{fn.__name__}`" in listed
