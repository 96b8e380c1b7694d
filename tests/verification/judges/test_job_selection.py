"""Per-job selection of the mutation campaign, on small fake coverage reports: a mutant runs only
the jobs whose coverage context executes one of its statements (a continuation line counts as
its statement), every job when a line of it runs outside any job (at import) or the report has
no per-job data or its file changed, and none when no job reaches it; the jobs run are passed
to the verify run and kept in the verdict. The coverage report turns coverage.py's contexts
into per-job line ranges."""

from __future__ import annotations

from slotwarden.verification.judges import mutation as mt
from slotwarden.verification.judges.lines import numbers, ranges
from slotwarden.verification.judges.reach import by_context, digest, summarize


def _report(tmp_path, jobs: dict) -> dict:
    """a.py: lines 1-20 statements but 9 (a continuation of 8); the executed ones are those some
    context ran."""
    (tmp_path / "a.py").write_text("x = 1\n" * 20)
    ran = set().union(*(numbers(r) for r in jobs.values()))
    statements = set(range(1, 21)) - {9}
    f = {"sha1": digest(tmp_path / "a.py"), "executed": ranges(ran), "missing": ranges(statements - ran)}
    return {"files": {"a.py": dict(f, jobs=jobs)}}


def _m(first: int, last: int | None = None) -> mt.Mutant:
    return mt.Mutant(f"a.py:op:{first}", "a.py", "op", 0, (first, last or first))


def test_a_mutant_runs_only_the_jobs_that_reach_it(tmp_path):
    report = _report(tmp_path, {"": "1-3", "hypothesis/pool": "4-8,10", "faults/leak": "6-7,12"})
    assert mt.reaching_jobs(report, _m(5), tmp_path) == {"hypothesis/pool"}
    assert mt.reaching_jobs(report, _m(6), tmp_path) == {"hypothesis/pool", "faults/leak"}
    assert mt.reaching_jobs(report, _m(10, 12), tmp_path) == {"hypothesis/pool", "faults/leak"}
    assert mt.reaching_jobs(report, _m(9), tmp_path) == {"hypothesis/pool"}  # line 9 belongs to 8
    assert mt.reaching_jobs(report, _m(15), tmp_path) == frozenset()  # no job runs it
    assert mt.reaching_jobs(report, _m(2), tmp_path) is None  # run at import: every job sees it
    assert mt.reaching_jobs(report, _m(3, 4), tmp_path) is None
    assert mt.reached(report, _m(15), tmp_path) is False and mt.reached(report, _m(5), tmp_path) is True


def test_every_job_runs_without_per_job_data_or_for_a_changed_file(tmp_path):
    report = _report(tmp_path, {"hypothesis/pool": "4-8"})
    del report["files"]["a.py"]["jobs"]  # a report of before the contexts
    assert mt.reaching_jobs(report, _m(5), tmp_path) is None
    assert mt.reaching_jobs(report, _m(15), tmp_path) == frozenset()  # still not reached at all
    report = _report(tmp_path, {"hypothesis/pool": "4-8"})
    (tmp_path / "a.py").write_text("y = 2\n" * 20)
    assert mt.reaching_jobs(report, _m(15), tmp_path) is None
    assert mt.reaching_jobs(None, _m(5), tmp_path) is None


def test_the_verdict_keeps_the_jobs_each_level_ran(tmp_path):
    quick = _report(tmp_path, {"": "1-2", "hypothesis/pool": "4-8"})
    default = _report(tmp_path, {"": "1-2", "hypothesis/pool": "4-8", "proofs/conserved": "5"})
    runs = []

    def run(level, jobs):
        runs.append((level, jobs))
        return mt.SURVIVED, 1.0, ""

    v = mt.judge(_m(5), {"quick": quick, "default": default}, run, root=tmp_path)
    assert runs == [("quick", ["hypothesis/pool"]), ("default", ["hypothesis/pool", "proofs/conserved"])]
    assert v.outcome == mt.SURVIVED and v.jobs == {"quick": ["hypothesis/pool"], "default": runs[1][1]}
    runs.clear()
    v = mt.judge(_m(1), {"quick": quick, "default": default}, run, root=tmp_path)
    assert runs == [("quick", None), ("default", None)] and v.jobs == {"quick": mt.ALL, "default": mt.ALL}


def test_the_coverage_report_stores_each_jobs_lines(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "a.py").write_text("x = 1\n" * 9)
    contexts = by_context({1: [""], 2: [""], 4: ["hypothesis/pool", "faults/leak"], 5: ["hypothesis/pool"], 7: ["x"]})
    assert contexts == {"": {1, 2}, "hypothesis/pool": {4, 5}, "faults/leak": {4}, "x": {7}}
    summary = {"covered_lines": 4, "num_statements": 6}
    data = {"summary": summary, "executed_lines": [1, 2, 4, 5], "missing_lines": [6, 8], "contexts": contexts}
    report = summarize({"files": {str(tmp_path / "model" / "a.py"): data}}, tmp_path, "c", 0)
    # line 7 is no statement coverage.py counts executed: left out, and its context with it
    assert report["files"]["model/a.py"]["jobs"] == {"": "1-2", "faults/leak": "4", "hypothesis/pool": "4-5"}


def test_the_report_times_the_selected_runs_apart():
    from slotwarden.verification.judges.mutation_report import timing

    records = [
        {"seconds": {"quick": 100.0}, "level": "", "outcome": mt.PENDING},  # before the selection: every job
        {"seconds": {"quick": 10.0}, "level": "quick", "outcome": mt.KILLED, "jobs": {"quick": ["hypothesis/pool"]}},
        {"seconds": {"quick": 30.0}, "level": "quick", "outcome": mt.KILLED, "jobs": {"quick": ["faults/leak"]}},
        {"seconds": {"quick": 200.0}, "level": "", "outcome": mt.SURVIVED, "jobs": {"quick": mt.ALL}},
    ]
    lines = timing(records)
    assert lines[1] == "  - of them with only the jobs reaching the mutant: 2, median 20 s wall, mean 20 s"
    assert lines[2] == "  - of them with every job: 2, median 150 s wall, mean 150 s"
    assert len(timing([records[0]])) == 1  # no selected run yet: no split
