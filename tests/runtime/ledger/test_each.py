"""`SlotLedger.apply_each`: one call moves many slots, each by its own actor (every request
that finished this step), on both paths (a slot at a time up to `ledger.small`, vectorised
above): the same result as one call per actor, all or nothing, and a refusal that names the
offending slot and its actor."""

from __future__ import annotations

import io

import numpy as np
import pytest
from slotwarden.model.errors import BadActor, BadInput, IllegalMove
from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.runtime.trace import TraceWriter, attach

N = 6  # requests, one slot each


def running(small: int) -> SlotLedger:
    """N requests (ids 10..15), each running on one slot (slot i+1 for request 10+i)."""
    ledger = SlotLedger(N + 2)
    ledger.small = small
    for i in range(N):
        r = Actor.request(10 + i)
        ledger.apply(Event.ADMIT, ledger.alloc(1, r), r)
    return ledger


def columns(ledger: SlotLedger):
    return {k: v.tolist() for k, v in ledger.snapshot().items() if k != "counters"}, ledger.free_list().tolist()


class OneActor(SlotLedger):
    """Broken variant: the whole batch is judged and written as its first slot's actor."""

    def apply_each(self, event, ids, actor_ids, before_write=None):
        return self.apply(event, ids, Actor.request(int(np.asarray(actor_ids)[0])), before_write=before_write)


@pytest.mark.parametrize("small", [0, 3, 16], ids=["vectorised", "mixed", "per-slot"])
def test_one_call_is_one_call_per_actor(small):
    ids, who = [2, 5, 1, 6], [11, 14, 10, 15]
    together, apart = running(small), running(small)
    assert together.apply_each(Event.FINISH, ids, who).tolist() == ids
    for s, r in zip(ids, who):
        apart.apply(Event.FINISH, [s], Actor.request(r))
    assert columns(together) == columns(apart)
    assert together.record(5).state is State.RELEASED
    assert "finish by request 14" in together.recorder.explain([5])


@pytest.mark.parametrize("small", [0, 16], ids=["vectorised", "per-slot"])
@pytest.mark.parametrize(
    "cls", [SlotLedger, pytest.param(OneActor, marks=pytest.mark.xfail(strict=True, reason="broken variant"))]
)
def test_a_refusal_names_the_slot_and_its_actor_and_changes_nothing(cls, small):
    ledger = cls(N + 2)
    ledger.small = small
    for i in range(N):
        r = Actor.request(10 + i)
        ledger.apply(Event.ADMIT, ledger.alloc(1, r), r)
    before = columns(ledger)
    with pytest.raises(IllegalMove) as err:
        ledger.apply_each(Event.FINISH, [1, 2, 3], [10, 11, 99])  # slot 3 is request 12's
    assert err.value.slot_id == 3 and err.value.actor == Actor.request(99)
    assert columns(ledger) == before


def test_bad_actor_ids_and_events_are_refused_first():
    ledger = running(16)
    before = columns(ledger)
    for junk in ([10, 11], [10, -1, 12], [1.5, 2.0, 3.0], [True, 11, 12], "abc", np.zeros((3, 1), dtype=np.int64)):
        with pytest.raises(BadActor):
            ledger.apply_each(Event.FINISH, [1, 2, 3], junk)
    for event in (Event.ALLOC, Event.FENCE, Event.PARK, Event.LEND):
        with pytest.raises(BadInput):
            ledger.apply_each(event, [1], [10])
    assert columns(ledger) == before


def test_a_trace_gets_one_line_per_actor():
    ledger = running(0)
    sink = io.StringIO()
    attach(ledger, TraceWriter(sink))
    ledger.apply_each(Event.FINISH, [1, 2, 3], [10, 11, 12])
    lines = sink.getvalue().splitlines()
    assert len(lines) == 3 and all('"event": "finish"' in line for line in lines)
    assert '"ids": [2]' in lines[1] and '"actor_id": 11' in lines[1]


# -- alloc_each: one slot for each of many requests, in one call --------------------------------
class AllocOneActor(SlotLedger):
    """Broken variant: every slot goes to the first request."""

    def alloc_each(self, actor_ids, before_write=None):
        return self.alloc(len(actor_ids), Actor.request(int(actor_ids[0])), before_write)


