"""`GuardedAllocator` in front of SGLang's real `MambaSlotAllocator` (from the sglang==0.5.23
wheel, loaded from its module file as `make bench` does; skipped without it) and in front of an
in-repo free list of the same shape (`slotwarden.trace_examples.FreeList`). Each bad engine call
raises at the call, and the engine's free list is untouched; legal calls leave it exactly as
SGLang's own allocator would."""

from __future__ import annotations

import pytest
import torch

from slotwarden.model.errors import BadSlotId
from slotwarden.model.free import IllegalFree, free_rule_for
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import Actor, ActorKind, Event, Relation, State
from slotwarden.runtime.guarded_allocator import ACTING, ANONYMOUS, GuardedAllocator, HeldSlots, Unattributed, acting
from slotwarden.trace_examples import FreeList  # SGLang's allocator's shape, in the repository
from slotwarden.cli.trace import check as check_trace
from engines import ENGINES, SGLANG

R1, R2, R3, R4 = (Actor.request(i) for i in (1, 2, 3, 4))
S5 = Actor.session(5)


@pytest.fixture(params=ENGINES)
def engine_cls(request):
    return request.param


def guarded(engine_cls, size=8, **kw):
    engine = engine_cls(size, "cpu")
    return engine, GuardedAllocator(engine, **kw)


class Untouched:
    """The engine's free list and the ledger, before a call that must change nothing."""

    def __init__(self, engine, guard: GuardedAllocator):
        self.engine, self.guard = engine, guard
        self.free = engine.free_slots.clone()
        self.ledger = guard.ledger.snapshot()

    def check(self):
        assert torch.equal(self.engine.free_slots, self.free), "the engine's free list changed"
        now = self.guard.ledger.snapshot()
        for k, v in self.ledger.items():
            assert (v == now[k]) if k == "counters" else torch.equal(v, now[k]), f"ledger {k} changed"


def session_turn_one(g: GuardedAllocator) -> torch.Tensor:
    """Session 5's first turn (request 1) runs and parks its state in the session."""
    with acting(R1):
        ids = g.alloc(1)
        g.admit(ids)
        g.park(ids, 5)
    return ids


# -- the bug, without the guard (the check the guard adds, shown failing) ---------------------
def test_without_the_guard_the_seed_bug_goes_through(engine_cls):  # PR 21404
    engine = engine_cls(2, "cpu")
    session_slot = engine.alloc(1)  # parked in session 5, lent to its next turn
    engine.free(session_slot)  # the prefill rollback frees the turn's slot
    assert engine.alloc(2).tolist() == [2, session_slot.item()]  # handed to another request
    engine.free(session_slot)
    assert engine.available_size() == 1  # and freed again: the free list is corrupt


# -- the bug's sequence, through the guard -----------------------------------------------------
def test_the_seed_bug_raises_at_the_rollbacks_free(engine_cls):
    engine, g = guarded(engine_cls)
    ids = session_turn_one(g)
    with acting(S5):
        g.lend(ids, 2)
    frozen = Untouched(engine, g)
    with acting(R2), pytest.raises(IllegalFree) as err:
        g.free(ids)  # the rollback of a candidate turn that did not fit
    frozen.check()
    msg = str(err.value)
    assert f"illegal free by request 2 on slot {ids.item()} (state LENT, owner 5, lent to request 2)" in msg
    assert "rollback -> PARKED" in msg and "belongs to session 5" in msg
    assert err.value.slot_id == ids.item() and err.value.event is None
    assert g.available_size() == 7


def test_broken_variant_routing_the_borrowers_free_as_a_rollback_raises_nothing(engine_cls):
    """The mapping a user would write by hand (free = rollback) lets the bug's free through:
    the slot quietly returns to its session. The guard's raise comes from reading the
    declaration, which has no free for a borrower."""
    engine, g = guarded(engine_cls)
    g._free_event[ActorKind.REQUEST, State.LENT, Relation.BORROWER] = int(Event.ROLLBACK)
    ids = session_turn_one(g)
    with acting(S5):
        g.lend(ids, 2)
    with acting(R2):
        g.free(ids)  # no error
    assert g.ledger.record(ids.item()).state is State.PARKED


