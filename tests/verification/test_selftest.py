"""verify's self-test stage: every check it tests fires on its bad case as written, and the
stage fails when a check stops firing (a property no longer evaluated, a pin compared with
itself, a registry entry no stage evaluates)."""

import pytest

from slotwarden.model import registry
from slotwarden.verification import abstract, selftest
from slotwarden.verification.abstract import judged
from slotwarden.verification.checker import pins
from slotwarden.verification.verify.jobs import _checker_row, _selftest


@pytest.fixture(autouse=True)
def _fresh_memos():
    abstract.forget()
    yield
    abstract.forget()


def _failed(found) -> list:
    return [f.check for f in found if not f.ok]


def test_every_check_fires_on_its_bad_case():
    row = _selftest(None)
    assert row.ok, row.summary
    assert row.detail["checks"] == len(judged.PROPERTIES) + len(registry.MOVE_PROPERTIES) + len(
        registry.PROPERTIES
    ) + len(selftest.DEFAULT_BOUNDS)


def test_a_checker_property_no_longer_evaluated_fails(monkeypatch):
    monkeypatch.setattr(judged, "no_orphans", lambda *a, **k: True)
    assert _failed(selftest.checker_properties()) == ["checker property no_orphans"]


def test_a_move_property_no_longer_evaluated_fails(monkeypatch):
    monkeypatch.setattr(judged, "lock_counted", lambda *a, **k: True)
    assert _failed(selftest.checker_properties()) == ["checker property lock_counted"]


def test_a_step_property_no_longer_evaluated_fails(monkeypatch):
    """The launch judge with its writes_held blind: the step built to break it is no longer flagged by it."""
    monkeypatch.setattr(judged, "writes_held", lambda *a, **k: True)
    judged._STEP_VERDICTS.clear()
    try:
        assert _failed(selftest.checker_properties()) == ["checker property writes_held"]
    finally:
        judged._STEP_VERDICTS.clear()


def test_a_pin_compared_with_itself_fails():
    def self_compared(r):  # the row's counts replaced by the pin's own: every pin "matches"
        states, transitions = pins.pin_of(r.bounds)
        return _checker_row(r._replace(states=states, transitions=transitions))

    failed = _failed(selftest.pin_comparison(self_compared))
    assert len(failed) == len(selftest.DEFAULT_BOUNDS)
    assert not _failed(selftest.pin_comparison(_checker_row))


def test_a_registry_move_property_no_longer_judged_by_the_mutants_fails(monkeypatch):
    import dataclasses

    p = registry.PROPERTIES["borrow_safe"]
    blind = dataclasses.replace(p, on_move=lambda *a: True)
    monkeypatch.setattr(registry, "MOVE_PROPERTIES", tuple(blind if q is p else q for q in registry.MOVE_PROPERTIES))
    assert _failed(selftest.registry_moves()) == ["registry move property borrow_safe"]


def test_a_registry_claim_no_stage_backs_fails(monkeypatch):
    monkeypatch.delitem(judged.PROPERTIES, "quiescent")
    assert "registry entry quiescent" in _failed(selftest.registry_claims())
