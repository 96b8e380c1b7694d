"""The model's pool operations, memoised: `slotwarden.model.pool.apply`, `alloc` and `fence`
are pure functions and the same pools recur in many worlds. Each memo calls the model's function
as it is at the call (a declaration mutant's `declared_as` swaps it, then `forget`s)."""

from __future__ import annotations

from slotwarden.model import pool as model_pool
from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import Actor, Event

_APPLY: dict = {}
_ALLOC: dict = {}
_FENCE: dict = {}
_FORGETTERS: list = []  # other memo tables' clear(): the judges register theirs
FORGOTTEN = [0]  # how many times `forget` has run: what remembers the memos' answers elsewhere reads it


def apply(pool: Pool, event: Event, ids: tuple, actor: Actor, target: int, epoch: int) -> Pool:
    """`slotwarden.model.pool.apply`, memoised (a refusal is raised again, never cached)."""
    key = (pool, ids, event, actor, target, epoch)
    try:
        return _APPLY[key]
    except KeyError:
        _APPLY[key] = found = model_pool.apply(pool, event, ids, actor, target, epoch)
        return found
    except TypeError:  # an unhashable id: let the model refuse it
        return model_pool.apply(pool, event, ids, actor, target, epoch)


def alloc(pool: Pool, n: int, actor: Actor):
    """`slotwarden.model.pool.alloc`, memoised."""
    key = (pool, n, actor)
    try:
        return _ALLOC[key]
    except KeyError:
        _ALLOC[key] = found = model_pool.alloc(pool, n, actor)
        return found


def fence(pool: Pool, completed: int) -> Pool:
    """`slotwarden.model.pool.fence`, memoised (a pool it leaves as it is comes back itself)."""
    key = (pool, completed)
    try:
        found = _FENCE[key]
    except KeyError:
        found = model_pool.fence(pool, completed)
        found = _FENCE[key] = None if found is pool else found
    return pool if found is None else found


def forget() -> None:
    """Drop the memo tables (the checker calls it after each run to give the memory back)."""
    FORGOTTEN[0] += 1
    _APPLY.clear()
    _ALLOC.clear()
    _FENCE.clear()
    for clear in _FORGETTERS:
        clear()
