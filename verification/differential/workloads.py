"""The differential stage's random workloads: a seeded sequence of operations (submit, open a
session, send a turn, abort, close, step; with the prefix cache also follow-ups and
parallel-sampling groups) and a random scheduler configuration, so a run is reproducible."""

from __future__ import annotations

import random


def workload(rng: random.Random, length: int, follow: bool = False, groups: bool = False) -> tuple:
    """A random sequence of operations: ("submit", n, new), ("open",), ("turn", session, n,
    new), ("abort", request), ("close", session), ("step", times), with `follow`
    ("follow", request, new): a plain request continuing an earlier one, and with `groups`
    ("group", size, new, n, temperature): n samples of a prompt of `size` tokens, each group
    now and then followed by the aborts of all its siblings. Requests and sessions are named
    by their order of creation (a group's siblings, then its prompt request)."""
    ops, requests, sessions = [], 0, 0
    for _ in range(length):
        roll = rng.random()
        if groups and rng.random() < 0.1:
            op = ("group", rng.randint(2, 6), rng.randint(1, 3), rng.randint(2, 3), rng.choice([0.0, 1.0]))
            ops.append(op)
            if rng.random() < 0.3:  # after a few steps, every sibling aborted: the prompt request ends too
                ops.append(("step", rng.randint(0, 2)))
                ops += [("abort", requests + i) for i in range(op[3])]
            requests += new_requests(op)
        elif follow and requests and roll < 0.12:
            ops.append(("follow", rng.randrange(requests), rng.randint(1, 3)))
            requests += 1
        elif roll < 0.18:
            ops.append(("submit", rng.randint(1, 6), rng.randint(1, 4)))
            requests += 1
        elif roll < 0.26 or (roll < 0.42 and not sessions):
            ops.append(("open",))
            sessions += 1
        elif roll < 0.42:
            ops.append(("turn", rng.randrange(sessions), rng.randint(1, 4), rng.randint(1, 3)))
            requests += 1
        elif roll < 0.52 and requests:
            ops.append(("abort", rng.randrange(requests)))
        elif roll < 0.58 and sessions:
            ops.append(("close", rng.randrange(sessions)))
        else:
            ops.append(("step", rng.randint(1, 3)))
    return tuple(ops)


def new_requests(op: tuple) -> int:
    """How many requests operation `op` creates in the model (a group: its siblings and its
    prompt request)."""
    if op[0] == "group":
        return op[3] + 1
    return 1 if op[0] in ("submit", "turn", "follow") else 0


def config(rng: random.Random) -> dict:
    return dict(
        slots=rng.randint(1, 4),
        overlap=rng.random() < 0.5,
        token_budget=rng.choice([2, 4, 8, 32]),
        chunk_size=rng.choice([1, 2, 4, 16]),
        max_running=rng.randint(1, 4),
        retract_after=rng.choice([1, 2, None]),
        pad_to_captured=rng.random() < 0.5,
    )
