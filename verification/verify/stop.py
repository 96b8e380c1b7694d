"""`slotwarden verify --fail-fast`: the first failing row ends the run. `FailFast` carries it out
of the loops; `stop` ends the worker processes (their jobs are not waited for) and drops the
jobs not yet started, so that a run that fails early costs little (the mutation campaign)."""

from __future__ import annotations

import multiprocessing

from slotwarden.model.errors import SlotwardenError


class FailFast(SlotwardenError):
    """Raised by the row printer at the first failing row under --fail-fast."""


def stop(pool) -> bool:
    """End the worker processes of `pool` now and drop its queued jobs; True (the run stopped)."""
    print("--fail-fast: stopped at the first failing job; the jobs still running were ended", flush=True)
    pool.shutdown(wait=False, cancel_futures=True)
    for child in multiprocessing.active_children():
        child.terminate()
    return True
