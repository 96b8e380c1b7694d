"""The pool machine catches the one-line edit that drops `StatePool.copy`'s check of its
destination (a copy into a slot another request holds), with verify's default budget."""

import numpy as np

from slotwarden.runtime.pool import StatePool
from slotwarden.verification.machines.campaign import run_machine
from slotwarden.verification.machines.pool import PoolMachine
from slotwarden.verification.verify.jobs import LEVELS


def test_a_copy_into_a_foreign_slot_is_caught(monkeypatch):
    real = StatePool._require_mine

    def only_zero(self, ids: np.ndarray, actor, what: str) -> None:
        if what != "copy into":  # the edit: copy's destination goes unchecked; zero's still is
            real(self, ids, actor, what)

    monkeypatch.setattr(StatePool, "_require_mine", only_zero)
    r = run_machine("pool", PoolMachine, LEVELS["default"]["pool"], 0, shrink=False)
    assert not r.passed and "accepted" in r.error, r


def test_the_pool_machine_passes_the_pool_as_written():
    r = run_machine("pool", PoolMachine, LEVELS["quick"]["pool"], 0, shrink=False)
    assert r.passed, r
