"""Bad input found by review: each is refused with a typed error naming the bad value, and
nothing changes. (Each test here failed on the code before its fix.)"""

import dataclasses
import re

import numpy as np
import pytest
import torch

from slotwarden.model.errors import BadInput, BadSlotId, SlotwardenError
from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.guarded_allocator import GuardedAllocator, acting
from slotwarden.runtime.scheduler.scheduler import SchedulerConfig
from slotwarden.runtime.scheduler.errors import BadConfig, BadRequest, SchedulerError, UnknownRequest, UnknownSession
from slotwarden.trace_examples import FreeList

from scheduling import make_pool, make_scheduler

# --- SchedulerConfig: every field checked when the config is made


@pytest.mark.parametrize(
    "field, bad",
    [
        ("max_running", 0),
        ("max_running", -1),
        ("max_running", "4"),
        ("max_running", True),
        ("max_running", 2.0),
        ("token_budget", 0),
        ("chunk_size", 0),
        ("chunk_size", None),
        ("overlap", 1),
        ("overlap", "yes"),
        ("audit_when_idle", None),
        ("retract_after", -1),
        ("retract_after", 1.5),
        ("session_timeout", -2),
        ("session_timeout", False),
    ],
)
def test_a_bad_config_field_is_refused_naming_it(field, bad):
    for make in (lambda: SchedulerConfig(**{field: bad}), lambda: make_scheduler(slots=2, **{field: bad})):
        with pytest.raises(BadConfig, match=f"SchedulerConfig.{field} ") as err:
            make()
        assert isinstance(err.value, SchedulerError) and isinstance(err.value, ValueError)
        assert (err.value.field, err.value.value) == (field, bad)


def test_every_config_field_is_checked():
    for f in dataclasses.fields(SchedulerConfig):  # a field added unchecked fails here
        with pytest.raises(BadConfig, match=f.name):
            SchedulerConfig(**{f.name: object()})


def test_good_configs_still_build():
    SchedulerConfig(max_running=np.int64(2), retract_after=0, session_timeout=None, overlap=True)
    SchedulerConfig(retract_after=None, session_timeout=0, audit_when_idle=False)


# --- LedgerGuard / GuardedAllocator: capacity must be what the allocator has free


@pytest.mark.parametrize("make", [lambda a, n: LedgerGuard(a, n), lambda a, n: GuardedAllocator(a, n)])
def test_a_capacity_the_allocator_does_not_have_is_refused(make):
    engine = FreeList(4)
    with pytest.raises(BadInput, match=r"4 slots free.*8"):
        make(engine, 8)
    assert engine.available_size() == 4
    assert make(FreeList(4), 4) is not None


# --- submit: an ordered prompt, a sane budget


@pytest.mark.parametrize("prompt", [{1, 2}, frozenset((1, 2)), {1: 2}, iter([1, 2]), (t for t in (1, 2))])
def test_an_unordered_or_one_shot_prompt_is_refused(prompt):
    sched = make_scheduler(slots=2)
    with pytest.raises(BadRequest, match="ordered sequence"):
        sched.submit(prompt, max_new_tokens=2)
    assert sched.submitted == 0 and not sched.requests and not sched.waiting


@pytest.mark.parametrize("prompt", [[1, 2], (1, 2), range(1, 3), torch.tensor([1, 2]), np.array([1, 2])])
def test_ordered_prompts_are_taken(prompt):
    sched = make_scheduler(slots=2)
    sched.submit(prompt, max_new_tokens=2)
    assert sched.submitted == 1


def test_an_absurd_token_budget_is_refused():
    sched = make_scheduler(slots=2)
    for bad in (2**31, 2**63, np.uint64(2**64 - 1)):
        with pytest.raises(BadRequest, match="max_new_tokens"):
            sched.submit([1, 2], max_new_tokens=bad)
    assert sched.submitted == 0 and not sched.requests


# --- slot ids: no meta tensors, no masked arrays; messages name what was given


@pytest.mark.parametrize(
    "ids",
    [torch.tensor([1], device="meta"), torch.tensor(1, device="meta"), np.ma.array([1, 2], mask=[0, 1])],
    ids=["meta", "meta-0d", "masked"],
)
def test_meta_tensors_and_masked_arrays_are_refused(ids):
    pool = make_pool(4)
    before = pool.ledger.snapshot()["state"].tolist()
    with pytest.raises(BadSlotId):
        pool.fire(Event.FINISH, ids, Actor.request(0))
    with pytest.raises(BadSlotId):
        pool.state_of(ids)
    assert pool.ledger.snapshot()["state"].tolist() == before


