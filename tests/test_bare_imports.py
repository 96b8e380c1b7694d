"""The folders model/, runtime/, kernels/ and verification/ are the packages slotwarden.<name>.

Imported under their bare names from the repository root they would be second copies of the
same modules (a second `State` class: `==` holds, `is` fails), so each refuses, naming the
right import."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("model", "runtime", "kernels", "verification")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)


def test_every_bare_import_fails_naming_the_right_one():
    code = (
        "import sys, importlib\n"
        "sys.path.insert(0, '')\n"
        f"for name in {FOLDERS!r} + ('model.vocabulary',):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as exc:\n"
        "        print(name, '->', exc)\n"
        "    else:\n"
        "        print(name, '-> imported')\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" -> ", 1) for line in out.stdout.splitlines())
    for name in FOLDERS:
        assert f"use `import slotwarden.{name}`" in lines[name], lines[name]
    assert "use `import slotwarden.model`" in lines["model.vocabulary"]


def test_the_package_imports_still_work_from_the_root():
    out = _run(
        "import sys; sys.path.insert(0, '')\n"
        "import slotwarden.model.vocabulary as v, slotwarden.runtime, slotwarden.verification\n"
        "from slotwarden.model.lifecycle import LIFECYCLE\n"
        "assert LIFECYCLE.states[0].state is v.State.FREE\n"
        "print('ok')\n"
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("name", FOLDERS)
def test_each_guard_is_what_refuses(name, tmp_path):
    """Broken variant: the same folder with its guard removed imports under its bare name
    (the second copy the guard exists to prevent)."""
    init = (ROOT / name / "__init__.py").read_text()
    assert f'if __name__ != "slotwarden.{name}"' in init
    copy = tmp_path / name
    copy.mkdir()
    (copy / "__init__.py").write_text(init.split("if __name__ !=", 1)[0])
    out = subprocess.run(
        [sys.executable, "-c", f"import {name}; print({name}.__name__)"], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.strip() == name, out.stderr
    (copy / "__init__.py").write_text(init.split("\nfrom ", 1)[0])  # the guard, without the imports after it
    out = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and f"import slotwarden.{name}" in out.stderr