def test_the_free_table_is_the_models():
    g = GuardedAllocator(FreeList(2))
    for kind in ActorKind:
        for state in State:
            for rel in Relation:
                rule = free_rule_for(LIFECYCLE, state, kind, rel)
                assert g._free_event[kind, state, rel] == (-1 if rule is None else int(rule.event))
    assert g._free_event[ActorKind.REQUEST, State.TAKEN, Relation.OWNER] == Event.ROLLBACK
    assert g._free_event[ActorKind.REQUEST, State.RUNNING, Relation.OWNER] == Event.FINISH
    assert g._free_event[ActorKind.SESSION, State.PARKED, Relation.OWNER] == Event.CLOSE
    assert (g._free_event[:, State.LENT] == -1).all() and (g._free_event[:, State.LENT_RUNNING] == -1).all()


# -- plain double frees, the pad slot, the sentinel ------------------------------------------
@pytest.mark.parametrize("admitted", [False, True], ids=["candidate", "running"])
def test_a_double_free_raises_and_changes_nothing(engine_cls, admitted):
    engine, g = guarded(engine_cls)
    with acting(R1):
        ids = g.alloc(2)
        if admitted:
            g.admit(ids)
        g.free(ids)
        assert g.available_size() == 8
        frozen = Untouched(engine, g)
        with pytest.raises(IllegalFree, match=r"state FREE, owner nobody\).*a double free"):
            g.free(ids[1:])
    frozen.check()
    assert g.available_size() == 8  # never 9


@pytest.mark.parametrize("bad", [[0], [-1], [9], [3, 3]], ids=["pad slot", "sentinel", "out of range", "twice"])
def test_not_a_real_slot_raises_bad_slot_id(engine_cls, bad):
    engine, g = guarded(engine_cls)
    with acting(R1):
        g.alloc(3)
        frozen = Untouched(engine, g)
        with pytest.raises(BadSlotId, match=r"bad slot id (0|-1|9|3) for free by request 1"):
            g.free(torch.tensor(bad))
    frozen.check()


def test_one_bad_slot_in_a_batch_frees_none(engine_cls):
    engine, g = guarded(engine_cls)
    with acting(R1):
        ids = g.alloc(2)
    with acting(R2):
        other = g.alloc(1)
        frozen = Untouched(engine, g)
        with pytest.raises(IllegalFree, match=f"illegal free by request 2 on slot {ids[0].item()}.*only its owner"):
            g.free(torch.cat((other, ids)))  # its own slot, and request 1's
    frozen.check()


# -- legal use leaves the free list as SGLang's own allocator would ---------------------------
def test_legal_frees_match_the_bare_engine(engine_cls):
    bare = engine_cls(8, "cpu")
    engine, g = guarded(engine_cls)
    with acting(R1):
        a, b = g.alloc(3), bare.alloc(3)
        g.admit(a[:2])
        g.free(a[[2, 0, 1]])  # one candidate (rollback), two running (finish): one batch
        bare.free(b[[2, 0, 1]])
    with acting(R2):
        assert torch.equal(g.alloc(5), bare.alloc(5))
        assert g.alloc(9) is None and bare.alloc(9) is None
        assert g.alloc(0).numel() == 0
    assert torch.equal(engine.free_slots, bare.free_slots)
    assert g.available_size() == bare.available_size() == 3
    assert g.free_slots is engine.free_slots and g.size == 8  # the rest of the engine's API


def test_a_full_legal_session(engine_cls, tmp_path):
    engine, g = guarded(engine_cls, trace=tmp_path / "t.jsonl")
    ids = session_turn_one(g)
    slot = ids.item()
    with acting(S5):
        g.lend(ids, 2)
    with acting(R2):
        g.fire(Event.ROLLBACK, ids)  # turn 2 did not fit: the slot goes back to the session
    with acting(S5):
        g.lend(ids, 3)
    with acting(R3):
        g.admit(ids)
        g.fire(Event.FINISH, ids)  # turn 3 done: its state stays with the session
    with acting(R4):
        plain = g.alloc(2)
        g.admit(plain)
        g.free(plain)
    assert g.ledger.record(slot).state is State.PARKED and g.available_size() == 7
    with acting(S5):
        assert g.close().tolist() == [slot]
    assert g.available_size() == 8 and sorted(engine.free_slots.tolist()) == list(range(1, 9))
    assert g.audit(live_requests=(), live_sessions=()).clean
    g.guard.ledger.recorder.writer.close()
    capacity, lines = check_trace.read(tmp_path / "t.jsonl")
    assert capacity == 8 and len(lines) == 14  # one line per batch
    assert check_trace.check(lines, capacity).clean  # the guard's trace replays on the model


