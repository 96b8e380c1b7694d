"""The runtime agreement over many-slot batches (verification/batches.py): on the shipped ledger
every batch agrees with step() slot by slot, and a compiled move that moves a run partly owned
by the actor as if wholly owned is caught."""

import numpy as np
import pytest

from slotwarden.model.vocabulary import NOBODY
from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.verification.batches import covers, judge_batches


def test_every_batch_agrees_with_step_slot_by_slot():
    verdicts = judge_batches()
    bad = [str(v) for v in verdicts if not v.agrees]
    assert not bad, bad[:5]
    kinds = covers(verdicts)
    assert set(kinds) == {"one run", "several runs", "scattered", "mixed owner", "mixed state"}
    assert all(n > 0 for n, _ in kinds.values())
    n, refused = kinds["mixed owner"]
    assert 0 < refused < n  # refused where the owner matters, moved where it does not (a borrower's move)
    n, refused = kinds["mixed state"]
    assert 0 < refused < n  # some mixes are legal (an abort of taken and running slots)
    paths = {v.path for v in verdicts}
    want = {"compiled", "compiled python", "compiled slot by slot", "numpy"}
    assert paths == (want if compiled.AVAILABLE else {"numpy"})


class AsIfOwned:
    """A broken compiled move: a batch whose first slot the actor owns is moved as if the actor
    owned every slot of it (the kernel's owner check skipped after the first slot; a refusal
    still changes nothing)."""

    def __init__(self, mover, owner: np.ndarray):
        object.__setattr__(self, "_mover", mover)
        object.__setattr__(self, "_owner", owner)

    def __getattr__(self, name):
        return getattr(self._mover, name)

    def __setattr__(self, name, value):  # `paths.use` sets `runs` on the kernel
        setattr(self._mover, name, value)

    def move(self, event, ids, actor_id, *rest):
        saved = self._owner[ids].copy()
        if type(actor_id) is int and saved[0] == actor_id:
            self._owner[ids[saved != NOBODY]] = actor_id
        got = self._mover.move(event, ids, actor_id, *rest)
        if got < 0:
            self._owner[ids] = saved
        return got


def _broken_ledger(capacity, **kw):
    ledger = SlotLedger(capacity, **kw)
    if ledger.mover is not None:
        ledger.mover = AsIfOwned(ledger.mover, ledger.cols.owner)
    return ledger


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled move is not built")
def test_a_run_partly_owned_moved_as_if_wholly_owned_is_caught():
    bad = [v for v in judge_batches(make=_broken_ledger) if not v.agrees]
    assert bad
    assert {v.case.shape for v in bad} == {"mixed owner"}, {v.case.shape for v in bad}
    assert {v.path for v in bad} == {"compiled", "compiled python", "compiled slot by slot"}
    assert all("step() refuses a slot of it, the runtime moved the batch" in v.problem for v in bad), str(bad[0])
