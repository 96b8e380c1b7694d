"""The checker's bounds: the default run's (`DEFAULT_BOUNDS`), `--thorough`'s (those and larger
ones) and the tests' (`TEST_BOUNDS`). Every bounds of the default and test runs has its
reachable-state counts pinned in verification/checker/pins.py."""

from __future__ import annotations

from slotwarden.verification.abstract import Bounds

DEFAULT_BOUNDS = (
    # a plain request and a two-turn session (s100 = r0, r1; r2 plain): slots 1..3, overlap off/on
    Bounds(slots=1, requests=3, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=False),
    Bounds(slots=3, requests=3, sessions=1, overlap=False),
    Bounds(slots=1, requests=3, sessions=1, overlap=True),
    Bounds(slots=2, requests=3, sessions=1, overlap=True),
    Bounds(slots=3, requests=3, sessions=1, overlap=True),
    # two sessions competing for slots (s100 = r0, r1; s101 = r2; r3 plain)
    Bounds(slots=1, requests=4, sessions=2, overlap=False),
    Bounds(slots=2, requests=4, sessions=2, overlap=False),
    Bounds(slots=3, requests=4, sessions=2, overlap=False),
    Bounds(slots=1, requests=4, sessions=2, overlap=True),
    Bounds(slots=2, requests=4, sessions=2, overlap=True),
    # two plain requests and a two-turn session on three slots, overlapped (s100 = r0, r1; r2, r3 plain)
    Bounds(slots=3, requests=4, sessions=1, overlap=True),
    # four slots, two one-turn sessions and three plain requests (s100 = r0; s101 = r1; r2..r4 plain):
    # the renaming of sessions and of plain requests makes it one of the cheaper bounds
    Bounds(slots=4, requests=5, sessions=2, overlap=False, turns=1),
    # overlapped: four slots under a two-turn session and a plain request (s100 = r0, r1; r2 plain),
    # and the five-request, two-session workload on three slots (s100 = r0; s101 = r1; r2..r4 plain)
    Bounds(slots=4, requests=3, sessions=1, overlap=True),
    Bounds(slots=3, requests=5, sessions=2, overlap=True, turns=1),
    # the prefix cache: plain requests donating, matching (several readers of one node, copies
    # in flight) and evicting on 2-3 slots, overlapped, and beside a two-turn session
    Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2),
    Bounds(slots=3, requests=3, sessions=0, overlap=True, nodes=1),
    Bounds(slots=3, requests=4, sessions=0, overlap=True, nodes=2),
    Bounds(slots=2, requests=4, sessions=1, overlap=True, nodes=1),
    Bounds(slots=3, requests=3, sessions=1, overlap=True, nodes=1),
    Bounds(slots=3, requests=4, sessions=1, overlap=False, nodes=2),  # two donors beside a two-turn session
    # four slots, five requests, two sessions, overlapped: two one-turn sessions and three plain
    # requests (s100 = r0; s101 = r1; r2..r4 plain), and two two-turn sessions and a plain request
    # (s100 = r0, r1; s101 = r2, r3; r4 plain)
    Bounds(slots=4, requests=5, sessions=2, overlap=True, turns=1),
    Bounds(slots=4, requests=5, sessions=2, overlap=True),
    # five slots, six requests, two sessions, overlapped (s100 = r0; s101 = r1; r2..r5 plain), and
    # the prefix cache on four slots: three plain donors beside a two-turn session (s100 = r0, r1)
    Bounds(slots=5, requests=6, sessions=2, overlap=True, turns=1),
    Bounds(slots=4, requests=5, sessions=1, overlap=True, nodes=2),
    # five slots, six requests, two two-turn sessions, overlapped (s100 = r0, r1; s101 = r2, r3; r4, r5 plain)
    Bounds(slots=5, requests=6, sessions=2, overlap=True),
    # speculative windows of one and two drafts (two and three slots), overlapped, kept exactly (no
    # renaming): beside a two-turn session and a plain request (s100 = r0, r1; r2 plain), and beside
    # the prefix cache with two plain requests
    Bounds(slots=3, requests=3, sessions=1, overlap=True, drafts=1),
    Bounds(slots=4, requests=3, sessions=1, overlap=True, drafts=2),
    Bounds(slots=4, requests=2, sessions=0, overlap=True, nodes=1, drafts=1),
)
"""The default run (the reachable-state counts are pinned in verification/checker/pins.py)."""

THOROUGH_BOUNDS = DEFAULT_BOUNDS + (
    Bounds(slots=4, requests=5, sessions=2, overlap=False),  # s100 = r0, r1; s101 = r2, r3; r4 plain
    Bounds(slots=3, requests=4, sessions=1, overlap=True, nodes=2),  # two plain donors beside a session
    Bounds(slots=4, requests=6, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4, r5 plain
    Bounds(slots=5, requests=5, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4 plain
    Bounds(slots=4, requests=6, sessions=2, overlap=True, turns=1),  # s100 = r0; s101 = r1; r2..r5 plain
    Bounds(slots=4, requests=7, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4..r6 plain
    Bounds(slots=4, requests=6, sessions=1, overlap=True, nodes=2),  # four plain donors beside a session
    Bounds(slots=5, requests=5, sessions=1, overlap=True, nodes=2),  # three plain donors, five slots
    Bounds(slots=5, requests=7, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4..r6 plain
    Bounds(slots=4, requests=6, sessions=2, overlap=True, nodes=2),  # two plain donors beside two sessions
    Bounds(slots=5, requests=6, sessions=2, overlap=True, nodes=2),  # the same, on five slots
    Bounds(slots=6, requests=7, sessions=2, overlap=True),  # s100 = r0, r1; s101 = r2, r3; r4..r6 plain
)
"""`verify --thorough`: the default bounds and larger ones (four to six slots, up to seven
requests: two sessions of one or two turns and up to four plain requests, overlap off and on;
the prefix cache on three to five slots beside one or two sessions with two to four plain
donors)."""

TEST_BOUNDS = (
    Bounds(slots=1, requests=2, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=False),
    Bounds(slots=2, requests=3, sessions=1, overlap=True),
    Bounds(slots=1, requests=4, sessions=2, overlap=False),
    Bounds(slots=3, requests=3, sessions=0, overlap=False, nodes=1),  # two readers of one node
    Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2),  # an unfenced write dropped
    Bounds(slots=3, requests=3, sessions=1, overlap=True, drafts=1),  # every rule of a speculative window
    Bounds(slots=3, requests=4, sessions=0, overlap=True),  # a padded launch; rows condensed under a step
)
"""Small bounds for the tests; their state counts are pinned in verification/checker/pins.py."""
