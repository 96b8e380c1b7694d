"""The command line's user errors: argument types, output paths and devices, checked before
any work starts. Each failure is a `UsageError`, which `slotwarden.cli.commands.main` prints as
one line and turns into exit status 2 (never a traceback). `UsageError` lives in
`slotwarden.verification.usage`, beside `output_folder`: verify raises them too."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from slotwarden.model.errors import SHOWN, cut, shown
from slotwarden.verification.usage import UsageError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise `UsageError` (one line) instead of printing the
    usage and exiting; its subcommand parsers are of the same kind."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {cut(message, 2 * SHOWN)} (see {self.prog} --help)")


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
        raise argparse.ArgumentTypeError(f"want a positive number of seconds, not {shown(text)}")
    return value


def _int(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want {what}, not {shown(text)}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"want {what}, not {shown(text)}")
    return value


def nameable(path: str, flag: str) -> Path:
    """`path` is a name the system takes (not too long, no NUL byte), whether it exists or not."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except (OSError, ValueError) as exc:
        raise UsageError(f"{flag} {cut(path)}: {getattr(exc, 'strerror', None) or exc}") from None
    return Path(path)


def output_file(path: str, flag: str) -> Path:
    """`path` can be written as a file: not a folder, its folder exists and takes a new file
    (probed by creating it; a probe file that did not exist before is removed again)."""
    p = nameable(path, flag)
    if p.is_dir():
        raise UsageError(f"{flag} {cut(path)}: is a folder, not a file")
    folder = p.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {cut(path)}: the folder {shown(str(folder))} does not exist")
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {cut(path)}: cannot write there ({exc.strerror or exc})") from None
    if not existed:
        p.unlink()
    return p


def plot_file(path: str, flag: str) -> Path:
    """`output_file`, and its suffix names a format matplotlib writes (none: png), when
    matplotlib is there (without it the plot says how to get it)."""
    p = output_file(path, flag)
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return p
    formats = FigureCanvasBase.get_supported_filetypes()
    if p.suffix and p.suffix[1:].lower() not in formats:
        raise UsageError(
            f"{flag} {cut(path)}: matplotlib writes no {shown(p.suffix[1:])} file (one of {', '.join(formats)})"
        )
    return p


def device(name: str | None, flag: str = "--device"):
    """The torch device `name` names (None: cuda if available, else cpu), usable here."""
    import torch

    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise UsageError(f"{flag} {cut(name)}: not a torch device (cpu, cuda, cuda:1, ...)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{flag} {cut(name)}: no CUDA device here")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise UsageError(f"{flag} {cut(name)}: only {torch.cuda.device_count()} CUDA devices here")
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"{flag} {cut(name)}: only cpu and cuda devices are supported")
    return dev
