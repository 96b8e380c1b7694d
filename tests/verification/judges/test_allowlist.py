"""The coverage allowlist stays honest against the committed report of the last
`slotwarden verify --coverage` run (no coverage run here): every entry names a line that
exists, holds the entry's text, and that run missed. A tiny coverage run over a toy module shows
each kind of dishonest entry caught: a line reached (stale), a line that moved, a missing one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotwarden.verification.judges import allowlist
from slotwarden.verification.judges.reach import REPORTS, ROOT, numbers, percent, ranges, summarize

TOY = """def toy(x):
    if x > 0:
        return "positive"
    if x is None:  # defensive: never None here
        raise TypeError("x is None")
    return "other"
"""


def test_every_allowlist_entry_names_a_line_the_default_run_misses():
    entries = allowlist.parse((REPORTS / "coverage-allowlist.txt").read_text())
    report = json.loads((REPORTS / "coverage-default.json").read_text())
    assert entries, "the allowlist is empty"
    assert allowlist.check(entries, report, ROOT) == []
    assert all(e.reason for e in entries)


def test_the_committed_report_covers_the_three_packages():
    report = json.loads((REPORTS / "coverage-default.json").read_text())
    assert set(report["totals"]) == {"model", "runtime", "kernels"}
    assert all(t["lines"][1] > 0 and 0 < percent(t["lines"]) <= 100 for t in report["totals"].values())
    assert report["verify_status"] == 0, "the report comes from a run that did not pass"


def _toy_report(tmp_path: Path) -> dict:
    coverage = pytest.importorskip("coverage")
    (tmp_path / "pkg").mkdir()
    toy = tmp_path / "pkg" / "toy.py"
    toy.write_text(TOY)
    cov = coverage.Coverage(data_file=None, branch=True, include=[str(toy)])
    cov.start()
    try:
        namespace: dict = {}
        exec(compile(toy.read_text(), str(toy), "exec"), namespace)
        assert namespace["toy"](1) == "positive" and namespace["toy"](-1) == "other"
    finally:
        cov.stop()
    cov.json_report(outfile=str(tmp_path / "raw.json"))
    return summarize(json.loads((tmp_path / "raw.json").read_text()), tmp_path, "toy", 0)


def test_a_toy_coverage_run_catches_each_dishonest_entry(tmp_path):
    report = _toy_report(tmp_path)
    f = report["files"]["pkg/toy.py"]
    assert numbers(f["missing"]) == {5}  # the defensive raise
    assert "4->5" in f["missing_branches"]
    honest = allowlist.Entry("pkg/toy.py", 5, 'raise TypeError("x is None")', "defensive: x is never None")
    assert allowlist.check([honest], report, tmp_path) == []
    assert allowlist.unexplained([honest], report) == {}
    stale = allowlist.Entry("pkg/toy.py", 3, 'return "positive"', "said missed, but reached")
    moved = allowlist.Entry("pkg/toy.py", 6, 'return "positive"', "the text of another line")
    gone = allowlist.Entry("pkg/toy.py", 40, "x", "past the end")
    problems = allowlist.check([stale, moved, gone, honest, honest], report, tmp_path)
    assert [p.split(": ", 1)[1].split(" ")[0] for p in problems] == ["verify", "holds", "the", "listed"], problems
    assert allowlist.unexplained([], report) == {"pkg/toy.py": {4, 5}}  # a missed line, a missed branch's source


def test_allowlist_lines_parse_or_are_refused():
    text = "# comment\n\nruntime/pool.py:12 | x = 1 | GPU only\n"
    assert allowlist.parse(text) == [allowlist.Entry("runtime/pool.py", 12, "x = 1", "GPU only")]
    for bad in ("runtime/pool.py | x | y", "runtime/pool.py:a | x | y", "runtime/pool.py:3 | x |  "):
        with pytest.raises(allowlist.AllowlistError):
            allowlist.parse(bad)


def test_line_sets_round_trip_as_ranges():
    assert ranges([1, 2, 3, 5, 9, 10]) == "1-3,5,9-10"
    assert numbers("1-3,5,9-10") == {1, 2, 3, 5, 9, 10} and numbers("") == set()


def test_the_markdown_lists_what_no_entry_explains(tmp_path):
    from slotwarden.verification.judges.reach import markdown

    report = _toy_report(tmp_path)
    report["totals"] = {"model": {"lines": [1, 2], "branches": [1, 2]}}
    text = markdown(report)
    assert "| pkg/toy.py | 4-5 |" in text and "explains 0 of the 2 lines missed" in text


def test_an_entry_whose_line_moved_is_moved_to_the_nearest_missed_line_of_its_text(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "toy.py").write_text(
        "\n\n" + TOY.replace('    return "other"', '    raise TypeError("x is None")\n    return "other"')
    )
    # the raise now at lines 7 (missed) and 8 (reached, nearer to the entry at 9)
    report = {"files": {"pkg/toy.py": {"missing": "7", "missing_branches": ["6->7"], "executed": "1-6,8-9"}}}
    text = (
        '# why\npkg/toy.py:9 | raise TypeError("x is None") | never None\n'
        'pkg/toy.py:4 | return "positive" | no such missed line\n'
        "pkg/toy.py:6 | if x is None:  # defensive: never None here | its branch\n"
    )
    out, moved = allowlist.reanchor(text, report, tmp_path)
    assert moved == ['pkg/toy.py:9 -> 7: raise TypeError("x is None")']
    assert out.splitlines()[0] == "# why" and out.splitlines()[1].startswith("pkg/toy.py:7 | raise")
    assert out.splitlines()[2:] == text.splitlines()[2:]  # no missed line holds it: left for check to name
    assert [p.split(": ", 1)[0] for p in allowlist.check(allowlist.parse(out), report, tmp_path)] == ["pkg/toy.py:4"]


def test_an_entry_s_text_may_hold_the_separator():
    (entry,) = allowlist.parse("pkg/toy.py:3 | return a | b | why: a reason")
    assert (entry.path, entry.line, entry.text, entry.reason) == ("pkg/toy.py", 3, "return a | b", "why: a reason")
    with pytest.raises(allowlist.AllowlistError):
        allowlist.parse("pkg/toy.py:3 | no reason")


def test_drop_stale_drops_exactly_the_entries_of_lines_verify_now_reaches(tmp_path, monkeypatch):
    report = _toy_report(tmp_path)  # line 5 missed, line 3 reached
    text = (
        "# why\n"
        'pkg/toy.py:5 | raise TypeError("x is None") | defensive\n'
        'pkg/toy.py:3 | return "positive" | said missed, but reached\n'
        'pkg/toy.py:6 | return "positive" | the text of another line\n'
    )
    out, dropped = allowlist.drop_stale(text, report, tmp_path)
    assert dropped == ['pkg/toy.py:3: return "positive"']
    assert out.splitlines() == [line for i, line in enumerate(text.splitlines()) if i != 2]
    problems = allowlist.check(allowlist.parse(out), report, tmp_path)
    assert [p.split(": ", 1)[0] for p in problems] == ["pkg/toy.py:6"]  # a moved line is left for check to name
    # the broken variant: a drop that reads no missed line takes the honest entry with the stale one
    monkeypatch.setattr(allowlist, "missed", lambda report, path: set())
    assert allowlist.drop_stale(text, report, tmp_path)[1] != dropped
