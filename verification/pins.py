"""The reachable-state counts of the correct scheduler, pinned, stateright style: (states,
transitions) of each checked bounds, keyed by the bounds' text. Any change to the model, the
scheduler's policy or the state reduction shows here. `slotwarden verify` compares every
exhaustive row with its pin (a mismatch fails the row; a bounds with no pin is "unpinned", which
fails only for a bounds of the default run); tests/test_checker.py re-checks the cheap ones."""

from __future__ import annotations

TEST_COUNTS = {  # the tests' bounds (checker.TEST_BOUNDS) not also in the default run
    "slots=1 requests=2 sessions=1 overlap=off": (57, 172),
    "slots=3 requests=3 sessions=0 overlap=off nodes=1": (521, 2152),
}

DEFAULT_COUNTS = {  # checker.DEFAULT_BOUNDS, in order
    "slots=1 requests=3 sessions=1 overlap=off": (148, 491),
    "slots=2 requests=3 sessions=1 overlap=off": (574, 2198),
    "slots=3 requests=3 sessions=1 overlap=off": (1680, 6405),
    "slots=1 requests=3 sessions=1 overlap=on": (272, 1267),
    "slots=2 requests=3 sessions=1 overlap=on": (2936, 15468),
    "slots=3 requests=3 sessions=1 overlap=on": (21606, 116184),
    "slots=1 requests=4 sessions=2 overlap=off": (960, 4105),
    "slots=2 requests=4 sessions=2 overlap=off": (5358, 25546),
    "slots=3 requests=4 sessions=2 overlap=off": (22134, 112323),
    "slots=1 requests=4 sessions=2 overlap=on": (1700, 10409),
    "slots=2 requests=4 sessions=2 overlap=on": (24042, 166236),
    "slots=3 requests=4 sessions=1 overlap=on": (64938, 429960),
    "slots=4 requests=5 sessions=2 overlap=off turns=1": (82728, 525426),
    "slots=4 requests=3 sessions=1 overlap=on": (152320, 837864),
    "slots=3 requests=5 sessions=2 overlap=on turns=1": (150669, 1282449),
    "slots=2 requests=3 sessions=0 overlap=on nodes=2": (554, 2570),
    "slots=3 requests=3 sessions=0 overlap=on nodes=1": (7002, 34792),
    "slots=3 requests=4 sessions=0 overlap=on nodes=2": (11919, 67124),
    "slots=2 requests=4 sessions=1 overlap=on nodes=1": (8020, 48322),
    "slots=3 requests=3 sessions=1 overlap=on nodes=1": (26856, 141081),
    "slots=3 requests=4 sessions=1 overlap=off nodes=2": (8370, 39894),
}

THOROUGH_COUNTS = {  # bounds only `verify --thorough` checks, pinned from a full run (too long for a test)
    "slots=4 requests=5 sessions=2 overlap=on turns=1": (1911648, 17309846),
}


def pin_of(bounds) -> tuple[int, int] | None:
    """The pinned (states, transitions) of `bounds`, or None if it has no pin."""
    key = str(bounds)
    for table in (DEFAULT_COUNTS, THOROUGH_COUNTS, TEST_COUNTS):
        if key in table:
            return table[key]
    return None
