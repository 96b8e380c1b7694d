"""The drop-in allocator's usual free takes its fast path, and that path keeps the contract:
- where the compiled lane is built, a `GuardedAllocator` binds it as its `alloc` and `free`; a
  subclass with `LANE = False`, or one that overrides `free` or `alloc`, keeps its own methods;
- the usual free of 1 and of 3 slots (a rollback of candidates, a finish of running slots) makes
  one move on every lane without the general path (`_moves`), and frees every slot it names;
- a free of a slot whose ledger state is not a declared one (a corrupt ledger) raises, with
  the engine's free list unchanged, on every lane;
- released slots handed to the engine at one fence come this free's first, in its order, then
  those released earlier, on every lane.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import Actor, State
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guarded_allocator import GuardedAllocator
from slotwarden.runtime.ledger import lane as lane_module
from slotwarden.verification.edges.free_lanes import LANES, PythonLane, allocator

R1, R2 = Actor.request(1), Actor.request(2)


class _OwnFree(GuardedAllocator):
    """An engine's subclass that counts its frees and allocs (its methods must stay its own)."""

    calls = 0

    def free(self, free_index):
        type(self).calls += 1
        return super().free(free_index)

    def alloc(self, need_size):
        type(self).calls += 1
        return super().alloc(need_size)


def problems() -> list[str]:
    return _lane_bound() + _fast_frees() + _undeclared_state() + _release_order()


def _lane_bound() -> list[str]:
    out = []
    built = lane_module.Lane is not None and lane_module.Mover is not None
    a = GuardedAllocator(FreeList(4))
    if built and a.ledger.mover is not None and not {"alloc", "free"} <= set(vars(a)):
        out.append("the compiled lane is built but a GuardedAllocator's alloc and free are its Python methods")
    if {"alloc", "free"} & set(vars(PythonLane(FreeList(4)))):
        out.append("a subclass with LANE = False has the compiled lane bound as its alloc or free")
    own = _OwnFree(FreeList(4))
    _OwnFree.calls = 0
    with own.acting(R1):
        own.free(own.alloc(2))
    if _OwnFree.calls != 2:
        out.append(f"a subclass's own free and alloc ran {_OwnFree.calls} times for one call of each, want 2")
    return out


def _general(*_):
    raise AssertionError("the general path")


def _fast_frees() -> list[str]:
    out = []
    for lane in LANES:
        for n in (1, 3):
            for admit in (False, True):
                a = allocator(lane, 8)
                a._moves = _general  # the usual free must not need it
                what = f"{lane} lane: a {'finish' if admit else 'rollback'} of {n} slots"
                with a.acting(R1):
                    ids = a.alloc(n)
                    if admit:
                        a.admit(ids)
                    try:
                        a.free(ids.flip(0))
                    except AssertionError:
                        out.append(f"{what} took the general path")
                        continue
                left = [int(a.ledger.record(s).state) for s in ids.tolist()]
                if any(s != State.FREE for s in left) or sorted(a.allocator.free_slots.tolist()) != list(range(1, 9)):
                    out.append(f"{what} left states {left}, the engine's free list {a.allocator.free_slots.tolist()}")
    return out


def _undeclared_state() -> list[str]:
    out = []
    for lane in LANES:
        a = allocator(lane, 4)
        with a.acting(R1):
            ids = a.alloc(1)
        a.ledger.cols.state[int(ids)] = len(State) + 3  # a corrupt ledger
        before = a.allocator.free_slots.tolist()
        try:
            with a.acting(R1):
                a.free(ids)
        except Exception:  # noqa: BLE001 (any refusal: the state is not one the model knows)
            pass
        else:
            out.append(f"{lane} lane: a free of slot {int(ids)} in no declared state was accepted")
        if a.allocator.free_slots.tolist() != before:
            out.append(f"{lane} lane: a free of a slot in no declared state changed the engine's free list")
    return out


def _release_order() -> list[str]:
    out = []
    for lane in LANES:
        a = allocator(lane, 8)
        done = []
        with a.acting(R1):
            early = a.alloc(2)
            a.admit(early)
        a.launch(done=lambda: bool(done))  # a step in flight: releases wait for its fence
        with a.acting(R1):
            a.free(early)
        with a.acting(R2):
            mine = a.alloc(3)
            a.admit(mine)
        done.append(True)
        with a.acting(R2):
            a.free(mine.flip(0))  # the step has finished: its fence hands both frees' slots over
        tail = a.allocator.free_slots.tolist()[-5:]
        want = mine.flip(0).tolist() + sorted(early.tolist())
        if tail[:3] != want[:3] or sorted(tail[3:]) != want[3:]:
            out.append(f"{lane} lane: the engine got {tail} at the fence, want this free's {want[:3]} first")
    return out
