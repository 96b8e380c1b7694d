"""The mutation campaign's loop (`slotwarden mutation`): shard I/N of the sample, one mutant at a
time in one copy of the checkout (the mutated file put back, bytes and time, after each), each
verdict saved at once to mutation-I-of-N.json with its file's digest (a rerun resumes, judging
anew a mutant whose file changed since and dropping one no longer sampled; `--stage default`
then runs the default verify on the mutants left pending; `--again` judges every survivor
anew, as after a new check), then mutation.md rewritten from every shard's file. Nothing here
runs in `make test`: the campaign is opt-in."""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from slotwarden.verification.judges import mutation as mt
from slotwarden.verification.judges.mutation_report import current, write_markdown
from slotwarden.verification.judges.reach import REPORTS, ROOT, digest
from slotwarden.verification.usage import UsageError


def parse_shard(text: str) -> tuple[int, int]:
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) or not 1 <= int(parts[0]) <= int(parts[1]):
        raise UsageError(f"--shard {text}: want I/N, two whole numbers with 1 <= I <= N (e.g. 1/4)")
    return int(parts[0]) - 1, int(parts[1])


def commit(root: Path = ROOT) -> str:
    """HEAD's hash, and '+changes' when the files differ from it."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True)
    return head + ("+changes" if dirty.stdout.strip() else "")


def run_campaign(args) -> int:
    shard, shards = parse_shard(args.shard)
    out = Path(args.out) if args.out else REPORTS
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        rejudge(out)
        print(f"mutation report: {write_markdown(out)}")
        return 0
    mutants = mt.shard_of(mt.sample(mt.every_mutant(), args.sample, args.seed), shard, shards)
    keys = {m.key for m in mutants}
    mutants = mutants[: args.limit] if args.limit else mutants
    levels = ("quick",) if args.stage == "quick" else mt.LEVELS
    timeouts = {"quick": args.timeout_quick, "default": args.timeout_default}
    path = out / f"mutation-{shard + 1}-of-{shards}.json"
    header = {"tool": _tool(), "sample": args.sample, "seed": args.seed, "shard": f"{shard + 1}/{shards}"}
    saved = json.loads(path.read_text()) if path.is_file() else {}
    done = saved.get("mutants", {}) if all(saved.get(k) == v for k, v in header.items()) else {}
    done = {k: r for k, r in done.items() if k in keys}  # a mutant an edit took out of the sample goes
    header["commit"] = commit()
    reports = mt.coverage_reports()
    print(f"slotwarden mutation: shard {shard + 1}/{shards}, {len(mutants)} mutants, levels {', '.join(levels)}")
    with tempfile.TemporaryDirectory(prefix="slotwarden-mutant-") as tmp:
        copy = mt.copy_checkout(ROOT, Path(tmp))
        for i, m in enumerate(mutants, 1):
            old = kept(done.get(m.key), digest(copy / m.path), args.again)
            if old and old["outcome"] != mt.PENDING:
                continue
            start = time.perf_counter()
            done[m.key] = judged(copy, m, reports, levels, timeouts, old["seconds"] if old else None, old)
            if old and done[m.key]["outcome"] == mt.PENDING:
                continue
            r = done[m.key]
            print(
                f"  [{i}/{len(mutants)}] {r['outcome']:<36} {time.perf_counter() - start:6.1f} s  {m.key}", flush=True
            )
            path.write_text(json.dumps(dict(header, mutants=done), indent=1) + "\n")
    print(f"mutation results: {path}; report: {write_markdown(out)}")
    return 0


def kept(old: dict | None, sha1: str, again: bool = False) -> dict | None:
    """The saved record a run goes on from: None (judge anew) when the mutant's file changed since,
    or when `again` (after a new check) and the mutant survived, reached or not, pending or not."""
    if old is None or old.get("sha1") != sha1:
        return None
    if again and old["outcome"] in (mt.SURVIVED, mt.UNREACHED, mt.PENDING):
        return None
    return old


def judged(copy: Path, m: mt.Mutant, reports: dict, levels, timeouts, survived=None, old=None) -> dict:
    """`m` applied in `copy`, judged (`survived`: the levels it already survived, `old` its
    pending record), and put back: its record for the results file, with the jobs each level ran."""
    target = copy / m.path
    original, stat = target.read_bytes(), target.stat()
    mutated = mt.mutated_source(original.decode(), m)
    record = {"path": m.path, "operator": m.operator, "occurrence": m.occurrence, "lines": list(m.lines)}
    record["sha1"] = digest(target)  # the verdict holds for this content of the file only
    if mutated is None:
        return dict(record, outcome="not applied", level="", seconds={}, why="cosmic-ray made no such mutant", diff="")
    if mt.annotation_only(original.decode(), mutated):
        why = "the edit is inside annotations, kept as strings (from __future__ import annotations): never run"
        return dict(record, outcome=mt.ANNOTATION, level="", seconds={}, why=why, diff=_diff(original, mutated))
    record["diff"] = _diff(original, mutated)
    try:
        target.write_text(mutated)
        run = lambda level, jobs: mt.verify_run(copy, level, timeouts[level], jobs)  # noqa: E731
        v = mt.judge(m, reports, run, levels, survived=survived)
    finally:
        target.write_bytes(original)
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    return dict(
        record,
        outcome=v.outcome,
        level=v.level,
        seconds=v.seconds,
        why=v.why,
        jobs={**(old or {}).get("jobs", {}), **v.jobs},
    )


def _diff(original: bytes, mutated: str) -> str:
    diff = difflib.unified_diff(original.decode().splitlines(), mutated.splitlines(), lineterm="", n=0)
    return "\n".join(ln for ln in diff if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))[:600]


def rejudge(folder: Path, reports: dict | None = None, root: Path = ROOT) -> None:
    """Judge again, from the coverage reports as they are now and running nothing, every mutant of
    the results files in `folder` that no default run judged: one it never reaches survives."""
    reports = mt.coverage_reports() if reports is None else reports
    for path in sorted(folder.glob("mutation-*-of-*.json")):
        saved = json.loads(path.read_text())
        for key, r in saved["mutants"].items():
            if (
                current(r, root)
                and r["outcome"] in (mt.PENDING, mt.SURVIVED, mt.UNREACHED)
                and "default" not in r["seconds"]
            ):
                m = mt.Mutant(key, r["path"], r["operator"], r["occurrence"], tuple(r["lines"]))
                v = mt.judge(m, reports, _no_run, ("quick",), root, survived=r["seconds"])
                r.update(outcome=v.outcome, level=v.level, why=v.why)
        path.write_text(json.dumps(saved, indent=1) + "\n")


def _no_run(level: str, jobs=None):
    raise AssertionError(f"rejudge ran the {level} verify")


def _tool() -> str:
    from importlib.metadata import version

    return f"cosmic-ray {version('cosmic-ray')}"
