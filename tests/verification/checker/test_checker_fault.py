"""A violation that does not replay is a fault of the checker, reported as one: a typed
`CheckerFault`, and in verify a FAIL row that names it."""

import pytest

from slotwarden.verification.abstract import Bounds, Policy, initial
from slotwarden.verification.abstract.actions import successors
from slotwarden.verification.checker import search
from slotwarden.verification.verify.workers import raised


def test_a_violation_that_does_not_replay_is_a_checker_fault():
    bounds = Bounds(slots=1, requests=1, sessions=0)
    world = initial(bounds)
    last = next(successors(world, Policy(), bounds.overlap))  # a legal step: no "legal" violation there
    with pytest.raises(search.CheckerFault, match="checker fault: the violation legal did not replay"):
        search._violation("legal", [None], last, Policy(), bounds, keyof=None)


def test_verify_reports_it_as_a_checker_fault():
    try:
        raise search.CheckerFault("checker fault: the violation legal did not replay")
    except search.CheckerFault as exc:
        row = raised("exhaustive", "slots=1 requests=1 sessions=0 overlap=off", exc, 0.1)
    assert not row.ok and row.summary.startswith("RAISED CheckerFault: checker fault")


def test_a_trace_that_does_not_replay_is_a_checker_fault():
    # a declaration mutant (a donated slot left with no owner) under which the trace to the
    # violation the search found does not replay: before, a bare StopIteration escaped
    from slotwarden.verification.mutants import search_checks
    from worlds import mutant_lifecycle

    with search_checks.declared_as(mutant_lifecycle("RUNNING --INSERT [OWNER]: owner from CLEAR")):
        with pytest.raises(search.CheckerFault, match="the trace to the violation .* did not replay"):
            search.check(Bounds(slots=3, requests=3, sessions=0, nodes=1))
