"""The generated documentation: what `slotwarden docs` writes and the drift test compares."""

from __future__ import annotations

from pathlib import Path

from slotwarden.model.diagram import RenderUnavailable, render
from slotwarden.model.document import lifecycle_markdown


def generated(svg: bool = True) -> dict[str, bytes]:
    """{file name under docs/: content}. The SVG needs pygraphviz; without it, it is left out
    when `svg` is False and raises `RenderUnavailable` otherwise."""
    files = {"lifecycle.md": lifecycle_markdown().encode()}
    if svg:
        files["lifecycle.svg"] = render("svg")
    return files


def write_docs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in generated().items():
        path = folder / name
        path.write_bytes(data)
        written.append(path)
    return written


__all__ = ["generated", "write_docs", "RenderUnavailable"]
