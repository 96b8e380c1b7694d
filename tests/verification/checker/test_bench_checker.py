"""Smoke test of `slotwarden bench checker`: a tiny bounds, structure only, no timing thresholds;
a checker that explores something else than the reference makes the bench refuse."""

import argparse
import json

import pytest

from slotwarden.bench import checker as bench_checker
from slotwarden.verification.abstract import Bounds
from slotwarden.verification.checker.pins import pin_of

TINY = (Bounds(slots=1, requests=2, sessions=1),)


def test_bench_checker_reports_both_checkers_on_the_same_counts(tmp_path, capsys):
    out = tmp_path / "checker.json"
    args = argparse.Namespace(json=str(out), quick=True, device=None)
    assert bench_checker.run(args, bounds=TINY, rounds=1) == 0
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    assert (row["states"], row["transitions"]) == pin_of(TINY[0])
    for name in ("checker", "reference"):
        assert row[name]["cpu_s"] > 0 and row[name]["states_per_s"] > 0 and row[name]["transitions_per_s"] > 0
    assert row["ratio"] == pytest.approx(row["reference"]["cpu_s"] / row["checker"]["cpu_s"])
    assert result["total"]["states"] == row["states"]
    assert "ratio" in capsys.readouterr().out


def test_bench_checker_refuses_a_checker_that_explores_something_else(monkeypatch):
    def fewer(bounds, policy=None):  # the broken variant: one transition short
        r = bench_checker.check(bounds, policy)
        return r._replace(transitions=r.transitions - 1)

    monkeypatch.setattr(bench_checker, "CONTENDERS", (("checker", fewer), bench_checker.CONTENDERS[1]))
    with pytest.raises(RuntimeError, match="disagree"):
        bench_checker.one(TINY[0], 1)
