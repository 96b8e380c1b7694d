"""The command line: `slotwarden verify | diagram | docs | bench | demo | check-trace`."""

from slotwarden.cli.commands import main

__all__ = ["main"]
