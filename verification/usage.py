"""A user's errors, found before any work starts: `UsageError` (its message is one line; the
command line prints it and exits with status 2), and `output_folder`, the check that a folder
named on the command line takes new files. verify raises them; the CLI imports them from here."""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError
import os
from pathlib import Path


class UsageError(SlotwardenError):
    """A user error on the command line; the message is one line."""


def output_folder(path: str, flag: str) -> Path:
    """`path` is (or can be made as) a folder that takes new files; its parent must exist."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {path}: is a file, not a folder")
    if not p.exists() and not p.parent.is_dir():
        raise UsageError(f"{flag} {path}: the folder {str(p.parent)!r} does not exist")
    try:
        p.mkdir(exist_ok=True)
        probe = p / f".slotwarden-probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write there ({exc.strerror or exc})") from None
    return p
