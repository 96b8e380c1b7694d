"""slotwarden as an SGLang plugin: the environment switch.

SGLang loads the entry points of its group `sglang.srt.plugins` early in every process it
starts (the scheduler's included, before any pool is built) and calls each. With
`SLOTWARDEN_SGLANG=1`, `load()` installs the adapter there; unset or `0`, it does nothing.
`SLOTWARDEN_SGLANG_TRACE=path` also writes each process's moves to `path` (a `{pid}` in it is
replaced by the process id, so that several scheduler processes do not share one file).
`SLOTWARDEN_SGLANG_FIRST_READ=1` also judges each step's first reads (`install(first_read=True)`).
"""

from __future__ import annotations

import os

SWITCH, TRACE, FIRST_READ = "SLOTWARDEN_SGLANG", "SLOTWARDEN_SGLANG_TRACE", "SLOTWARDEN_SGLANG_FIRST_READ"


def load() -> None:
    if os.environ.get(SWITCH, "0") in ("", "0"):
        return
    from slotwarden.adapters.sglang.install import install

    trace = os.environ.get(TRACE) or None
    first_read = os.environ.get(FIRST_READ, "0") not in ("", "0")
    install(trace=None if trace is None else trace.replace("{pid}", str(os.getpid())), first_read=first_read)
