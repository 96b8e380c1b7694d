"""The mutation campaign's parts, without a verify run: the sample is fixed by its seed, one
mutant a place, and the shards split it; a mutant is judged level by level and a level whose
coverage report never executes its lines is not run (unless the file changed since); the
report counts and scores what the shards found; cosmic-ray applies a mutant to a toy."""

from __future__ import annotations

import json

import pytest

from slotwarden.verification.judges import mutation as mt
from slotwarden.verification.judges.mutation_report import counts, write_markdown
from slotwarden.verification.judges.reach import digest, numbers, ranges


def _mutants() -> list[mt.Mutant]:
    return [mt.Mutant(f"a.py:op{k}:{n}", "a.py", f"op{k}", n, (n + 1, n + 1)) for n in range(40) for k in range(3)]


def test_the_sample_takes_one_mutant_a_place_and_the_shards_split_it():
    mutants = _mutants()
    s = mt.sample(mutants, 25, seed=7)
    assert s == mt.sample(mutants, 25, seed=7) and s != mt.sample(mutants, 25, seed=8)
    assert len(s) == 25 and len({m.lines for m in s}) == 25
    shards = [mt.shard_of(s, i, 4) for i in range(4)]
    assert sorted(k for sh in shards for k in sh) == sorted(s)
    assert len(mt.sample(mutants, 1000, seed=0)) == 40  # at most one a place


def test_an_edit_of_one_file_changes_only_that_file_s_part_of_the_sample():
    """Shown failing on the draw this replaced (rng.sample over the sorted places): it kept 4
    of b.py's 14 sampled places after the edit of a.py."""

    def of(path, lines):  # every line of a file holds two mutants
        anchors = mt._anchors(lines)
        return [
            mt.Mutant(f"{path}:op{k}:{n}", path, f"op{k}", n, (n + 1, n + 1), anchors[n])
            for n in range(len(lines))
            for k in range(2)
        ]

    a, b = [f"a = {n}" for n in range(60)] + ["return x"] * 3, [f"b = {n}" for n in range(60)]
    before = mt.sample(of("a.py", a) + of("b.py", b), 30, seed=1)
    edited = ["# a line added at the top"] + a[:10] + a[12:]  # lines added, removed, moved
    after = mt.sample(of("a.py", edited) + of("b.py", b), 30, seed=1)
    in_b = lambda s: {m for m in s if m.path == "b.py"}  # noqa: E731
    moved = in_b(before) ^ in_b(after)  # only at the cut: a.py gained 1 place and lost 2
    assert len(in_b(before)) >= 10 and len(moved) <= 3
    kept = {m.anchor for m in before if m.path == "a.py"} & {m.anchor for m in after if m.path == "a.py"}
    assert kept and all(not t.startswith(("a = 10#", "a = 11#")) for t in kept)


def _report(tmp_path, executed: str) -> dict:
    (tmp_path / "a.py").write_text("x = 1\n" * 50)
    missing = ranges(set(range(1, 51)) - numbers(executed))  # every line a statement, the rest missed
    return {"files": {"a.py": {"sha1": digest(tmp_path / "a.py"), "executed": executed, "missing": missing}}}


def test_a_level_that_never_executes_the_mutant_is_not_run(tmp_path):
    m = mt.Mutant("a.py:op:0", "a.py", "op", 0, (10, 11))
    runs = []

    def run(level, jobs):
        runs.append(level)
        return (mt.KILLED if level == "default" else mt.SURVIVED), 1.0, "why"

    quick, default = _report(tmp_path, "1-9"), _report(tmp_path, "1-10")
    v = mt.judge(m, {"quick": quick, "default": default}, run, root=tmp_path)
    assert runs == ["default"] and v.outcome == mt.KILLED and v.level == "default"
    runs.clear()
    v = mt.judge(m, {"quick": quick, "default": quick}, run, root=tmp_path)
    assert runs == [] and v.outcome == mt.UNREACHED
    v = mt.judge(m, {"quick": default, "default": default}, run, levels=("quick",), root=tmp_path)
    assert runs == ["quick"] and v.outcome == mt.PENDING
    runs.clear()
    v = mt.judge(m, {"quick": default, "default": quick}, run, survived={"quick": 5.0}, root=tmp_path)
    assert runs == [] and v.outcome == mt.SURVIVED and v.seconds == {"quick": 5.0}  # pending, judged on
    cont = mt.Mutant("a.py:op:1", "a.py", "op", 1, (9, 9))  # line 9: a statement's continuation
    half = {"files": {"a.py": dict(quick["files"]["a.py"], executed="1-7", missing="8,10")}}
    assert mt.reached(half, cont, tmp_path) is False  # its statement (line 8) never ran
    half["files"]["a.py"]["executed"], half["files"]["a.py"]["missing"] = "1-8", "10"
    assert mt.reached(half, cont, tmp_path) is True
    (tmp_path / "a.py").write_text("y = 2\n" * 50)  # changed since the reports: every level runs
    v = mt.judge(m, {"quick": quick, "default": quick}, run, root=tmp_path)
    assert runs == ["quick", "default"] and v.outcome == mt.KILLED