def test_a_session_cannot_be_closed_while_its_slot_is_lent(engine_cls):
    engine, g = guarded(engine_cls)
    ids = session_turn_one(g)
    with acting(S5):
        g.lend(ids, 2)
        frozen = Untouched(engine, g)
        with pytest.raises(Exception, match="illegal close by session 5"):
            g.close()
        frozen.check()
        with pytest.raises(IllegalFree, match="illegal free by session 5"):
            g.free(ids)


def test_a_released_slot_waits_for_its_steps_fence(engine_cls):
    engine, g = guarded(engine_cls)
    done = []
    with acting(R1):
        ids = g.alloc(1)
        g.admit(ids)
        g.launch(lambda: bool(done))  # a step that may use the slot is on the device
        g.free(ids)
    assert g.available_size() == 7 and g.ledger.record(ids.item()).state is State.RELEASED
    done.append(True)
    assert g.fence().tolist() == [ids.item()] and g.available_size() == 8


# -- who acts --------------------------------------------------------------------------------
def test_unattributed_calls_are_refused_by_default(engine_cls):
    engine, g = guarded(engine_cls)
    frozen = Untouched(engine, g)
    with pytest.raises(Unattributed, match="alloc with no acting actor"):
        g.alloc(1)
    with pytest.raises(Unattributed, match="free with no acting actor"):
        g.free(torch.tensor([1]))
    frozen.check()


def test_trusted_unattributed_calls_act_as_the_slots_owner(engine_cls):
    engine, g = guarded(engine_cls, unattributed="trust")
    ids = g.alloc(2)
    assert g.ledger.record(ids[0].item()).owner == ANONYMOUS
    g.free(ids)
    assert g.available_size() == 8
    with pytest.raises(IllegalFree, match="a double free"):
        g.free(ids)
    slot = session_turn_one(g)
    with acting(S5):
        g.lend(slot, 2)
    frozen = Untouched(engine, g)
    with pytest.raises(IllegalFree, match="illegal free by session 5 .*state LENT"):
        g.free(slot)  # trusted as its owner, the session: still no free of a lent slot
    frozen.check()


def test_an_adapter_can_set_the_context_variable(engine_cls):
    engine, g = guarded(engine_cls)
    token = ACTING.set(R3)
    try:
        ids = g.alloc(1)
    finally:
        ACTING.reset(token)
    assert g.ledger.record(ids.item()).owner == 3 and ACTING.get() is None


def test_unattributed_setting_is_checked():
    with pytest.raises(ValueError, match="unattributed must be one of"):
        GuardedAllocator(FreeList(2), unattributed="allow")


# -- clear ------------------------------------------------------------------------------------
def test_clear_is_the_engines_when_nothing_is_held(engine_cls):
    engine, g = guarded(engine_cls)
    with acting(R1):
        ids = g.alloc(2)
        frozen = Untouched(engine, g)
        with pytest.raises(HeldSlots, match=f"slot {ids[0].item()} is TAKEN \\(owner 1\\)"):
            g.clear()
        frozen.check()
        g.free(ids)
    g.clear()
    assert engine.free_slots.tolist() == list(range(1, 9))


