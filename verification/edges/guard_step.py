"""The drop-in allocator's step check refuses exactly what the model's does.

A `GuardedAllocator` over a free list of 6 slots: request 1 holds slots 1-2 running, session 5
has parked slot 3 and lent it to request 2, whose turn runs on it, slot 4 is taken by request 1
and not admitted, slot 5 finished by request 1 and released while a step is in flight, slot 6
free. Random steps over these (pad rows, -1, ids past the pool, another's slot, a borrower's
slot, reads of another's) go through `GuardedAllocator.check_step`, with and without sources:
it must refuse what `model.launch.check_step` refuses over the guard's records, at the same row
and slot, accept the rest, and change no record either way.
"""

from __future__ import annotations

import random

import torch

from slotwarden.model import launch as model
from slotwarden.model.errors import IllegalStep
from slotwarden.model.vocabulary import NOBODY, Actor
from slotwarden.model.write_set import ALL_WRITTEN, Row, RowKind
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guarded_allocator import GuardedAllocator

STEPS = 1500
R1, R2, S5 = Actor.request(1), Actor.request(2), Actor.session(5)


def holding() -> GuardedAllocator:
    """The allocator with its slots held as the module docstring says."""
    a = GuardedAllocator(FreeList(6))
    with a.acting(R1):
        two = a.alloc(2)
        a.admit(two)
        three = a.alloc(1)
        a.admit(three)
        a.park(three, 5)
    with a.acting(S5):
        a.lend(three, 2)
    with a.acting(R2):
        a.admit(three)
    with a.acting(R1):
        a.alloc(1)  # slot 4, taken
        five = a.alloc(1)
        a.admit(five)
    a.launch(done=lambda: False)
    with a.acting(R1):
        a.free(five)  # finished, released until the step's fence
    return a


def disagreements(check=None, steps: int = STEPS, seed: int = 5) -> list:
    """Random steps where `check(a, ids, actors, sources)` (default: the guard's) and the
    model's differ: (rows, the model's verdict, the guard's)."""
    a, rng = holding(), random.Random(seed)
    check = check or (lambda a, ids, who, src: a.check_step(torch.tensor(ids), who, 0, src))
    slots = tuple(a.ledger.record(i) for i in range(1, 7))
    found = []
    for _ in range(steps):
        n = rng.randrange(1, 5)
        who = [rng.choice((1, 2, 3, NOBODY)) for _ in range(n)]
        ids = [rng.choice((0, -1, 1, 2, 3, 4, 5, 6, 7)) for _ in range(n)]
        plain = rng.random() < 0.5
        src = None if plain else [rng.choice((i, i, 1, 3)) for i in ids]
        rows = tuple(
            Row(RowKind.PAD if w == NOBODY else RowKind.REQUEST, w, i, i if plain else s)
            for w, i, s in zip(who, ids, src or ids)
        )
        try:
            model.check_step(rows, slots, ALL_WRITTEN, a.ledger.locks)
            want = None
        except IllegalStep as e:
            want = (e.row, e.slot_id)
        try:
            check(a, ids, who, src)
            got = None
        except IllegalStep as e:
            got = (e.row, e.slot_id)
        if got != want or tuple(a.ledger.record(i) for i in range(1, 7)) != slots:
            found.append((rows, want, got))
    return found


def problems() -> list[str]:
    found = disagreements()
    if not found:
        return []
    return [f"{len(found)} of {STEPS} steps: first {found[0][0]}: model {found[0][1]}, guard {found[0][2]}"]
