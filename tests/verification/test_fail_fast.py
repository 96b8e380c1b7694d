"""`slotwarden verify --fail-fast` stops at the first failing row: the jobs after it are not
run, the worker processes' jobs still running are ended (not waited for), and the verdict is
FAIL with the failing row shown. Without the flag the same campaign runs every job."""

from __future__ import annotations

import time

from slotwarden.cli.commands import main
from slotwarden.verification.verify import run as verify_run
from slotwarden.verification.verify.jobs import Row

RAN: list[str] = []


def _row(name: str, ok: bool) -> Row:
    RAN.append(name)
    return Row("declaration", name, ok, 0.0, "ok" if ok else "broken on purpose", {})


def slow_pooled(stage, args, name=""):  # a worker's job that would outlast the test
    time.sleep(120)
    return [Row(stage, name, True, 120.0, "slow", {})], None


def quick_pooled(stage, args, name=""):
    return [Row(stage, name, True, 0.0, "quick", {})], None


def _campaign(*_args, **_kw):
    return [
        ("declaration", "first", lambda: _row("first", False)),
        ("mutants", "slow", ("slow",)),
        ("declaration", "second", lambda: _row("second", True)),
    ]


def test_fail_fast_stops_at_the_first_failing_row(monkeypatch, capsys):
    monkeypatch.setattr(verify_run, "jobs", _campaign)
    monkeypatch.setattr(verify_run, "run_pooled", slow_pooled)
    RAN.clear()
    start = time.perf_counter()
    assert main(["verify", "--quick", "--fail-fast"]) == 1
    assert time.perf_counter() - start < 60  # the slow worker job was ended, not waited for
    out = capsys.readouterr().out
    assert RAN == ["first"], RAN
    assert "FAIL declaration first" in out and "--fail-fast: stopped at the first failing job" in out
    assert out.rstrip().endswith("verify: FAIL")


def test_without_fail_fast_every_job_runs(monkeypatch, capsys):
    monkeypatch.setattr(verify_run, "jobs", _campaign)
    monkeypatch.setattr(verify_run, "run_pooled", quick_pooled)
    RAN.clear()
    assert main(["verify", "--quick"]) == 1
    assert RAN == ["first", "second"]
    assert "--fail-fast" not in capsys.readouterr().out