# -- the how-to's patch names SGLang's real code ----------------------------------------------
@pytest.mark.skipif(SGLANG is None, reason="sglang not installed (pip install --no-deps sglang==0.5.23)")
def test_the_howto_names_sglangs_real_attributes():
    import importlib.util
    from pathlib import Path

    root = Path(importlib.util.find_spec("sglang").submodule_search_locations[0]) / "srt"
    pool_src = (root / "mem_cache" / "memory_pool.py").read_text()
    session_src = (root / "session" / "streaming_session.py").read_text()
    howto = (Path(__file__).resolve().parents[3] / "docs" / "howto.md").read_text()
    assert "class HybridReqToTokenPool" in pool_src and "self.mamba_allocator = MambaSlotAllocator(" in pool_src
    assert (
        "mid = self.mamba_allocator.alloc(1)" in pool_src
        and "self.mamba_allocator.free(mamba_index.unsqueeze(0))" in pool_src
    )
    assert "def free_mamba_cache(" in pool_src and "class StreamingSession" in session_src
    named = ("take", "try_match_prefix", "try_cache_finished_req", "release_session", "_free_slot_mamba")
    for name in named:
        assert f"    def {name}(" in session_src and f"`{name}" in howto, name
    for text in ("`self.mamba_allocator`", "free_mamba_cache", "mid = self.mamba_allocator.alloc(1)"):
        assert text in howto
    assert {"alloc", "free", "available_size", "clear"} <= {n for n in dir(SGLANG) if not n.startswith("_")}
    assert all(callable(getattr(GuardedAllocator, n)) for n in ("alloc", "free", "available_size", "clear"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_a_cuda_free_list_the_ids_stay_on_the_device(engine_cls):
    engine = engine_cls(8, "cuda")
    g = GuardedAllocator(engine)
    ids = session_turn_one(g)
    assert ids.device.type == "cuda"
    with acting(S5):
        g.lend(ids, 2)
    with acting(R2), pytest.raises(IllegalFree, match="state LENT"):
        g.free(ids)
    with acting(R3):
        plain = g.alloc(2)
        g.admit(plain)
        g.free(plain)
    assert engine.free_slots.device.type == "cuda" and g.available_size() == 7
    assert g.audit().clean


@pytest.mark.skipif(SGLANG is None, reason="sglang not installed (pip install --no-deps sglang==0.5.23)")
def test_sglangs_grouped_alloc_passes_through_and_is_attributed():
    engine = SGLANG(8, "cpu")
    g = GuardedAllocator(engine)
    g.alloc_group_begin(3)  # the engine's own method: pre-allocates, owned by nobody yet
    with acting(R1):
        a = g.alloc(1)
    with acting(R2):
        b = g.alloc(1)
    g.alloc_group_end()  # the unused one goes back to the engine's free list directly
    assert g.ledger.record(a.item()).owner == 1 and g.ledger.record(b.item()).owner == 2
    assert g.audit().clean and g.guard.available() == g.available_size() == 6
    with acting(R1), pytest.raises(IllegalFree, match="only its owner"):
        g.free(b)


def test_clear_waits_for_the_fence_of_a_release(engine_cls):
    engine, g = guarded(engine_cls)
    done = []
    with acting(R1):
        ids = g.alloc(1)
        g.admit(ids)
        g.launch(lambda: bool(done))
        g.free(ids)
    with pytest.raises(HeldSlots, match="is RELEASED"):
        g.clear()  # a step on the device may still use the slot
    done.append(True)
    g.clear()
    assert engine.free_slots.tolist() == list(range(1, 9)) and g.audit().clean


class EngineFault(RuntimeError):
    """What a failing engine `free` raises (not a lifecycle error: it comes from below)."""


class FailingFree(FreeList):
    """The in-repo engine, whose `free` raises while `failing` is set."""

    failing = False

    def free(self, free_index):
        if self.failing:
            raise EngineFault("the engine's free failed")
        super().free(free_index)


class LedgerFirst(GuardedAllocator):
    """The broken variant: the ledger records the free, then the engine is asked."""

    def free(self, free_index):
        actor = self._actor("free")
        ids = self.ledger._ids(free_index, "free", actor)
        for event, by, group in self._moves(ids, actor):
            self.ledger.apply(event, group, by)
        self.guard._give_back(ids[self.ledger.cols.state[ids] == int(State.FREE)])


@pytest.mark.parametrize("admitted", [False, True], ids=["rollback", "finish"])
@pytest.mark.parametrize(
    "cls", [GuardedAllocator, pytest.param(LedgerFirst, marks=pytest.mark.xfail(strict=True, reason="broken variant"))]
)
def test_an_engine_free_that_raises_loses_no_slot(cls, admitted):
    engine = FailingFree(4, "cpu")
    g = cls(engine)
    with acting(R1):
        ids = g.alloc(2)
        if admitted:
            g.admit(ids)
        engine.failing = True
        frozen = Untouched(engine, g) if not admitted else None
        with pytest.raises(EngineFault):
            g.free(ids)
        if frozen is not None:  # a rollback: the whole free changed nothing
            frozen.check()
        states = {g.ledger.record(int(i)).state for i in ids}
        assert states == ({State.TAKEN} if not admitted else {State.RELEASED})
        audit = g.audit()  # never FREE in the ledger and missing from the engine (a due release is reported as a leak)
        assert audit.free_list_ok and not audit.problems, audit.problems
        engine.failing = False
        if not admitted:
            g.free(ids)
        else:
            g.fence()  # the released slots reach the engine at the next fence
    assert g.available_size() == 4 and g.audit().clean
