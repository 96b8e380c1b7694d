"""verify's 'guard step' row: the drop-in allocator's step check against the model's."""

import numpy as np
import torch

from slotwarden.verification.edges import guard_step


def test_the_guards_step_check_agrees_with_the_models():
    assert guard_step.problems() == []


def test_a_guard_check_blind_to_reads_is_found():
    def no_sources(a, ids, who, src):  # the engine's copy sources dropped: reads of another's slot pass
        a.check_step(torch.tensor(ids), who, 0, None)

    found = guard_step.disagreements(no_sources, steps=400)
    assert found and any(got is None for _, _, got in found)


def test_a_guard_check_that_lets_a_pad_row_anywhere_is_found():
    def pads_anywhere(a, ids, who, src):
        real = [i for i, w in enumerate(who) if w != guard_step.NOBODY]
        pick = (lambda v: [v[i] for i in real]) if real else None
        if pick:
            a.check_step(torch.tensor(pick(ids)), pick(who), 0, None if src is None else pick(src))

    assert guard_step.disagreements(pads_anywhere, steps=400)


def test_a_guard_check_blind_to_fills_is_found(monkeypatch):
    from slotwarden.runtime import guard as guard_module

    real = guard_module._launch.check_step
    blind = lambda ledger, ids, who, pad, src, fills=None: real(ledger, ids, who, pad, src, None)  # noqa: E731
    monkeypatch.setattr(guard_module._launch, "check_step", blind)
    found = guard_step.disagreements(steps=400)
    assert found and any(got is None for _, _, got in found)  # a stale read let through


def test_a_guard_that_leaves_written_slots_unmarked_is_found(monkeypatch):
    import numpy as np

    from slotwarden.runtime import guard as guard_module

    monkeypatch.setattr(guard_module, "_rows", lambda ids: np.array([0]))  # only the pad slot: nothing marked
    assert guard_step.disagreements(steps=400)


def test_the_fill_reports_keep_their_contract():
    assert guard_step.reports() == []


def test_a_copy_report_that_checks_nothing_is_found(monkeypatch):
    from slotwarden.runtime.guard import LedgerGuard

    def unchecked(self, dst, src=None):  # fills whatever it is told, refuses nothing
        if self.fills is not None:
            self.fills[np.asarray(dst)] = 2

    monkeypatch.setattr(LedgerGuard, "copied", unchecked)
    found = guard_step.reports()
    assert any("accepted" in p for p in found) and any("changed" not in p for p in found)


def test_a_guard_without_fills_that_judges_first_reads_is_found(monkeypatch):
    import slotwarden.verification.edges.guard_step as g

    real = g.GuardedAllocator
    monkeypatch.setattr(g, "GuardedAllocator", lambda engine, *a, **k: real(engine, *a, **{**k, "fills": True}))
    assert any("first read" in p for p in g.reports())
