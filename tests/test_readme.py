"""README's quick start runs as written: every ```python block of its "## Quick start" section
is run in a fresh namespace, and so is the cheap shell line `slotwarden diagram --format
mermaid`. The other shell lines are not run here: `make verify` and `make test` take longer
than the whole suite may. README stays short (at most 8 KB, a median sentence of at most 15
words), and every file it links to exists."""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Quick start"
CHEAP_SHELL = ("slotwarden diagram --format mermaid",)


def quick_start(text: str) -> str:
    """The text of the quick-start section (up to the next level-2 heading)."""
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", quick_start(text), flags=re.S | re.M)


def run_python(block: str) -> None:
    exec(compile(block, "README.md quick start", "exec"), {"__name__": "readme"})


def shell_lines(text: str) -> list[str]:
    """Each command of the quick start's sh blocks, without its comment."""
    return [line.split("#")[0].strip() for block in blocks(text, "sh") for line in block.splitlines() if line.strip()]


TEXT = README.read_text()


def test_the_quick_start_has_its_blocks():
    """The extraction finds the blocks: the library, the tiny engine, and the cheap shell line."""
    python = blocks(TEXT, "python")
    assert len(python) == 2
    assert any("GuardedAllocator" in b for b in python) and any("build(" in b for b in python)
    assert set(CHEAP_SHELL) <= set(shell_lines(TEXT))


@pytest.mark.parametrize("index", range(len(blocks(TEXT, "python"))))
def test_each_python_block_runs(index, capsys):
    run_python(blocks(TEXT, "python")[index])


@pytest.mark.parametrize("command", CHEAP_SHELL)
def test_cheap_shell_lines_run(command):
    argv = command.split()
    out = subprocess.run([sys.executable, "-m", "slotwarden", *argv[1:]], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("stateDiagram-v2")


def test_a_broken_snippet_fails():
    """The same extraction and run, on a quick start whose snippet no longer matches the code
    (the old argument order of `LedgerGuard.fire`), fails."""
    broken = TEXT.replace(
        "guard.fire(Event.ROLLBACK, ids, Actor.request(1))", "guard.fire(ids, Event.ROLLBACK, Actor.request(1))"
    )
    assert broken != TEXT
    block = next(b for b in blocks(broken, "python") if "LedgerGuard" in b)
    with pytest.raises(Exception):
        run_python(block)


def sentences(text: str) -> list[str]:
    """The prose's sentences: code blocks, headings and table rows dropped; each paragraph and
    list item split on a sentence end (. ! ? then a space, after any closing bracket or quote)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    units, unit = [], []
    for line in [*text.splitlines(), ""]:
        line = line.strip()
        item = re.match(r"^(?:[-*]|\d+\.)\s+", line)
        if not line or line.startswith(("#", "|")) or item:
            units.append(" ".join(unit))
            unit = [line[item.end() :]] if item else []
        else:
            unit.append(line)
    return [s for u in units for s in re.split(r"(?<=[.!?])[)\"'`]*\s+", u) if s.strip()]


def test_the_readme_stays_short():
    assert len(README.read_bytes()) <= 8 * 1024
    assert statistics.median(len(s.split()) for s in sentences(TEXT)) <= 15


def test_every_file_the_readme_links_exists():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    assert links and all((README.parent / link).is_file() for link in links), links
