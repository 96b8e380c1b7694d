"""Who moves a slot, read from SGLang's own objects.

A `Req`, a session's `SessionSlot` and a `TreeLock` are named by object identity (an int the
adapter gives each object once; SGLang's `rid` is not unique in its own tests). A tree node is
named by its `NodeId`, which SGLang never reuses. `WHO` says, for the current call, how the
allocator's moves are attributed:

    ACTOR   one actor (a request, a session) makes every move
    QUEUE   a pool-wide alloc: each alloc is the next request's, in SGLang's loop order
    TREE    the prefix tree frees: each slot by the node that owns it
    PASS    a path the adapter does not guard (CPU offload, external linkers): trusted
    HOLDER  nobody said (the default): a free acts as the request that uses the slot
    SWAP    a lazy track boundary frees the record's old track slot: as HOLDER, but a slot lent
            to the request goes back to its session, which releases it
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from contextvars import ContextVar
from enum import Enum
from typing import NamedTuple

from slotwarden.model.vocabulary import Actor


class Mode(Enum):
    ACTOR = "actor"
    QUEUE = "queue"
    TREE = "tree"
    PASS = "pass"
    HOLDER = "holder"
    SWAP = "swap"


class Who(NamedTuple):
    """How the moves of the current call are attributed. `admit`: an alloc is for a request
    already running (a checkpoint copy, a new track slot), so it joins the running batch at once.
    `site`: the SGLang method the call came from, for error messages."""

    mode: Mode
    actor: Actor | None = None
    queue: list | None = None
    admit: bool = False
    site: str = ""


HOLDER = Who(Mode.HOLDER)
WHO: ContextVar[Who] = ContextVar("slotwarden_sglang_who", default=HOLDER)

_ids = itertools.count(1)
_TAG = "_slotwarden_id"


def ident(obj) -> int:
    """The adapter's int for `obj` (a Req, a SessionSlot), given on first sight."""
    got = getattr(obj, _TAG, None)
    if got is None:
        got = next(_ids)
        setattr(obj, _TAG, got)
    return got


def fresh() -> int:
    """A new int, for objects that take no attribute (a lock receipt)."""
    return next(_ids)


def request(req) -> Actor:
    return Actor.request(ident(req))


def session(record) -> Actor:
    return Actor.session(ident(record))


@contextmanager
def attributed(who: Who):
    token = WHO.set(who)
    try:
        yield who
    finally:
        WHO.reset(token)
