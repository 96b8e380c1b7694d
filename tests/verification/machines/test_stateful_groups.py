"""The scheduler machine's parallel-sampling groups (the cached machine's `groups` feature) and
the differential stage's group workloads each catch a broken scheduler that only a group's
path exercises, at verify's own budgets: the machine's mutant hunt (the cached machine hunts
the prefix-cache mutants) and the differential stage's cache half."""

import pytest

from slotwarden.runtime.scheduler.request import Phase
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.model.vocabulary import Actor
from slotwarden.verification.verify import jobs as main
from slotwarden.verification.machines.campaign import run_machine
from slotwarden.verification.differential import check_differential
from slotwarden.verification.machines import machine_for


class SiblingLocksUnpublished(Scheduler):
    """Broken: a sibling stops waiting once its prompt request has donated, and locks the
    donated slot to copy it before the fence that publishes it."""

    def cache_awaits(self, req):
        lead = req.awaits
        if lead is not None and lead.done and lead.donated in self.prefix.unpublished:
            slot = self.prefix.unpublished[lead.donated]
            req.awaits, req.shares = None, lead.donated
            self.pool.lock([slot], Actor.request(req.rid))  # the pool refuses: the state is unpublished
            return False
        return super().cache_awaits(req)


class PromptRequestLeaks(Scheduler):
    """Broken: aborting a group's last sibling ends a running prompt request in the tables
    only; its slot is never given back."""

    def _abort_one(self, req):
        if req.shared and req.phase is Phase.RUNNING and all(s.done for s in req.siblings):
            self._leave(req, "abort")
            return
        super()._abort_one(req)


class PromptRequestOutlivesGroup(Scheduler):
    """Broken (legal moves only): aborting a group's last sibling leaves its prompt request
    running or waiting, to prefill a prompt nobody will copy."""

    def _abort_one(self, req):
        if req.shared and all(s.done for s in req.siblings):
            return
        super()._abort_one(req)


class SiblingsDoNotWait(Scheduler):
    """Broken (legal moves only): siblings take their slots while their prompt request runs."""

    def cache_awaits(self, req):
        return False


def _hunt(cls):
    """verify's mutant hunt (its default budget, seed 0, no shrinking) with the cached machine."""
    budget = main.LEVELS["default"]["mutant"]
    return run_machine(cls.__name__, machine_for(cls, prefix_cache=True), budget, seed=0, shrink=False)


def _differential(cls):
    """verify's differential stage, its cache half (workloads at the default level)."""
    return check_differential(main.LEVELS["default"]["differential"] // 2, 40, seed=0, scheduler_cls=cls, cache=True)


@pytest.mark.parametrize(
    "cls, catch",
    [
        (SiblingLocksUnpublished, "IllegalMove"),
        (PromptRequestLeaks, "AuditFailed"),
        (PromptRequestOutlivesGroup, "AssertionError"),
        (SiblingsDoNotWait, "AssertionError"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_the_cached_machine_catches_a_broken_group(cls, catch):
    result = _hunt(cls)
    assert not result.passed, f"{cls.__name__} escaped {result.examples} examples"
    assert result.error.startswith(catch), result.error
    assert "submit_group" in result.trace


@pytest.mark.parametrize(
    "cls, says",
    [(SiblingLocksUnpublished, "the runtime raised IllegalMove"), (PromptRequestLeaks, "abort")],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_the_differential_stage_catches_a_broken_group(cls, says):
    report = _differential(cls)
    assert not report.ok and says in report.divergence, report.divergence
    assert "group" in report.divergence


def test_the_model_follows_a_group_s_moves():
    """A group of 3 with the cache on: the prompt request takes, admits and donates its slot;
    each sibling matches the published state (a LOCK), copies it and lets go at the fence;
    then a second group is aborted whole while its prompt request runs (one ABORT, and no
    move for the waiting siblings)."""
    from slotwarden.verification.differential import run_workload

    cfg = dict(slots=4, overlap=True, token_budget=8, chunk_size=2, max_running=4, retract_after=None)
    ops = (("group", 5, 2, 3, 1.0), ("step", 8), ("group", 6, 2, 2, 0.0), ("step", 1))
    pair = run_workload(ops + (("abort", 4), ("abort", 5), ("step", 3)), {**cfg, "prefix_cache": True})
    assert pair.events["LOCK"] == pair.events["UNLOCK"] == 3 and pair.events["INSERT"] >= 4
    assert pair.events["ABORT"] == 1 and not pair.sched.requests
