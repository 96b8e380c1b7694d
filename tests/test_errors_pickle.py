"""Every typed error with keyword-only or several constructor arguments survives pickling with
its type, text and fields (verify's worker processes send errors to the parent)."""

from __future__ import annotations

import pickle

import pytest

from slotwarden.model.errors import IllegalCopy
from slotwarden.model.vocabulary import Actor, Slot, State
from slotwarden.runtime.radix.errors import LockRefused, TreeBroken
from slotwarden.runtime.scheduler.build_args import BadBuild
from slotwarden.runtime.scheduler.errors import BadConfig
from slotwarden.runtime.scheduler.shapes import PoolMismatch

ERRORS = [
    IllegalCopy(
        "into a slot it does not hold", slot_id=2, slot=Slot(State.RUNNING, 1, -1, 0, 0), actor=Actor.request(2)
    ),
    TreeBroken("check", "node 3: published without a slot", node=3),
    LockRefused("lock", "request 4 already holds a lock", node=1, rid=4),
    BadConfig("max_running", 0, "a positive int"),
    BadBuild("model", "tiny", "a TinyMambaConfig"),
    PoolMismatch([("layers", 3, 1), ("device", "cpu", "meta")]),
]


@pytest.mark.parametrize("err", ERRORS, ids=lambda e: type(e).__name__)
def test_pickles(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert {k: v for k, v in vars(back).items()} == {k: v for k, v in vars(err).items()}
