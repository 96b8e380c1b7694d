"""The quick run says what it skipped and that it proved nothing; the declaration-mutant stage
runs in it, and passes only when every mutant is killed or listed as equivalent."""

import json

from slotwarden.cli.commands import main
from slotwarden.model import proofs
from slotwarden.verification.verify import jobs as verify
from slotwarden.verification.verify.report import verdict
from slotwarden.verification.verify.workers import cost


def test_a_quick_pass_says_the_proofs_were_skipped():
    assert verdict(True, "quick") == "PASS (quick: proofs skipped)"
    assert verdict(True, "default") == "PASS"
    assert verdict(False, "quick") == "FAIL"
    skipped = verify.skipped_by_quick()
    assert skipped[0] == f"the {len(proofs.PROOFS)} CrossHair proofs"
    assert any("exhaustive bounds" in s for s in skipped)
    # the text counts what the summary's exhaustive row counts (old text: "runs 6 small ones", 7 run)
    ran = sum(stage == "exhaustive" for stage, *_ in verify.jobs(verify.LEVELS["quick"], 1.0, 0, None))
    assert any(f": {ran} exhaustive checks)" in s for s in skipped), (ran, skipped)


def test_the_quick_run_kills_every_declaration_mutant(tmp_path, capsys):
    # shard 2 of many holds one job: the declaration mutants (job 1, after the agreement)
    assert main(["verify", "--quick", "--shard", "2/1000", "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "quick run skips: the" in out and "verify: PASS (quick: proofs skipped)" in out
    assert "kill matrix" in out
    (row,) = json.loads((tmp_path / "report.json").read_text())["results"]
    assert row["stage"] == "mutations" and row["ok"]
    kills = row["detail"]["kills"]
    assert {k["killed_by"] for k in kills} >= {"declare", "moves", "shutdown", "checker", ""}
    assert all(k["killed_by"] or k["mutant"] in row["detail"]["equivalent"] for k in kills)
    assert "PASS (quick: proofs skipped)" in (tmp_path / "report.md").read_text()


def test_an_exhaustive_row_fails_on_counts_other_than_its_pin(monkeypatch):
    """A tiny bounds checked against its pin, a wrong pin, no pin, and no pin while it is one of
    the default run's bounds."""
    from slotwarden.verification.checker import pins
    from slotwarden.verification.checker.bounds import TEST_BOUNDS
    from slotwarden.verification.checker.search import check

    bounds = TEST_BOUNDS[0]
    result = check(bounds)
    row = verify._checker_row(result)
    assert row.ok and "PIN" not in row.summary and row.detail["pinned"] == [result.states, result.transitions]
    monkeypatch.setitem(pins.TEST_COUNTS, str(bounds), (result.states + 1, result.transitions))
    row = verify._checker_row(result)
    assert not row.ok and f"PIN MISMATCH: pinned {result.states + 1} states" in row.summary
    monkeypatch.delitem(pins.TEST_COUNTS, str(bounds))
    row = verify._checker_row(result)
    assert row.ok and row.summary.endswith("; unpinned") and row.detail["pinned"] is None
    monkeypatch.setattr(verify, "DEFAULT_BOUNDS", (bounds,))
    assert not verify._checker_row(result).ok


def test_the_pooled_jobs_start_longest_first():
    """The worker processes take the biggest exhaustive bounds first (an unpinned one, its size
    unknown, before it), and the one-move proofs before the cheap proofs."""
    from slotwarden.verification.checker import pins
    from slotwarden.verification.abstract import Bounds

    every = verify.jobs(verify.LEVELS["default"], 300.0, None, None)
    unpinned = ("exhaustive", "new", (Bounds(slots=9, requests=9, sessions=0),))
    pooled = sorted([j for j in every if not callable(j[2])] + [unpinned], key=cost, reverse=True)
    biggest = max(verify.DEFAULT_BOUNDS, key=lambda b: pins.pin_of(b)[1])
    assert pooled[0] == unpinned and pooled[1][1] == str(biggest)
    names = [j[1] for j in pooled]
    assert names.index(verify.EVERY_MOVE) < names.index("quiescent")


def _raise(*_):
    raise ZeroDivisionError("a job's own fault")


def test_a_job_that_raises_is_a_fail_row_with_its_traceback(tmp_path, capsys, monkeypatch):
    """In this process (the agreement, job 1) and in a worker (the declaration mutants, job 2):
    each raising job is a FAIL row naming the exception, with its traceback in report.json and
    report.md, and verify ends with FAIL (exit 1). Before, the exception ended verify with a
    traceback and no verdict."""
    from slotwarden.verification.verify import workers

    monkeypatch.setattr(verify, "_agreement", _raise)
    monkeypatch.setattr(workers, "declaration_mutants_job", _raise)  # the forked worker inherits it
    for shard in ("1/1000", "2/1000"):
        report = tmp_path / shard.replace("/", "-")
        assert main(["verify", "--quick", "--shard", shard, "--report", str(report)]) == 1
        out = capsys.readouterr().out
        assert "RAISED ZeroDivisionError: a job's own fault" in out and "verify: FAIL" in out
        (row,) = json.loads((report / "report.json").read_text())["results"]
        assert not row["ok"] and row["detail"]["raised"] == "ZeroDivisionError"
        assert "Traceback" in row["detail"]["traceback"] and "_raise" in row["detail"]["traceback"]
        assert "## Jobs that raised" in (report / "report.md").read_text()


def test_job_selection_runs_exactly_the_named_jobs(tmp_path, capsys, monkeypatch):
    """--job keeps only the named jobs, in this process and in a worker; naming the rule
    coverage job brings the exhaustive searches it reads; an unknown name is refused with the
    close match, or with every name."""
    import pytest

    from slotwarden.verification.usage import UsageError
    from slotwarden.verification.verify import run

    every = verify.jobs(verify.LEVELS["quick"], 1.0, 0, None)
    names = [run.job_name(j) for j in every]
    assert run.select(every, None) == every
    assert [run.job_name(j) for j in run.select(every, ["hypothesis/pool", "declaration/agreement"])] == [
        "declaration/agreement",
        "hypothesis/pool",
    ]
    searches = [n for n in names if n.startswith("exhaustive/") and n != run.COVERAGE_JOB]
    assert searches and [run.job_name(j) for j in run.select(every, [run.COVERAGE_JOB])] == searches + [
        run.COVERAGE_JOB
    ]
    with pytest.raises(UsageError, match="did you mean hypothesis/pool"):
        run.select(every, ["hypothesis/pol"])
    with pytest.raises(UsageError, match="the jobs are: declaration/agreement; "):
        run.select(every, ["nothing like it"])
    assert main(["verify", "--quick", "--job", "hypothesis/pol"]) == 2
    assert "--job hypothesis/pol: the quick run has no such job; did you mean" in capsys.readouterr().err
    jobs = ["declaration/agreement", "mutations/declaration mutants"]
    assert main(["verify", "--quick", "--job", jobs[0], "--job", jobs[1], "--report", str(tmp_path)]) == 0
    assert "quick run, shard 1/1, 2 jobs" in capsys.readouterr().out
    rows = json.loads((tmp_path / "report.json").read_text())["results"]
    assert sorted(r["stage"] for r in rows) == ["declaration", "mutations"]  # a job's row may name it otherwise


def test_each_job_runs_in_its_own_coverage_context(monkeypatch):
    """Under coverage.py (a stand-in here) a job's lines are labelled "stage/name", and the
    lines after it "" again, also when it raises; without coverage.py nothing happens."""
    import sys
    import types

    from slotwarden.verification.verify import workers

    switched = []

    class Coverage:
        @staticmethod
        def current():
            return Coverage

        @staticmethod
        def switch_context(name):
            switched.append(name)

    monkeypatch.setitem(sys.modules, "coverage", types.SimpleNamespace(Coverage=Coverage))

    def job():
        switched.append("ran")
        return []

    workers.timed(job, "hypothesis", "pool")
    workers.timed(lambda: _raise(), "faults", "leak")
    assert switched == ["hypothesis/pool", "ran", "", "faults/leak", ""]
    monkeypatch.delitem(sys.modules, "coverage")
    workers.timed(job, "hypothesis", "pool")
    assert switched[-1] == "ran"
