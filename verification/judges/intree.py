"""Run slotwarden's command line from another checkout (a mutant's copy): `python intree.py ROOT
ARGS...` maps slotwarden and slotwarden.model/.runtime/.kernels/.verification to ROOT's folders
(pyproject.toml's package-dir) ahead of the installed package, then runs `slotwarden ARGS`.
Run as a script, never imported: nothing of slotwarden may be imported before the mapping."""

import sys
import tomllib
from importlib.util import spec_from_file_location
from pathlib import Path


class TreeFinder:
    """Finds the top-level packages of one checkout; their submodules follow their __path__."""

    mapping: dict[str, str] = {}

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        folder = cls.mapping.get(fullname)
        if folder is None:
            return None
        return spec_from_file_location(fullname, Path(folder) / "__init__.py", submodule_search_locations=[folder])


def install(root: Path) -> None:
    """Put `root`'s packages ahead of every other finder (in this process and its forks)."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    dirs = config["tool"]["setuptools"]["package-dir"]
    TreeFinder.mapping = {name: str((root / folder).resolve()) for name, folder in dirs.items()}
    sys.meta_path.insert(0, TreeFinder)


if __name__ == "__main__":
    sys.path.pop(0)  # this script's folder: its modules are not top-level ones
    install(Path(sys.argv[1]))
    from slotwarden.cli.commands import main

    raise SystemExit(main(sys.argv[2:]))