@pytest.mark.parametrize("cls", [SlotLedger, AllocOneActor])
@pytest.mark.parametrize("small", [0, 3, 16], ids=["vectorised", "mixed", "per-slot"])
def test_alloc_each_is_one_alloc_per_request(cls, small):
    """The same slots, owners, free list as one `alloc(1, r)` per request, in order."""
    rids = [10, 11, 12, 13, 14, 15]
    many, one = cls(N + 2), SlotLedger(N + 2)
    many.small = one.small = small
    got = many.alloc_each(rids)
    want = [int(one.alloc(1, Actor.request(r))[0]) for r in rids]
    agree = got.tolist() == want and columns(many)[1] == columns(one)[1]
    agree = agree and many.cols.owner.tolist() == one.cols.owner.tolist()
    assert agree is (cls is SlotLedger)
    if cls is SlotLedger:
        assert [many.held_by(Actor.request(r)).tolist() for r in rids] == [[s] for s in want]


@pytest.mark.parametrize("small", [0, 16])
def test_alloc_each_is_all_or_none(small):
    ledger = SlotLedger(4)
    ledger.small = small
    before = columns(ledger)
    assert ledger.alloc_each([1, 2, 3, 4, 5]) is None  # five requests, four slots: none taken
    assert columns(ledger) == before

    def refuse(batch):
        raise RuntimeError("zeroing failed")

    with pytest.raises(RuntimeError):
        ledger.alloc_each([1, 2, 3], before_write=refuse)
    assert columns(ledger) == before
    with pytest.raises(BadActor):
        ledger.alloc_each([1, -1])
    with pytest.raises(BadActor):
        ledger.alloc_each([])
    assert columns(ledger) == before


@pytest.mark.parametrize("small", [0, 16])
def test_alloc_each_refusal_names_the_slot_and_its_request(small):
    """A corrupt free list (a held slot on it) is refused naming that slot and the request it
    was to go to."""
    ledger = SlotLedger(4)
    ledger.small = small
    r = Actor.request(1)
    ledger.apply(Event.ADMIT, ledger.alloc(1, r), r)  # slot 1 running
    ledger._ring[ledger._head + 1] = 1  # corrupt: slot 1 is on the free list, second in line
    with pytest.raises(IllegalMove) as err:
        ledger.alloc_each([7, 8])
    assert err.value.actor == Actor.request(8) and err.value.slot_id == 1


# -- lists of plain ints (what a scheduler hands in) take a lane checked with builtins ---------
class NoLane(SlotLedger):
    """The general path only."""

    def _plain_lists(self, ids, actor_ids):
        return False


class LaneWithoutDuplicates(SlotLedger):
    """Broken variant: the list lane forgets the duplicate check."""

    def _plain_lists(self, ids, actor_ids):
        fine = type(ids) is list and type(actor_ids) is list and len(ids) == len(actor_ids) > 0
        return fine and all(type(v) is int for v in ids + actor_ids) and 1 <= min(ids) and max(ids) <= self.capacity


JUNK = [
    ([1, 2], [10, 11]),
    ([1, 1], [10, 11]),
    ([0, 1], [10, 11]),
    ([1, N + 3], [10, 11]),
    ([True, 2], [10, 11]),
    ([1, 2**70], [10, 11]),
    ([1, 2], [10, -1]),
    ([1, 2], [10, 2**63]),
    ([1, 2], [10, False]),
    ([1, 2], [10]),
    ([], []),
    ([1.0, 2], [10, 11]),
]


def outcome_of(ledger: SlotLedger, ids, who):
    try:
        return ("ok", ledger.apply_each(Event.ADMIT, ids, who).tolist(), columns(ledger))
    except Exception as err:  # noqa: BLE001 (the type and text are what is compared)
        return ("raised", type(err).__name__, str(err), columns(ledger))


def lane_disagrees(cls, compiled: bool = True) -> list:
    """The junk (and good) inputs on which `cls` and the general path disagree (`compiled`:
    with the compiled move behind both, else the numpy path)."""
    found = []
    for ids, who in JUNK:
        a, b = cls(N + 2), NoLane(N + 2)
        for ledger in (a, b):
            if not compiled:
                ledger.mover = None
            for r in (10, 11):
                ledger.alloc(1, Actor.request(r))
        if outcome_of(a, list(ids), list(who)) != outcome_of(b, list(ids), list(who)):
            found.append((ids, who))
    return found


def test_the_list_lane_refuses_and_accepts_as_the_general_path():
    assert lane_disagrees(SlotLedger) == []
    assert lane_disagrees(SlotLedger, compiled=False) == []
    # what the comparison rejects (on the numpy path: the compiled move checks duplicates itself)
    assert ([1, 1], [10, 11]) in lane_disagrees(LaneWithoutDuplicates, compiled=False)
