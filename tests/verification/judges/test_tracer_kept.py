"""The interrupt sweep's tracer is put back to the one it found: under `verify --coverage` that is
coverage.py's, and dropping it (the old `sys.settrace(None)`) stopped coverage for the rest of
the run, so every line after the sweep counted as missed."""

from __future__ import annotations

import sys

from slotwarden.verification import interrupts


def test_the_sweep_puts_back_the_tracer_it_found():
    def outer(frame, event, arg):  # stands in for coverage.py's tracer
        return None

    before = sys.gettrace()
    sys.settrace(outer)
    try:
        assert interrupts._traced(interrupts.Raiser(None), lambda: 7) == 7
        after = sys.gettrace()
    finally:
        sys.settrace(before)
    assert after is outer, after
