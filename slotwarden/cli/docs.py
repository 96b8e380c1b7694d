"""The generated documentation: what `slotwarden docs` writes and the drift test compares."""

from __future__ import annotations

from pathlib import Path

from slotwarden.adapters.sglang.document import document as sglang_document
from slotwarden.model.diagram import RenderUnavailable, render
from slotwarden.model.document import SEED_BUG_SVG, lifecycle_markdown, seed_bug

PICTURES = ("lifecycle.svg", SEED_BUG_SVG)
"""The rendered pictures under docs/ (they need pygraphviz)."""


def generated(svg: bool = True) -> dict[str, bytes]:
    """{file name under docs/: content}. The pictures need pygraphviz; without it, they are
    left out when `svg` is False and raise `RenderUnavailable` otherwise."""
    files = {"lifecycle.md": lifecycle_markdown().encode(), "sglang.md": sglang_document().encode()}
    if svg:
        view = seed_bug()
        files["lifecycle.svg"] = render("svg")
        files[SEED_BUG_SVG] = render("svg", highlight=view.highlight, refuse=view.refuse)
    return files


def write_docs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in generated().items():
        path = folder / name
        path.write_bytes(data)
        written.append(path)
    return written


__all__ = ["generated", "write_docs", "PICTURES", "RenderUnavailable"]