@pytest.mark.parametrize(
    "ids, says",
    [(0, "0 (int)"), (np.array([True]), "array([ True]) (ndarray)"), (torch.ones(2, 2, dtype=torch.long), "(Tensor)")],
)
def test_a_bad_batch_is_named_not_called_slot_id_none(ids, says):
    pool = make_pool(4)
    with pytest.raises(BadSlotId) as err:
        pool.state_of(ids)
    assert "None" not in str(err.value) and says in str(err.value)


def test_a_guarded_free_of_a_bare_int_names_it():
    g = GuardedAllocator(FreeList(2))
    with acting(Actor.request(0)), pytest.raises(BadSlotId) as err:
        g.free(2)
    assert "None" not in str(err.value) and "slot ids 2 (int)" in str(err.value)


def test_unknown_ids_before_any_were_handed_out():
    sched = make_scheduler(slots=2)
    with pytest.raises(UnknownSession, match="no session has been opened yet"):
        sched.close_session(0)
    with pytest.raises(UnknownRequest, match="no request has been submitted yet"):
        sched.abort(0)
    sched.open_session()
    with pytest.raises(UnknownSession, match=r"ids handed out so far are 0\.\.0"):
        sched.close_session(1)


def test_a_refused_batch_with_no_value_to_name_is_not_called_none():
    pool = make_pool(4)
    with pytest.raises(BadSlotId, match=r"^bad batch of slot ids for finish by request 0: an empty batch$"):
        pool.fire(Event.FINISH, [], Actor.request(0))


# --- a huge bad value: the message shows at most about 200 characters of it, and its length
HUGE = {"5 MB string": "x" * 5_000_000, "100k list": ["x"] * 100_000}
BOUND = 400  # characters: SHOWN (200) of the value, the length, and the message's own words


def _refusals(bad):
    """Each entry point refusing `bad` in one role: an event, an actor, an id, a target, a count,
    a config value, a prompt, a request id, a tree's argument, a highlight name."""
    from slotwarden.model.diagram import parse_highlight
    from slotwarden.runtime.config import PoolConfig
    from slotwarden.runtime.ledger.ledger import SlotLedger
    from slotwarden.runtime.radix.tree import RadixTree

    def allocator_with(who, call):
        g = GuardedAllocator(FreeList(4, "cpu"))
        with acting(who):
            call(g)

    r1 = Actor.request(1)
    return {
        "ledger event": lambda: SlotLedger(4).apply(bad, [1], r1),
        "ledger actor": lambda: SlotLedger(4).apply(Event.ADMIT, [1], bad),
        "ledger ids": lambda: SlotLedger(4).apply(Event.ADMIT, bad, r1),
        "ledger id": lambda: SlotLedger(4).apply(Event.ADMIT, [bad], r1),
        "ledger target": lambda: SlotLedger(4).apply(Event.PARK, [1], r1, bad),
        "ledger count": lambda: SlotLedger(4).alloc(bad, r1),
        "ledger actor_ids": lambda: SlotLedger(4).apply_each(Event.ADMIT, [1], bad),
        "guard event": lambda: LedgerGuard(FreeList(4, "cpu"), 4).fire(bad, [1], r1),
        "allocator event": lambda: allocator_with(r1, lambda g: g.fire(bad, [1])),
        "allocator actor": lambda: allocator_with(bad, lambda g: g.free(torch.tensor([1]))),
        "allocator unattributed": lambda: GuardedAllocator(FreeList(4, "cpu"), unattributed=bad),
        "pool config": lambda: PoolConfig(num_slots=bad, layers=1),
        "pool config device": lambda: PoolConfig(num_slots=4, layers=1, device=bad),
        "scheduler config": lambda: SchedulerConfig(max_running=bad),
        "prompt": lambda: make_scheduler().submit(bad, 4),
        "prompt token": lambda: make_scheduler().submit([bad], 4),
        "max_new_tokens": lambda: make_scheduler().submit([1], bad),
        "abort": lambda: make_scheduler().abort(bad),
        "tree slot": lambda: RadixTree().insert([1], bad),
        "tree readers": lambda: RadixTree(max_readers=bad),
        "highlight": lambda: parse_highlight(bad if isinstance(bad, str) else "".join(bad)),
    }


@pytest.mark.parametrize("kind", HUGE)
@pytest.mark.parametrize("role", list(_refusals("")))
def test_a_huge_bad_value_is_shown_cut_with_its_length(role, kind):
    with pytest.raises(SlotwardenError if role not in ("pool config", "pool config device") else ValueError) as err:
        _refusals(HUGE[kind])[role]()
    text = str(err.value)
    bound = BOUND + (250 if role == "highlight" else 0)  # the highlight's message lists every event and state
    assert len(text) < bound, f"{len(text)} characters: {text[:300]}..."
    if "x" * 100 in text or "'x', " * 10 in text:  # it renders the value: cut, saying how long it was
        assert re.search(r"\((5000000|100000|1) (characters|items|elements)\)", text), text
