"""slotwarden as an SGLang plugin: the environment switch.

SGLang loads the entry points of its group `sglang.srt.plugins` early in every process it
starts (the scheduler's included, before any pool is built) and calls each. With
`SLOTWARDEN_SGLANG=1`, `load()` installs the adapter there; unset or `0`, it does nothing.
`SLOTWARDEN_SGLANG_TRACE=path` also writes each process's moves to `path` (a `{pid}` in it is
replaced by the process id, so that several scheduler processes do not share one file).
"""

from __future__ import annotations

import os

SWITCH, TRACE = "SLOTWARDEN_SGLANG", "SLOTWARDEN_SGLANG_TRACE"


def load() -> None:
    if os.environ.get(SWITCH, "0") in ("", "0"):
        return
    from slotwarden.adapters.sglang.install import install

    trace = os.environ.get(TRACE) or None
    install(trace=None if trace is None else trace.replace("{pid}", str(os.getpid())))
