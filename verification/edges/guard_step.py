"""The drop-in allocator's step check refuses exactly what the model's does.

A `GuardedAllocator` over a free list of 6 slots: request 1 holds slots 1-2 running, session 5
has parked slot 3 and lent it to request 2, whose turn runs on it, slot 4 is taken by request 1
and not admitted, slot 5 finished by request 1 and released while a step is in flight, slot 6
free; it keeps fills (slot 4 stale, the rest zeroed). Random steps over these (pad rows, -1,
ids past the pool, another's slot, a borrower's slot, reads of another's), with zeroings and
copies reported between them, go through `GuardedAllocator.check_step`, with and without
sources: it must refuse what `model.launch.check_step` refuses over the guard's records and
fills, at the same row and slot, accept the rest, change no record either way, and leave the
slots of an accepted step WRITTEN (a copy from a stale slot, STALE). `reports` holds the fill
reports to their contract: a copy from outside the pool fills, a bad report is refused and
changes nothing, and a guard without fills keeps none and judges no first read.
"""

from __future__ import annotations

import random

import torch

from slotwarden.model import launch as model
from slotwarden.model.errors import BadSlotId, IllegalStep
from slotwarden.model.vocabulary import NOBODY, Actor
from slotwarden.model.lifecycle import WRITE_SET
from slotwarden.model.write_set import Fill, Row, RowKind
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guarded_allocator import GuardedAllocator

STEPS = 1500
R1, R2, S5 = Actor.request(1), Actor.request(2), Actor.session(5)


def holding() -> GuardedAllocator:
    """The allocator with its slots held as the module docstring says."""
    a = GuardedAllocator(FreeList(6), fills=True)
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
    a.zeroed([1, 2, 3, 5])
    return a


HELD = ((1, 1), (1, 2), (2, 3), (NOBODY, 0))  # (actor, slot) rows the records allow


FILLED = (1, 2, 3, 5, 6)  # the slots a zeroing or a copy may fill


def _any(rng: random.Random) -> tuple:
    return rng.choice((1, 2, 3, NOBODY)), rng.choice((0, -1, 1, 2, 3, 4, 5, 6, 7))


def disagreements(check=None, steps: int = STEPS, seed: int = 5) -> list:
    """Random steps where `check(a, ids, actors, sources)` (default: the guard's) and the
    model's differ: (rows, the model's verdict, the guard's)."""
    a, rng = holding(), random.Random(seed)
    check = check or (lambda a, ids, who, src: a.check_step(torch.tensor(ids), who, 0, src))
    slots = tuple(a.ledger.record(i) for i in range(1, 7))
    found = []
    for _ in range(steps):
        want_fills = _report(a, rng)
        fills = tuple(Fill(int(f)) for f in want_fills[1:])
        n = rng.randrange(1, 5)
        pairs = [rng.choice(HELD) if rng.random() < 0.5 else _any(rng) for _ in range(n)]
        who, ids = [w for w, _ in pairs], [i for _, i in pairs]
        plain = rng.random() < 0.5
        src = None if plain else [rng.choice((i, i, 1, 3)) for i in ids]
        rows = tuple(
            Row(RowKind.PAD if w == NOBODY else RowKind.REQUEST, w, i, i if plain else s)
            for w, i, s in zip(who, ids, src or ids)
        )
        try:
            model.check_step(rows, slots, fills, a.ledger.locks)
            want = None
            want_fills[[i for i in ids if i != 0]] = int(Fill.WRITTEN)
        except IllegalStep as e:
            want = (e.row, e.slot_id)
        try:
            check(a, ids, who, src)
            got = None
        except IllegalStep as e:
            got = (e.row, e.slot_id)
        moved = tuple(a.ledger.record(i) for i in range(1, 7)) != slots
        if got != want or moved or (a.guard.fills != want_fills).any():
            found.append((rows, want, got))
        a.guard.fills[:] = want_fills  # the next step starts from the model's fills
    return found


def _report(a: GuardedAllocator, rng: random.Random):
    """Now and then a zeroing or a copy reported to the guard (never into slot 4, which stays
    stale: a copy from it spreads that); the fills it must then hold."""
    want = a.guard.fills.copy()
    pick = rng.random()
    if pick < 0.15:
        k = rng.choice(FILLED)
        a.zeroed([k])
        want[k] = int(Fill.ZEROED)
    elif pick < 0.35:
        d, s = rng.choice(FILLED), rng.randrange(1, 7)
        if d == s:
            return want
        a.copied([d], [s])
        want[d] = int(Fill.COPIED if Fill(int(want[s])) in WRITE_SET.readable else Fill.STALE)
    return want


def reports() -> list[str]:
    """What the fill reports break of their contract (empty: nothing)."""
    out, a = [], holding()
    a.copied([4])  # from outside the pool
    if a.guard.fills[4] != int(Fill.COPIED):
        out.append(f"a copy from outside the pool left slot 4 {Fill(int(a.guard.fills[4])).name}")
    for name, bad in (
        ("the pad slot zeroed", lambda: a.zeroed([0])),
        ("a copy from the pad slot", lambda: a.copied([1], [0])),
        ("a copy of one slot into two", lambda: a.copied([1, 2], [3])),
        ("a copy into one slot twice", lambda: a.copied([1, 1], [2, 3])),
    ):
        before = a.guard.fills.copy()
        try:
            bad()
            out.append(f"{name}: accepted")
        except BadSlotId:
            if (a.guard.fills != before).any():
                out.append(f"{name}: refused, but the fills changed")
    plain = GuardedAllocator(FreeList(2))
    with plain.acting(R1):
        ids = plain.alloc(1)
        plain.admit(ids)
    other = 3 - int(ids)  # reports of the other slot only: the allocated one stays as alloc left it
    plain.zeroed([other])
    plain.copied([other], [int(ids)])
    plain.copied([other])
    try:
        plain.check_step(ids, [1])
    except IllegalStep as e:
        out.append(f"a guard without fills judged a first read: {e}")
    if plain.guard.fills is not None:
        out.append("a guard without fills keeps some")
    return out


def problems() -> list[str]:
    found = disagreements()
    out = reports()
    if found:
        out.append(f"{len(found)} of {STEPS} steps: first {found[0][0]}: model {found[0][1]}, guard {found[0][2]}")
    return out
