"""A request's Mamba record (SGLang's `ReqKvInfo`) as slot ids, and the moves made on it.

A record holds one state slot (`mamba_pool_idx`) and, in extra-buffer mode, up to two track
slots (`mamba_ping_pong_track_buffer`, `-1` or flagged empty when unused). The record moves
whole: a session takes a first turn's record and lends it to every later turn. Reading the ids
is a device sync for CUDA tensors: once per session or insert move, never per token.
"""

from __future__ import annotations

import numpy as np

from slotwarden.model.vocabulary import Actor, Event, State

_TAKEN, _LENT = int(State.TAKEN), int(State.LENT)


def slot_ids(kv) -> list[int]:
    """The slots `kv` holds: its state slot, then its track slots."""
    ids = [] if kv.mamba_pool_idx is None else [int(kv.mamba_pool_idx)]
    buf, empty = kv.mamba_ping_pong_track_buffer, kv.mamba_ping_pong_empty
    if buf is not None:
        ids += [int(v) for v, e in zip(buf.tolist(), empty or [False] * buf.numel()) if not e and v >= 0]
    return ids


def admit(slots, kv, req: Actor) -> None:
    """The record's slots that `req` took or borrows join the running batch."""
    v = slots.ledger.views  # a slot at a time, in plain ints: a record holds one to three
    mine = [
        s
        for s in slot_ids(kv)
        if (v.state[s] == _TAKEN and v.owner[s] == req.id) or (v.state[s] == _LENT and v.borrower[s] == req.id)
    ]
    if mine:
        slots.fire(Event.ADMIT, mine, req)


def give_back(slots, ids: list[int], req: Actor, event: Event | None) -> None:
    """The borrower `req` hands a session's record back (its turn finished, was retracted,
    or, with `event` ABORT, aborted): a running slot by `event` (FINISH by default), a slot
    still only lent by a rollback, or the abort itself."""
    if not ids:
        return
    arr = np.array(ids, dtype=np.int64)
    state = slots.ledger.cols.state[arr]
    running = arr[state == int(State.LENT_RUNNING)]
    waiting = arr[state != int(State.LENT_RUNNING)]
    if running.size:
        slots.fire(event or Event.FINISH, running, req)
    if waiting.size:
        slots.fire(event or Event.ROLLBACK, waiting, req)