def test_the_report_scores_killed_over_non_equivalent(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    sha1 = digest(tmp_path / "a.py")

    def record(outcome, level="", sha1=sha1):
        return {
            "path": "a.py",
            "sha1": sha1,
            "outcome": outcome,
            "level": level,
            "seconds": {"quick": 30.0},
            "why": "",
            "diff": "-a\n+b",
        }

    mutants = {
        "k1": record(mt.KILLED, "quick"),
        "k2": record(mt.TIMED_OUT, "quick"),
        "s1": record(mt.SURVIVED),
        "s2": record(mt.SURVIVED),
        "u1": record(mt.UNREACHED),
        "old": record(mt.SURVIVED, sha1="0" * 12),  # a.py changed since: stale, left out
        "none": record(mt.KILLED, sha1=None),  # no digest (an older results file): stale too
    }
    header = {"tool": "cosmic-ray 8.7.0", "sample": 5, "seed": 0, "shard": "1/1", "commit": "abc"}
    (tmp_path / "mutation-1-of-1.json").write_text(json.dumps(dict(header, mutants=mutants)))
    (tmp_path / "mutation-triage.txt").write_text("s1 | equivalent | the edit changes nothing observable\n")
    c = counts([dict(r, key=k) for k, r in mutants.items() if r["sha1"] == sha1], {"s1": ("equivalent", "x")})
    assert (c["judged"], c["equivalent"], c[mt.KILLED], c[mt.TIMED_OUT]) == (5, 1, 1, 1)
    assert c["score"] == pytest.approx(50.0)
    text = write_markdown(tmp_path, root=tmp_path).read_text()
    assert "**Score: 50.0%** of the 4 non-equivalent" in text and "| s2 | survived |" in text
    assert "Left out: 2 stale verdicts" in text and "| old |" not in text
    (tmp_path / "mutation-triage.txt").write_text("s1 | maybe | x\n")
    with pytest.raises(ValueError, match="line 1"):
        write_markdown(tmp_path, root=tmp_path)


def test_cosmic_ray_applies_a_mutant_to_a_toy():
    pytest.importorskip("cosmic_ray")
    m = mt.Mutant(
        "t.py:core/ReplaceComparisonOperator_Lt_LtE:0", "t.py", "core/ReplaceComparisonOperator_Lt_LtE", 0, (1, 1)
    )
    assert mt.mutated_source("ok = 1 < 2\n", m) == "ok = 1 <= 2\n"
    assert mt.mutated_source("ok = 1 == 2\n", m) is None


def test_the_sampled_files_leave_out_documentation_and_proofs():
    files = [p.relative_to(mt.ROOT).as_posix() for p in mt.sampled_files()]
    assert "runtime/ledger/compiled.py" in files and "model/free.py" in files
    assert not any(f.startswith("model/proofs/") or f == "model/diagram.py" for f in files)


def test_pending_mutants_are_judged_again_from_the_coverage_reports(tmp_path):
    from slotwarden.verification.judges.campaign import rejudge

    def record(lines, seconds):
        return {
            "path": "a.py",
            "sha1": digest(tmp_path / "a.py"),
            "operator": "op",
            "occurrence": 0,
            "lines": lines,
            "outcome": mt.PENDING,
            "level": "",
            "seconds": seconds,
            "why": "",
            "diff": "",
        }

    report = _report(tmp_path, "1-5")  # neither level reaches lines 10 and 12; both reach line 2
    mutants = {"a": record([10, 10], {}), "b": record([12, 12], {"quick": 3.0}), "c": record([2, 2], {"quick": 3.0})}
    mutants["d"] = dict(record([12, 12], {}), sha1="0" * 12)  # stale: not judged from a report of other lines
    header = {"tool": "cosmic-ray 8.7.0", "sample": 3, "seed": 0, "shard": "1/1", "commit": "abc"}
    (tmp_path / "mutation-1-of-1.json").write_text(json.dumps(dict(header, mutants=mutants)))
    rejudge(tmp_path, {"quick": report, "default": report}, root=tmp_path)
    after = json.loads((tmp_path / "mutation-1-of-1.json").read_text())["mutants"]
    assert [after[k]["outcome"] for k in "abcd"] == [mt.UNREACHED, mt.SURVIVED, mt.PENDING, mt.PENDING]


FUTURE = "from __future__ import annotations\n\n"


@pytest.mark.parametrize(
    "before, after, equivalent",
    [
        (FUTURE + "def f(x: int | None) -> int | None:\n    return x\n", "int << None", True),
        (FUTURE + "def f(x) -> int | None:\n    return x\n", "int & None", True),
        (FUTURE + "class A:\n    x: int | None = 3\n", "int ^ None", True),
        (FUTURE + "class A:\n    x: int | None = 3 | 4\n", "3 ^ 4", False),  # the value is run
        (FUTURE + "def f(x: int = 128):\n    return x\n", "129", False),  # a default is run
        ("def f(x: int | None):\n    return x\n", "int << None", False),  # evaluated at def time
    ],
)
def test_an_edit_inside_annotations_kept_as_strings_is_equivalent(before, after, equivalent):
    old = {"int << None": "int | None", "int & None": "int | None", "int ^ None": "int | None"}.get(after)
    old = old or {"3 ^ 4": "3 | 4", "129": "128"}[after]
    mutated = before.replace(old, after, 1)
    assert mutated != before
    assert mt.annotation_only(before, mutated) is equivalent


def test_the_sampled_files_never_evaluate_annotations():
    """annotation_only's premise: nothing in the sampled files reads annotations as values."""
    for path in mt.sampled_files():
        text = path.read_text()
        assert "get_type_hints" not in text and "get_annotations" not in text and "__annotations__" not in text, path


def test_a_campaign_judges_an_annotation_edit_without_running_verify(tmp_path, monkeypatch):
    from slotwarden.verification.judges import campaign

    (tmp_path / "a.py").write_text(FUTURE + "def f(x: int | None):\n    return x\n")
    # cosmic-ray's own edit (the mutation extra, not installed for `make test`), made by hand
    monkeypatch.setattr(mt, "mutated_source", lambda source, m: source.replace("int | None", "int << None"))
    m = mt.Mutant(
        "a.py:core/ReplaceBinaryOperator_BitOr_LShift:0", "a.py", "core/ReplaceBinaryOperator_BitOr_LShift", 0, (3, 3)
    )
    record = campaign.judged(tmp_path, m, {}, mt.LEVELS, {"quick": 1, "default": 1})
    assert record["outcome"] == mt.ANNOTATION and record["seconds"] == {} and "<<" in record["diff"]
    c = counts([dict(record, key=m.key)], {})
    assert (c["judged"], c["equivalent"], c[mt.ANNOTATION]) == (1, 1, 1)


def test_a_rerun_goes_on_from_a_record_unless_its_file_changed_or_again_asks_for_survivors():
    from slotwarden.verification.judges.campaign import kept

    records = {
        o: {"outcome": o, "sha1": "s"} for o in (mt.KILLED, mt.SURVIVED, mt.UNREACHED, mt.PENDING, mt.ANNOTATION)
    }
    assert all(kept(r, "s") is r for r in records.values())
    assert all(kept(r, "other") is None for r in records.values()) and kept(None, "s") is None
    again = {o for o, r in records.items() if kept(r, "s", again=True) is None}
    assert again == {mt.SURVIVED, mt.UNREACHED, mt.PENDING}
