"""The integrity checks can fail: each flags a ledger, an engine or a config broken for it.

- The ledger's audit names a slot holding no declared state, an owner left on a FREE slot,
  a held slot still counted free; a clean ledger audits clean.
- The guard's audit names an engine free list with a duplicate, with an id the ledger holds,
  missing a FREE slot, or (an engine with a count only) reporting the wrong count.
- The guard refuses an engine alloc that gives a list, the wrong number of ids, or a slot
  the ledger holds, handing what it gave back to the engine; and an allocator without
  alloc/free, or with other than `capacity` slots free, when it is made.
- `PoolConfig` refuses each field out of range, naming it; `fit` gives the most slots the
  budget holds, the pad slot included, or says none fits.
"""

from __future__ import annotations

import torch

from slotwarden.model.errors import BadInput, BadSlotId
from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.free_list import FreeList
from slotwarden.runtime.guard import LedgerGuard
from slotwarden.runtime.ledger.ledger import SlotLedger

R1 = Actor.request(1)


def problems() -> list[str]:
    return _ledger_audits() + _guard_audits() + _engine_allocs() + _configs()


def _ledger_audits() -> list[str]:
    def held() -> SlotLedger:
        ledger = SlotLedger(4)
        ledger.apply(Event.ADMIT, ledger.alloc(2, R1), R1)
        return ledger

    def undeclared(led):
        led.cols.state[3] = 99

    def owner_on_free(led):
        led.cols.owner[4] = 7

    def held_and_free(led):
        led.cols.state[3], led.cols.owner[3] = int(State.RUNNING), 1

    out = []
    if not held().audit({1}).clean:
        out.append(f"a clean ledger audits {held().audit({1}).problems}")
    for what, edit, words in (
        ("a slot with no declared state", undeclared, "hold no declared state"),
        ("an owner on a FREE slot", owner_on_free, "owner field that does not match"),
        ("a held slot on the free list", held_and_free, "is not the set of FREE slots"),
    ):
        ledger = held()
        edit(ledger)
        audit = ledger.audit({1})
        if audit.clean or not any(words in p for p in audit.problems):
            out.append(f"{what}: the audit says {list(audit.problems)[:3]}, not {words!r}")
    return out


class _Counting:
    """An engine allocator with a count but no list of its free slots."""

    def __init__(self, n: int):
        self.n = n

    def available_size(self) -> int:
        return self.n

    def alloc(self, need_size: int):
        self.n -= need_size
        return torch.arange(1, need_size + 1)

    def free(self, free_index) -> None:
        self.n += 1 if free_index.numel() else 0


def _guard_audits() -> list[str]:
    out = []
    cases = (
        ("a duplicate", lambda e: torch.cat([e.free_slots, e.free_slots[:1]]), "holds duplicates: slot 3 x2"),
        ("an id the ledger holds", lambda e: torch.cat([e.free_slots, torch.tensor([1])]), "has not FREE: [1]"),
        ("a FREE slot missing", lambda e: e.free_slots[1:], "missing from the engine's free list: [3]"),
    )
    for what, edit, words in cases:
        guard = LedgerGuard(FreeList(4), 4)
        guard.alloc(2, R1)
        if not guard.audit({1}).clean:
            return [f"a clean guard audits {guard.audit({1}).problems}"]
        guard.allocator.free_slots = edit(guard.allocator)
        audit = guard.audit({1})
        if audit.clean or audit.free_list_ok or not any(words in p for p in audit.problems):
            out.append(f"an engine free list with {what}: the audit says {list(audit.problems)[:2]}, not {words!r}")
    counting = LedgerGuard(_Counting(4), 4)
    counting.alloc(1, R1)
    counting.allocator.n += 1
    if not any("the engine reports 4 free slots, the ledger 3" in p for p in counting.audit({1}).problems):
        out.append(f"an engine miscounting its free slots: the audit says {counting.audit({1}).problems}")
    return out


