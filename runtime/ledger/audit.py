"""The ledger's integrity: conservation per group, the free list against the FREE set, leaks
attributed to their owner and the event that left them, and snapshots to compare a call's
before and after."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from slotwarden.model.table import NO_KIND
from slotwarden.model.vocabulary import NOBODY, ActorKind, Event, State

from slotwarden.runtime import inputs
from slotwarden.runtime.ledger.codes import _FREE, _RELEASED, _SCRATCH
from slotwarden.runtime.ledger.queries import Queries


class Leak(NamedTuple):
    slot: int
    state: State
    owner: int
    borrower: int
    last_event: Event
    history: str


class Audit(NamedTuple):
    """The ledger's integrity: counts per group, the free list's agreement with the FREE set,
    and the leaks (held slots whose owner is gone, releases whose fence has passed)."""

    capacity: int
    counts: dict  # Group -> number of slots
    free_list_ok: bool
    problems: tuple  # text of each integrity failure
    leaks: tuple  # Leak, each attributed to its owner and the event that left it there

    @property
    def clean(self) -> bool:
        return self.free_list_ok and not self.problems and not self.leaks


class Integrity(Queries):
    """`SlotLedger`'s audit and snapshot (a mixin over `LedgerState` and its queries)."""

    def audit(self, live_requests=None, live_sessions=None, live_nodes=None) -> Audit:
        """Conservation and leaks. With live sets given, a held slot whose owner or borrower
        is not live is a leak (a cache-owned slot only when `live_nodes` is given); a slot still
        waiting for a fence that has passed (released, or cached and unpublished) is one too.

        Conservation counts each group from its own source, so that it fails when the sources
        disagree: FREE from the free list's count (the state column without one), held from
        the owner column (slots naming an owner), RELEASED from the state column. Their sum
        is the capacity only if no slot is on the free list and held, no held slot lost its
        owner (an owner of NOBODY), no owner was left on a free or released slot."""
        self.check_thread()
        reqs = inputs.live(live_requests, "live_requests")
        sess = inputs.live(live_sessions, "live_sessions")
        nodes = inputs.live(live_nodes, "live_nodes")
        c = self.cols
        state, owner = c.state[1:], c.owner[1:]
        counts = self.counts()
        problems = []
        undeclared = np.flatnonzero(state >= len(State)) + 1
        if undeclared.size:
            problems.append(f"slots {undeclared.tolist()[:8]} hold no declared state")
        free_n = self._count if self.has_free_list else int((state == _FREE).sum())
        held_n = int((owner != NOBODY).sum())
        released_n = int((state == _RELEASED).sum())
        if free_n + held_n + released_n != self.capacity:
            problems.append(
                f"free ({free_n}, {'free list' if self.has_free_list else 'state column'}) "
                f"+ held ({held_n}, owner column) + released ({released_n}, state column) "
                f"= {free_n + held_n + released_n}, not the capacity {self.capacity}"
            )
        kind = self._owner_kind[np.minimum(state, len(State) - 1)]
        astray = np.flatnonzero((kind != NO_KIND) != (owner != NOBODY)) + 1
        if astray.size:
            problems.append(f"slots {astray.tolist()[:8]} have an owner field that does not match their state")
        free_ok = True
        if self.has_free_list:
            fl = self.free_list()
            free_ids = np.flatnonzero(state == _FREE) + 1
            if len(fl) != len(np.unique(fl)):
                free_ok = False
                problems.append(f"the free list holds {len(fl) - len(np.unique(fl))} duplicate ids")
            if not np.array_equal(np.sort(fl), free_ids):
                free_ok = False
                problems.append(f"the free list ({len(fl)} ids) is not the set of FREE slots ({len(free_ids)})")
        problems += self._unlisted_waits(state, c.fence[1:])
        leaking = np.zeros(self.capacity + 1, dtype=bool)
        leaking[1:] = self._waits_mask[state] & (c.fence[1:] <= self.completed)
        if reqs is not None or sess is not None:
            reqs = reqs if reqs is not None else np.zeros(0, dtype=np.int64)
            sess = sess if sess is not None else np.zeros(0, dtype=np.int64)
            kind = self._owner_kind[np.minimum(c.state, len(State) - 1)]
            owner_live = np.where(
                kind == int(ActorKind.REQUEST),
                np.isin(c.owner, reqs),
                np.where(
                    kind == int(ActorKind.CACHE),
                    np.isin(c.owner, nodes) if nodes is not None else True,
                    np.isin(c.owner, sess),
                ),
            )
            leaking |= (kind != NO_KIND) & ~owner_live
            leaking |= self._lent[np.minimum(c.state, len(State) - 1)] & ~np.isin(c.borrower, reqs)
            leaking[0] = False
        leaking[1:] &= state < len(State)
        leaks = tuple(
            Leak(
                int(s),
                State(int(c.state[s])),
                int(c.owner[s]),
                int(c.borrower[s]),
                _event_or_int(c.last_event[s]),
                self.recorder.explain([s]),
            )
            for s in np.flatnonzero(leaking)
        )
        return Audit(self.capacity, counts, free_ok, tuple(problems), leaks)

    def _unlisted_waits(self, state, fence) -> list:
        """A slot waiting for a fence still to come that is on no step's list of what waits
        would wait forever: a batch write interrupted between its columns and its fence list."""
        waiting = np.flatnonzero(self._waits_mask[state] & (fence > self.completed)) + 1
        if not waiting.size:
            return []
        listed = {int(s) for chunks in self._waiting.values() for ids in chunks for s in ids}
        lost = [int(s) for s in waiting.tolist() if int(s) not in listed]
        if not lost:
            return []
        return [f"slots {lost[:8]} wait for a fence but no fence list names them (a batch half-written)"]

    def snapshot(self) -> dict:
        """Copies of every column and counter, to compare before and after a call. The
        duplicate stamp is scratch (every check overwrites it before reading) and holds no
        state, so it is left out: a refused call may have stamped it."""
        self.check_thread()
        snap = {k: t.clone() for k, t in self.tensors.items() if k not in _SCRATCH}
        snap["counters"] = (self._head, self._count, self.launched, self.completed)
        return snap


def _event_or_int(code) -> Event | int:
    return Event(int(code)) if int(code) < len(Event) else int(code)
