"""Generated docs match the declaration; the CLI draws diagrams and documents itself."""

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from slotwarden.cli.commands import build_parser, main
from slotwarden.cli.docs import PICTURES, generated
from slotwarden.model import diagram
from slotwarden.model.document import REGENERATE

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _has_pygraphviz():
    try:
        import pygraphviz  # noqa: F401

        return True
    except ImportError:
        return False


@pytest.mark.parametrize("name", ["lifecycle.md", "sglang.md", *PICTURES])
def test_checked_in_docs_match_the_declaration(name):
    if name.endswith(".svg") and not _has_pygraphviz():
        pytest.skip("the SVG needs pygraphviz (pip install 'slotwarden[render]')")
    want = generated(svg=name.endswith(".svg"))[name]
    have = (DOCS / name).read_bytes()
    assert have == want, f"docs/{name} drifted from the model: regenerate it with `{REGENERATE}` (or `make docs`)"


def test_mermaid_diagram_has_the_four_states_and_labelled_edges(capsys):
    assert main(["diagram", "--format", "mermaid"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stateDiagram-v2")
    for state in ("FREE", "state BATCH_OWNED {", "state SESSION_OWNED {", "RELEASED"):
        assert state in out
    assert "LENT --> PARKED: rollback (borrowing request) / abort (borrowing request)" in out
    assert "PARKED --> RELEASED: close (owning session)" in out
    assert "LENT --> FREE" not in out


def test_dot_diagram_clusters_the_groups():
    text = diagram.dot()
    assert "subgraph cluster_SESSION_OWNED" in text and 'label="lend (owning session)"' in text


@pytest.mark.skipif(not _has_pygraphviz(), reason="needs pygraphviz")
def test_svg_is_valid_svg(tmp_path):
    out = tmp_path / "l.svg"
    assert main(["diagram", "--format", "svg", "-o", str(out)]) == 0
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    assert "SESSION_OWNED" in out.read_text() and "PARKED · session" in out.read_text()


def test_svg_without_pygraphviz_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pygraphviz", None)
    assert main(["diagram", "--format", "svg", "-o", "never-written.svg"]) == 2
    assert "slotwarden[render]" in capsys.readouterr().err
    assert not Path("never-written.svg").exists()


def test_every_subcommand_has_help():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name in commands:
        result = subprocess.run([sys.executable, "-m", "slotwarden", name, "--help"], capture_output=True, text=True)
        assert result.returncode == 0 and "usage: slotwarden " + name in result.stdout