class _Liar(FreeList):
    """An engine whose alloc gives `gives` (then behaves)."""

    def __init__(self, gives):
        super().__init__(4)
        self.gives, self.back = gives, []

    def alloc(self, need_size: int):
        gives, self.gives = self.gives, None
        return super().alloc(need_size) if gives is None else gives

    def free(self, free_index) -> None:
        self.back.append(free_index.tolist())


def _engine_allocs() -> list[str]:
    out = []
    for what, gives, n, words in (
        ("a list", [1, 2], 2, "gave list [1, 2], not a 1-D tensor"),
        ("too few ids", torch.tensor([1]), 2, "the engine's alloc(2) gave tensor([1])"),
        ("a slot the ledger holds", torch.tensor([1]), 1, "TAKEN"),
    ):
        guard = LedgerGuard(_Liar(None), 4)
        guard.alloc(1, R1)  # slot 1, held by request 1
        guard.allocator.gives = gives
        before = guard.ledger.snapshot()
        try:
            guard.alloc(n, Actor.request(2))
            out.append(f"an engine alloc giving {what}: accepted")
        except BadSlotId as e:
            back = guard.allocator.back
            if words not in str(e) or back != [list(gives) if isinstance(gives, list) else gives.tolist()]:
                out.append(f"an engine alloc giving {what}: {str(e)[:120]!r}, given back {back}")
        except Exception as e:  # noqa: BLE001 (any other error is the finding)
            if what != "a slot the ledger holds" or words not in str(e) or guard.allocator.back != [[1]]:
                out.append(f"an engine alloc giving {what}: {type(e).__name__} {str(e)[:120]!r}")
        if not all(
            torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
            for a, b in zip(before.values(), guard.ledger.snapshot().values())
        ):
            out.append(f"an engine alloc giving {what}: refused, but the ledger changed")
    for what, make, words in (
        ("no alloc or free", lambda: LedgerGuard(object(), 4), "an allocator with alloc(n) and free(ids)"),
        ("fewer free than the capacity", lambda: LedgerGuard(FreeList(3), 4), "the allocator has 3 slots free"),
    ):
        try:
            make()
            out.append(f"a guard over an allocator with {what}: made")
        except BadInput as e:
            if words not in str(e):
                out.append(f"a guard over an allocator with {what}: {e}")
    return out


def _configs() -> list[str]:
    out = []
    for field, value, words in (
        ("num_slots", 0, "PoolConfig.num_slots must be a positive int, not 0"),
        ("layers", True, "PoolConfig.layers must be a positive int, not True"),
        ("conv_kernel", 1, "PoolConfig.conv_kernel must be at least 2"),
        ("conv_dims", (), "PoolConfig.conv_dims must be a non-empty tuple of positive ints, not ()"),
        ("ssm_dtype", torch.int32, "PoolConfig.ssm_dtype must be a floating torch dtype"),
        ("device", "no-such-device", "PoolConfig.device must name a torch device, not 'no-such-device'"),
    ):
        try:
            PoolConfig(**({"num_slots": 2, "layers": 1} | {field: value}))
            out.append(f"PoolConfig({field}={value!r}) made")
        except ValueError as e:
            if words not in str(e):
                out.append(f"PoolConfig({field}={value!r}): {e}")
    shape = dict(layers=1, conv_dims=(8,), heads=2, head_dim=4, state_size=4)
    per_slot = PoolConfig(num_slots=1, **shape).bytes_per_slot()
    if per_slot != 8 * 3 * 2 + 2 * 4 * 4 * 4:  # bf16 conv window of kernel - 1 columns, fp32 SSM state
        out.append(f"bytes_per_slot is {per_slot}, not 176")
    fitted = PoolConfig.fit(per_slot * 10 + 5, **shape)
    if fitted.num_slots != 9:
        out.append(f"fit of 10 slots' bytes gives {fitted.num_slots} slots, not 9 (the pad slot takes one)")
    try:
        PoolConfig.fit(per_slot, **shape)
        out.append("fit of one slot's bytes (the pad slot's) gave a config")
    except ValueError as e:
        if "holds no slot besides the pad slot" not in str(e):
            out.append(f"fit of one slot's bytes: {e}")
    return out
