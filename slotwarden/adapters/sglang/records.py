"""A request's Mamba record (SGLang's `ReqKvInfo`) as slot ids, and the moves made on it.

A record holds one state slot (`mamba_pool_idx`) and, in extra-buffer mode, up to two track
slots (`mamba_ping_pong_track_buffer`, `-1` or flagged empty when unused). A session takes a
first turn's record: the state slot is lent to that turn at once, its track slots stay the
turn's own (it writes them, and may donate one to the tree as its prompt's checkpoint) until it
hands the record back; every later turn borrows the whole record. Reading the ids
is a device sync for CUDA tensors: once per session or insert move, never per token.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Group, Relation, State

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


def give_back(slots, ids: list[int], req: Actor, event: Event | None, session: Actor) -> None:
    """The turn `req` hands a session's record back to `session`. A slot lent to it goes by
    the first declared move of a borrower from its state back into the session (a running
    turn's finish, a turn only lent's rollback), or by `event` (ABORT: the turn was aborted);
    a slot it owns (a first turn's own track slots) by the first declared move of an owner
    handing it to the session (PARK), whatever ended the turn: the record is the session's."""
    if not ids:
        return
    lc, v = slots.ledger.lifecycle, slots.ledger.views
    groups: dict[tuple, list[int]] = {}
    for s in ids:  # a record holds one to three slots
        state = State(v.state[s])
        if lc.spec(state).owner is ActorKind.REQUEST and v.owner[s] == req.id:
            key = (into_session(lc, state, Relation.OWNER), session.id)
        else:
            key = (event or into_session(lc, state, Relation.BORROWER), NOBODY)
        groups.setdefault(key, []).append(s)
    for (ev, target), group in groups.items():
        slots.fire(ev, group, req, target)


def into_session(lc, state: State, by: Relation) -> Event:
    """The event of the first declared rule by which `by` gives a `state` slot to a session,
    ending there with no borrower (the model refuses the move if there is none: FINISH is
    fired then)."""

    def back(r) -> bool:
        dest = lc.spec(r.dest)
        return r.by is by and dest.group is Group.SESSION_OWNED and not dest.lent

    rule = next((r for r in lc.rules_from(state) if back(r)), None)
    return Event.FINISH if rule is None else rule.event
