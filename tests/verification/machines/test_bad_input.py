"""The shipped bad-input machines: junk at every public entry point of the pool, its ledger
and the guard (and, separately, the scheduler's), a typed error or success after every call,
and nothing changed by a call that raised."""

import pytest
from hypothesis import settings

import slotwarden.runtime.inputs as inputs
from slotwarden.verification.machines.bad_input import BadInputMachine, SchedulerBadInputMachine
from slotwarden.verification.machines.campaign import Budget, run_machine

BadInputMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)
SchedulerBadInputMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=15, deadline=None)

TestBadInput = BadInputMachine.TestCase
TestSchedulerBadInput = SchedulerBadInputMachine.TestCase


@pytest.mark.parametrize("unchecked", ["event", "actor", "ids"])
def test_the_machine_catches_a_runtime_without_the_validation_layer(monkeypatch, unchecked):
    """The check can fail: with one kind of argument passed through unchecked, as before the
    validation layer, the machine finds a call that raises untyped or changes something."""
    passthrough = {
        "event": lambda value, actor=None: value,
        "actor": lambda value, event=None: value,
        "ids": lambda value, event, actor: __import__("numpy").asarray(value).reshape(-1),
    }
    monkeypatch.setattr(inputs, unchecked, passthrough[unchecked])
    result = run_machine(f"no {unchecked} check", BadInputMachine, Budget(100, 20), seed=0, shrink=False)
    assert not result.passed, f"the machine missed a runtime that does not check {unchecked}"


def _junk_prompt_then_steps(machine):
    machine.setup(slots=1, overlap=False)
    machine.submit(["a token?"], 2, None)
    machine.step(3)


def test_the_scheduler_machine_catches_a_submit_without_prompt_checks(monkeypatch):
    """The scheduler's rule set can fail: with `submit` taking any prompt as it is, a junk
    prompt is recorded and breaks the next step, and the machine's rules say so. (Driven
    step by step: a Hypothesis search for it found it or not depending on what ran before
    in the same process.)"""
    import slotwarden.runtime.scheduler.intake as intake

    _junk_prompt_then_steps(SchedulerBadInputMachine())  # the real intake refuses it: nothing breaks
    monkeypatch.setattr(
        intake, "prompt_tokens", lambda prompt, vocab: list(prompt) if hasattr(prompt, "__iter__") else [prompt]
    )
    with pytest.raises(Exception):
        _junk_prompt_then_steps(SchedulerBadInputMachine())
