"""The reachable-state counts of the correct scheduler, pinned, stateright style: (states,
transitions) of each checked bounds, keyed by the bounds' text. Any change to the model, the
scheduler's policy or the state reduction shows here. `slotwarden verify` compares every
exhaustive row with its pin (a mismatch fails the row; a bounds with no pin is "unpinned", which
fails only for a bounds of the default run); tests/verification/checker/test_search.py
re-checks the cheap ones. The counts are of classes of worlds under the renaming of requests,
sessions and slot ids (`symmetry`), but for speculative windows, whose worlds are kept exactly.
"""

from __future__ import annotations

TEST_COUNTS = {  # the tests' bounds (checker.TEST_BOUNDS) not also in the default run
    "slots=1 requests=2 sessions=1 overlap=off": (57, 172),
    "slots=3 requests=3 sessions=0 overlap=off nodes=1": (106, 460),
    "slots=3 requests=4 sessions=0 overlap=on": (898, 5566),
}

DEFAULT_COUNTS = {  # checker.DEFAULT_BOUNDS, in order
    "slots=1 requests=3 sessions=1 overlap=off": (148, 491),
    "slots=2 requests=3 sessions=1 overlap=off": (287, 1099),
    "slots=3 requests=3 sessions=1 overlap=off": (287, 1099),
    "slots=1 requests=3 sessions=1 overlap=on": (272, 1267),
    "slots=2 requests=3 sessions=1 overlap=on": (1484, 7784),
    "slots=3 requests=3 sessions=1 overlap=on": (3816, 20314),
    "slots=1 requests=4 sessions=2 overlap=off": (960, 4105),
    "slots=2 requests=4 sessions=2 overlap=off": (2679, 12773),
    "slots=3 requests=4 sessions=2 overlap=off": (3696, 18767),
    "slots=1 requests=4 sessions=2 overlap=on": (1700, 10409),
    "slots=2 requests=4 sessions=2 overlap=on": (12117, 83576),
    "slots=3 requests=4 sessions=1 overlap=on": (11934, 78435),
    "slots=4 requests=5 sessions=2 overlap=off turns=1": (4546, 29619),
    "slots=4 requests=3 sessions=1 overlap=on": (7573, 40830),
    "slots=3 requests=5 sessions=2 overlap=on turns=1": (28093, 238751),
    "slots=2 requests=3 sessions=0 overlap=on nodes=2": (291, 1358),
    "slots=3 requests=3 sessions=0 overlap=on nodes=1": (1319, 6610),
    "slots=3 requests=4 sessions=0 overlap=on nodes=2": (2264, 12863),
    "slots=2 requests=4 sessions=1 overlap=on nodes=1": (4075, 24601),
    "slots=3 requests=3 sessions=1 overlap=on nodes=1": (4703, 24519),
    "slots=3 requests=4 sessions=1 overlap=off nodes=2": (1514, 7312),
    "slots=4 requests=5 sessions=2 overlap=on turns=1": (101025, 905802),
    "slots=4 requests=5 sessions=2 overlap=on": (226994, 1792427),
    "slots=5 requests=6 sessions=2 overlap=on turns=1": (438256, 4527653),
    "slots=4 requests=5 sessions=1 overlap=on nodes=2": (187017, 1345320),
    "slots=5 requests=6 sessions=2 overlap=on": (1648278, 15455451),
    # speculative windows: worlds kept exactly, not classes under renaming (`symmetry.Codec.exact`)
    "slots=3 requests=3 sessions=1 overlap=on drafts=1": (22550, 121495),
    "slots=4 requests=3 sessions=1 overlap=on drafts=2": (153572, 846074),
    "slots=4 requests=2 sessions=0 overlap=on nodes=1 drafts=1": (45960, 212036),
}

THOROUGH_COUNTS = {  # bounds only `verify --thorough` checks, pinned from a full run (too long for a test)
    "slots=4 requests=5 sessions=2 overlap=off": (5607, 30114),
    "slots=3 requests=4 sessions=1 overlap=on nodes=2": (21746, 135651),
    "slots=4 requests=6 sessions=2 overlap=on": (621434, 5670528),
    "slots=5 requests=5 sessions=2 overlap=on": (470887, 3773389),
    "slots=4 requests=6 sessions=2 overlap=on turns=1": (143249, 1406532),
    "slots=4 requests=7 sessions=2 overlap=on": (1010273, 10187907),
    "slots=4 requests=6 sessions=1 overlap=on nodes=2": (311501, 2475198),
    "slots=5 requests=5 sessions=1 overlap=on nodes=2": (588681, 4308284),
    "slots=5 requests=7 sessions=2 overlap=on": (3185992, 33492841),
    "slots=4 requests=6 sessions=2 overlap=on nodes=2": (1339316, 11421047),
    "slots=5 requests=6 sessions=2 overlap=on nodes=2": (4143363, 35647829),
    "slots=6 requests=7 sessions=2 overlap=on": (7916292, 85855219),
}


def pin_of(bounds) -> tuple[int, int] | None:
    """The pinned (states, transitions) of `bounds`, or None if it has no pin."""
    key = str(bounds)
    for table in (DEFAULT_COUNTS, THOROUGH_COUNTS, TEST_COUNTS):
        if key in table:
            return table[key]
    return None
