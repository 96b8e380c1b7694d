"""The tree is formatted and linted by ruff as pyproject.toml configures it (line length 120).

Run `ruff format . && ruff check --fix .` to mend a failure. Skipped where ruff (the `dev`
extra, installed by `make`) is missing."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")


def _ruff(*args, cwd=ROOT):
    if not Path(RUFF).exists():
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return subprocess.run([RUFF, *args], cwd=cwd, capture_output=True, text=True)


def test_the_tree_is_formatted():
    done = _ruff("format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tree_is_lint_clean():
    done = _ruff("check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_badly_formatted_file_fails_the_check(tmp_path):
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("x = {  'a':1 }\nimport os\n")
    assert _ruff("format", "--check", ".", cwd=tmp_path).returncode != 0
    assert _ruff("check", ".", cwd=tmp_path).returncode != 0  # an unused import
