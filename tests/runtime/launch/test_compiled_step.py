"""The compiled launch check and the numpy one give the same verdict on random steps over random
ledgers (built through the pool's own calls): accepted, or refused naming the same row and slot
in the same words, whether the rows come as lists (converted first) or as int64 arrays (judged
as handed in). A compiled check that misjudges one relation disagrees."""

import random

import numpy as np
import pytest

from slotwarden.model.errors import IllegalStep
from slotwarden.model.vocabulary import NOBODY, Actor
from slotwarden.model.write_set import Fill
from slotwarden.runtime import launch_compiled
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.launch import check_step
from slotwarden.runtime.pool import StatePool

pytestmark = pytest.mark.skipif(not launch_compiled.AVAILABLE, reason="the compiled check is not built")

REQUESTS = (1, 2, 3, 4)


def random_pool(rng: random.Random) -> StatePool:
    """Running, parked, lent, cached (locked by some requests, or by none) and released slots,
    the rest free, in a random mix; fills random over the slots."""
    pool = StatePool(PoolConfig(num_slots=rng.randrange(6, 14), layers=1, conv_dims=(2,), heads=1, head_dim=1,
                                state_size=1))  # fmt: skip
    cached, other = [], iter(range(100, 10_000))
    for _ in range(rng.randrange(1, pool.capacity - 1)):
        kind, r = rng.choice(("run", "run", "park", "lend", "cache")), rng.choice(REQUESTS)
        q = Actor.request(r if kind == "run" else next(other))
        ids = pool.alloc(1, q)
        pool.admit(ids, q)
        if kind in ("park", "lend"):
            pool.park(ids, q, 5)
        if kind == "lend":
            pool.lend(ids, Actor.session(5), r)
            pool.admit(ids, Actor.request(r))
        if kind == "cache":
            pool.insert(ids, q, 3)
            cached.append(ids)
    pool.fence(pool.launch())
    for ids in cached:
        for r in rng.sample(REQUESTS, rng.randrange(0, 3)):
            pool.lock(ids, Actor.request(r))
    q = Actor.request(next(other))  # one released slot (two were left free)
    ids = pool.alloc(1, q)
    pool.admit(ids, q)
    pool.launch(lambda: False)
    pool.finish(ids, q)
    pool.fills[1:] = np.array([rng.choice((Fill.WRITTEN,) * 5 + (Fill.STALE,)) for _ in range(pool.capacity)])
    return pool


def verdict(pool, ids, who, src, fills):
    try:
        check_step(pool, ids, who, 0, src, fills)
    except IllegalStep as e:
        return e.row, e.slot_id, str(e)
    return None


def own(rng, pool, actor: int) -> int:
    """A slot `actor` owns or borrows (or the pad slot for a pad row, or for one holding none)."""
    c = pool.ledger.cols
    held = np.flatnonzero((c.owner == actor) | (c.borrower == actor)).tolist() if actor != NOBODY else []
    return rng.choice(held) if held else 0


def read(rng, pool, actor: int) -> int:
    """A cached slot some request has locked, `actor` or another."""
    locked = sorted(pool.ledger.locks)
    return rng.choice(locked) if locked else own(rng, pool, actor)


def disagreements(monkeypatch, steps: int = 60, pools: int = 25, seed: int = 11) -> list:
    rng, found = random.Random(seed), []
    for _ in range(pools):
        pool = random_pool(rng)
        anywhere = (0, -1, pool.capacity + 1, *range(1, pool.capacity + 1))
        for _ in range(steps):
            n = rng.randrange(1, 6)
            who = [rng.choice((*REQUESTS, 5, NOBODY)) for _ in range(n)]
            ids = [own(rng, pool, a) if rng.random() < 0.9 else rng.choice(anywhere) for a in who]
            src = None if rng.random() < 0.5 else [rng.choice((i, i, i, read(rng, pool, a), rng.choice(anywhere)))
                                                   for a, i in zip(who, ids)]  # fmt: skip
            fills = None if rng.random() < 0.3 else pool.fills
            with monkeypatch.context() as m:
                m.setattr(launch_compiled, "AVAILABLE", False)
                want = verdict(pool, ids, who, src, fills)
            got = verdict(pool, ids, who, src, fills)  # lists: converted, then judged
            arrays = [None if x is None else np.array(x, dtype=np.int64) for x in (ids, who, src)]
            taken = verdict(pool, *arrays, fills)  # int64 arrays: judged as handed in
            if got != want or taken != want:
                found.append((ids, who, src, want, got, taken))
    return found


def test_the_compiled_check_agrees_with_numpy(monkeypatch):
    assert disagreements(monkeypatch) == []
