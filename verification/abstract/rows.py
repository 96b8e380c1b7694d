"""The rows of a launched step as the scheduler builds them, and what each slot holds.

The running batch is a persistent batch: each running request keeps a row, and the rows close
up when one leaves (condense). Its order here is the order of the slots the requests run on,
a pure function of the world: the rows of a step in flight are then read back from its slots
(`Step.slots`) alone. Nothing the correct scheduler decides depends on that order, and the
model's check judges each row alone (and two rows for distinctness), so any order is judged
alike. A step is padded to the next captured size (1, 2, 4, ... up to the most that may run:
one per request), the pad rows on the pad slot; the rows of the unpadded step are a part of
the padded one's, so the padded one's check covers both. A slot's fill is derived from the
world: a slot a request holds since its ALLOC and no launched step has yet written is ZEROED
(the alloc zeroes it) or STALE (an alloc that does not); any other slot in use was written by
a step (a parked, lent or cached slot comes from a request that ran).
"""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY, PAD_SLOT, State
from slotwarden.model.write_set import Fill, Row, RowKind

from slotwarden.verification.abstract.world import CANDIDATE, RUNNING, World, window_of


def captured_sizes(max_running: int) -> tuple:
    """The batch sizes a step is padded to: 1, 2, 4, ... below `max_running`, then it."""
    sizes = [1]
    while sizes[-1] * 2 < max_running:
        sizes.append(sizes[-1] * 2)
    return tuple(sizes) + ((max_running,) if sizes[-1] < max_running else ())


def padded(n: int, max_running: int) -> int:
    """The captured size a batch of `n` rows is padded to."""
    return next((m for m in captured_sizes(max_running) if m >= n), n)


def batch(running) -> list:
    """The running requests in the order of their rows (by the slot each runs on)."""
    return sorted(running, key=lambda r: r.handle)


def request_row(r) -> Row:
    """A running request's row: it writes its slot and reads it, or the cached slot it copies from."""
    return Row(RowKind.REQUEST, r.id, r.handle, r.handle if r.src is None else r.src)


PAD_ROW = Row(RowKind.PAD, NOBODY, PAD_SLOT, PAD_SLOT)


def window_rows(r, window: tuple) -> tuple:
    """A verifying request's rows: one per window slot, in order, each reading the position
    before it (the first reads the committed slot); the committed slot is not written."""
    sources = (r.handle,) + window[:-1]
    return tuple(Row(RowKind.REQUEST, r.id, w, src) for w, src in zip(window, sources))


def step_rows(world: World, running, pad: bool = True) -> tuple:
    """The rows of the step launched now over `running`: one per request (a verifying one's
    window rows), then the pad rows."""
    rows: tuple = ()
    for r in batch(running):
        window = window_of(world, r.id) if world.windows else ()
        rows += window_rows(r, window) if window else (request_row(r),)
    return rows + (PAD_ROW,) * (padded(len(rows), len(world.requests)) - len(rows) if pad else 0)


def unwritten(world: World) -> frozenset:
    """The slots requests hold since their ALLOC that no launched step has written: a candidate's
    or a running request's own slot before its first launched step, a window not yet verified."""
    launched = frozenset().union(*(st.requests for st in world.steps)) if world.steps else frozenset()
    drafted = frozenset(i for _, i in world.windows if world.pool.slots[i - 1].state is State.DRAFT)
    return drafted | frozenset(
        r.handle
        for r in world.requests
        if r.handle is not None and not r.lent and (r.phase == CANDIDATE or (r.phase == RUNNING and not r.ran))
        and r.id not in launched
    )  # fmt: skip


def fills(world: World, zeroes: bool = True) -> tuple:
    """Each slot's fill (slot i + 1 at i); `zeroes`: whether ALLOC zeroes the slot it takes."""
    fresh = unwritten(world)
    taken = Fill.ZEROED if zeroes else Fill.STALE
    return tuple(
        taken if i + 1 in fresh else Fill.STALE if s.state is State.FREE else Fill.WRITTEN
        for i, s in enumerate(world.pool.slots)
    )


def lock_holders(locks) -> dict:
    """Slot id -> the requests holding a lock on it, from a pool's lock record (None: not kept)."""
    found: dict = {}
    for rid, i in locks or ():
        found.setdefault(i, []).append(rid)
    return found
