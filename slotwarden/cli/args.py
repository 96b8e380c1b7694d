"""The command line's user errors: argument types, output paths and devices, checked before
any work starts. Each failure is a `UsageError`, which `slotwarden.cli.commands.main` prints as
one line and turns into exit status 2 (never a traceback). `UsageError` lives in
`slotwarden.verification.usage`, beside `output_folder`: verify raises them too."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from slotwarden.verification.usage import UsageError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise `UsageError` (one line) instead of printing the
    usage and exiting; its subcommand parsers are of the same kind."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def positive_int(text: str) -> int:
    return _int(text, 1, "a positive int")


def count(text: str) -> int:
    return _int(text, 0, "an int >= 0")


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"want a positive number of seconds, not {text!r}")
    return value


def _int(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want {what}, not {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"want {what}, not {text!r}")
    return value


def output_file(path: str, flag: str) -> Path:
    """`path` can be written as a file: not a folder, its folder exists and takes a new file
    (probed by creating it; a probe file that did not exist before is removed again)."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a folder, not a file")
    folder = p.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: the folder {str(folder)!r} does not exist")
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write there ({exc.strerror or exc})") from None
    if not existed:
        p.unlink()
    return p


def device(name: str | None, flag: str = "--device"):
    """The torch device `name` names (None: cuda if available, else cpu), usable here."""
    import torch

    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise UsageError(f"{flag} {name}: not a torch device (cpu, cuda, cuda:1, ...)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{flag} {name}: no CUDA device here")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise UsageError(f"{flag} {name}: only {torch.cuda.device_count()} CUDA devices here")
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"{flag} {name}: only cpu and cuda devices are supported")
    return dev
