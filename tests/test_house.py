"""The house rules the tree keeps: every Python file under 500 lines, and every module docstring
at most 15 lines (what the module is and its contract; measurements belong in benchmarks/).
Each rule is shown catching a planted file."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500
MAX_DOCSTRING = 15


def python_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return [ROOT / name for name in listed.stdout.split()]
    return [p for p in ROOT.rglob("*.py") if ".venv" not in p.parts and "build" not in p.parts]


def too_long(path: Path) -> int | None:
    """The file's line count when it is not under `MAX_LINES`."""
    n = len(path.read_text().splitlines())
    return n if n >= MAX_LINES else None


def docstring_lines(path: Path) -> int:
    body = ast.parse(path.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


def test_every_python_file_is_under_500_lines():
    files = python_files()
    assert len(files) > 100  # the walk found the tree
    long = {str(p.relative_to(ROOT)): n for p in files if (n := too_long(p))}
    assert not long, f"split along their seams: {long}"


def test_every_module_docstring_is_at_most_15_lines():
    wordy = {str(p.relative_to(ROOT)): n for p in python_files() if (n := docstring_lines(p)) > MAX_DOCSTRING}
    assert not wordy, f"module docstrings over {MAX_DOCSTRING} lines: {wordy}"


def test_the_rules_catch_a_planted_file(tmp_path):
    long = tmp_path / "long.py"
    long.write_text("x = 1\n" * MAX_LINES)
    wordy = tmp_path / "wordy.py"
    wordy.write_text('"""' + "a line\n" * MAX_DOCSTRING + '"""\n')
    assert too_long(long) == MAX_LINES and docstring_lines(wordy) == MAX_DOCSTRING + 1
    short = tmp_path / "short.py"
    short.write_text('"""One line."""\n' + "x = 1\n" * (MAX_LINES - 2))
    assert too_long(short) is None and docstring_lines(short) == 1
