"""A launched step's write set: the runtime's batched check refuses exactly what the model's does.

On the compiled check (where built) and the numpy one, random steps (pad rows, -1 and ids
past the pool, parked, lent, cached, released and never-zeroed slots, reads of another's slot;
half with no sources) over a pool holding every kind of slot: `runtime.launch.check_step` and
`model.launch.check_step` must agree on whether each is refused, and on the row and slot they
name; and every step the model accepts keeps the six properties of a step (`model/properties.py`:
writes held, disjoint, pads on the pad slot, ids in the pool, reads held, reads filled).
"""

from __future__ import annotations

import random

from slotwarden.model import launch as model
from slotwarden.model.errors import IllegalStep
from slotwarden.model.properties import ids_in_pool, pads_to_pad, reads_filled, reads_held, writes_disjoint, writes_held
from slotwarden.model.vocabulary import NOBODY, Actor
from slotwarden.model.write_set import Fill, Row, RowKind
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime import launch_compiled as compiled
from slotwarden.runtime.launch import check_step
from slotwarden.runtime.pool import StatePool

STEPS = 3000
R1, R7 = Actor.request(1), Actor.request(7)


def running() -> StatePool:
    """Slots 1-3 running for request 1; 4 parked in session 5; 5 lent by session 6 to request 7,
    running; 6 cached by node 3, published, locked by request 1; 7 released (waiting for step
    2); 8 free."""
    pool = StatePool(PoolConfig(num_slots=8, layers=1, conv_dims=(4,), heads=1, head_dim=2, state_size=2))
    pool.admit(pool.alloc(3, R1), R1)
    four = pool.alloc(1, Actor.request(2))
    pool.admit(four, Actor.request(2))
    pool.park(four, Actor.request(2), 5)
    five = pool.alloc(1, Actor.request(3))
    pool.admit(five, Actor.request(3))
    pool.park(five, Actor.request(3), 6)
    pool.lend(five, Actor.session(6), 7)
    pool.admit(five, R7)
    six = pool.alloc(1, Actor.request(9))
    pool.admit(six, Actor.request(9))
    pool.insert(six, Actor.request(9), 3)
    pool.fence(pool.launch())
    pool.lock(six, R1)
    seven = pool.alloc(1, Actor.request(4))
    pool.admit(seven, Actor.request(4))
    pool.launch(lambda: False)
    pool.finish(seven, Actor.request(4))
    return pool


def disagreements(check=check_step, steps: int = STEPS, seed: int = 3) -> list:
    """Random steps over `running()` where `check` (the runtime's) and the model's check differ
    in whether they refuse, or in the row and slot they name; and accepted steps that break a
    property: (rows, the model's verdict, the runtime's)."""
    pool, rng = running(), random.Random(seed)
    pool.fills[3] = int(Fill.STALE)  # slot 3 taken and never zeroed
    slots = tuple(pool.ledger.record(i) for i in range(1, pool.capacity + 1))
    fills = tuple(Fill(int(f)) for f in pool.fills[1:])
    found = []
    for _ in range(steps):
        n = rng.randrange(1, 5)
        who = [rng.choice((1, 7, 9, 2, NOBODY)) for _ in range(n)]
        ids = [rng.choice((0, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9)) for _ in range(n)]
        plain = rng.random() < 0.5  # rows read only what they write: the engine passes no sources
        src = list(ids) if plain else [rng.choice((i, i, 6, 1)) for i in ids]
        rows = tuple(Row(RowKind.PAD if a == NOBODY else RowKind.REQUEST, a, w, s) for a, w, s in zip(who, ids, src))
        try:
            model.check_step(rows, slots, fills, pool.ledger.locks)
            want = None
        except IllegalStep as e:
            want = (e.row, e.slot_id)
        try:
            check(pool.ledger, ids, who, 0, None if plain else src, pool.fills)
            got = None
        except IllegalStep as e:
            got = (e.row, e.slot_id)
        if got != want:
            found.append((rows, want, got))
        elif want is None and not _keeps_every_property(rows, slots, fills, pool.ledger.locks, pool.capacity):
            found.append((rows, "accepted, a property broken", got))
    return found


def _keeps_every_property(rows, slots, fills, locks, capacity: int) -> bool:
    return (
        writes_held(rows, slots)
        and writes_disjoint(rows)
        and pads_to_pad(rows)
        and ids_in_pool(rows, capacity)
        and reads_held(rows, slots, locks)
        and reads_filled(rows, fills)
    )


def problems() -> list[str]:
    """On the compiled check (where built) and on the numpy one, each against the model."""
    out = []
    for lane in ("compiled", "numpy") if compiled.AVAILABLE else ("numpy",):
        was = compiled.AVAILABLE
        compiled.AVAILABLE = lane == "compiled"
        try:
            found = disagreements()
        finally:
            compiled.AVAILABLE = was
        if found:
            first = f"first {found[0][0]}: model {found[0][1]}, runtime {found[0][2]}"
            out.append(f"{lane}: {len(found)} of {STEPS} steps: {first}")
    return out
