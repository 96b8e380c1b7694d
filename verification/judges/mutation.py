"""`slotwarden mutation`: verify judged by mutants. cosmic-ray (the `mutation` extra) lists every
mutant of runtime/ and model/ (the compiled move's Python side, runtime/ledger/, included) and
applies one; a seeded sample picks one mutant at each of `--sample` distinct places, and shard
I/N takes every N-th of it. Each mutant is applied to a copy of the checkout and judged:
`verify --quick --fail-fast` first, the default run (`--fail-fast`) on a survivor. A mutant on
lines a verify run never executes (its committed coverage report) is not run at that level: it
cannot change what that run does, so it survives it; one that a level reaches runs only the jobs
whose coverage context executes its statements (`reaching_jobs`; every job when it is reached
outside any job, at import). Exit status 0, then 1 or 124 of a verify
run count as killed, and timed out; its outcome per mutant goes to mutation-I-of-N.json, after
each mutant (a rerun resumes), and `mutation_report` writes mutation.md from every shard."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

from slotwarden.verification.judges.reach import REPORTS, ROOT, digest, numbers

FOLDERS = ("runtime", "model")
LEFT_OUT = {
    "model/diagram.py": "draws the lifecycle diagram (documentation, not enforcement)",
    "model/document.py": "writes docs/lifecycle.md (documentation)",
    "model/palette.py": "the diagram's colours (documentation)",
    "model/proofs/": "CrossHair's conditions: verify's own checks, judged by verify's self-test, not the runtime",
}
"""Files of model/ and runtime/ that are not sampled, each with why."""

KILLED, TIMED_OUT, SURVIVED = "killed", "timed out", "survived"
UNREACHED = "survived (not reached)"  # no verify level executes its lines (coverage): nothing run
PENDING = "survived --quick (default run pending)"  # --stage quick stopped before the default run
ANNOTATION = "equivalent (an annotation)"  # the edit is in annotations kept as strings: nothing run

ALL = "all"  # a level's run of every job (the mutant is reached outside any job, or no job data)

LEVELS = ("quick", "default")
VERIFY = {"quick": ["verify", "--quick", "--fail-fast"], "default": ["verify", "--fail-fast"]}


class Mutant(NamedTuple):
    key: str  # path:operator:occurrence, stable across runs
    path: str  # relative to the checkout
    operator: str
    occurrence: int
    lines: tuple[int, int]  # first and last line of the mutated code
    anchor: str = ""  # its first line's text, and which of its file's lines with that text it is


class Verdict(NamedTuple):
    outcome: str
    level: str  # the verify level that decided ("" when no run did)
    seconds: dict  # level -> wall seconds of its run
    why: str  # the first FAIL line of the run that killed it, or why nothing ran
    jobs: dict = {}  # level -> the jobs its run ran (`reaching_jobs`), or ALL


def sampled_files(root: Path = ROOT) -> list[Path]:
    out = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if not any(rel == k or (k.endswith("/") and rel.startswith(k)) for k in LEFT_OUT):
                out.append(path)
    return out


def every_mutant(root: Path = ROOT) -> list[Mutant]:
    """Every mutant cosmic-ray's operators make of the sampled files (pinned: cosmic-ray 8.7.0), in a
    fixed order."""
    from cosmic_ray.commands.init import _all_work_items  # what `cosmic-ray init` stores, unstored

    specs = [m for item in _all_work_items(sampled_files(root), {}) for m in item.mutations]
    out, anchors = [], {}
    for m in specs:
        rel = Path(m.module_path).resolve().relative_to(root.resolve()).as_posix()
        if rel not in anchors:
            anchors[rel] = _anchors((root / rel).read_text().splitlines())
        key = f"{rel}:{m.operator_name}:{m.occurrence}"
        lines = (m.start_pos[0], m.end_pos[0])
        out.append(Mutant(key, rel, m.operator_name, m.occurrence, lines, anchors[rel][lines[0] - 1]))
    return sorted(out, key=lambda m: (m.path, m.lines, m.operator, m.occurrence))


def _anchors(lines: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for line in lines:
        text = line.strip()
        seen[text] = seen.get(text, 0) + 1
        out.append(f"{text}#{seen[text]}")
    return out


def sample(mutants: list[Mutant], size: int, seed: int) -> list[Mutant]:
    """One mutant at each of `size` places (a file's line), so that no line's many operators
    crowd out the others: the places, and the operator at each, whose hash with `seed` is
    lowest. A place is ranked by its file and `anchor` alone, so an edit to one file changes
    only that file's part of the sample (whose verdicts go stale anyway)."""
    places: dict[tuple[str, str], list[Mutant]] = {}
    for m in mutants:
        places.setdefault((m.path, m.anchor or str(m.lines[0])), []).append(m)
    chosen = sorted(places, key=lambda p: _rank(seed, *p))[:size]
    return [min(places[p], key=lambda m: _rank(seed, m.operator, places[p].index(m))) for p in chosen]


def _rank(seed: int, *parts) -> bytes:
    return hashlib.sha1("\0".join(map(str, (seed, *parts))).encode()).digest()


def shard_of(mutants: list[Mutant], shard: int, shards: int) -> list[Mutant]:
    """Shard `shard` (0-based) of `shards`: every shards-th mutant; the shards split the sample."""
    return mutants[shard::shards]


def statements(f: dict, m: Mutant) -> set[int]:
    """The statements of `m` in file report `f`: those on its lines, or else the statement its
    (continuation) line belongs to, the last one that starts before it."""
    every = numbers(f["executed"]) | numbers(f["missing"])
    mine = every & set(range(m.lines[0], m.lines[1] + 1))
    return mine or {max((s for s in every if s < m.lines[0]), default=m.lines[0])}


def reaching_jobs(report: dict | None, m: Mutant, root: Path = ROOT) -> frozenset | None:
    """The jobs ("stage/name") of the run of `report` that execute a statement of `m` (empty: no
    job does), or None for every job of the level: no report, a file changed since it (its
    lines may have moved), a report without jobs, or a statement of `m` run outside any job
    (at import: a constant, a default value, a def line), so that every job sees the mutant."""
    f = None if report is None else report["files"].get(m.path)
    if f is None or f.get("sha1") != digest(root / m.path):
        return None
    mine = statements(f, m)
    if not numbers(f["executed"]) & mine:
        return frozenset()
    if "jobs" not in f:
        return None
    hit = {job for job, lines in f["jobs"].items() if numbers(lines) & mine}
    return None if "" in hit or not hit else frozenset(hit)


def reached(report: dict | None, m: Mutant, root: Path = ROOT) -> bool:
    """Whether the run of `report` executes a statement of `m` (`statements`); assumed so
    without a report, or when the file changed since the report."""
    return reaching_jobs(report, m, root) != frozenset()


def judge(m: Mutant, reports: dict, run: Callable, levels=LEVELS, root: Path = ROOT, survived=None) -> Verdict:
    """`m`'s verdict: each level in turn that its report says reaches `m` is `run` (level, jobs
    -> outcome, seconds, why; jobs: the sorted names of the jobs that reach `m`, or None for
    all) until one kills it; a level not in `levels` ends it at PENDING. `survived`: the
    seconds of the levels it already survived (a pending mutant judged on)."""
    seconds = dict(survived or {})
    chosen = {}
    for level in LEVELS:
        jobs = reaching_jobs(reports.get(level), m, root)
        if level in seconds or jobs == frozenset():
            continue
        if level not in levels:
            return Verdict(PENDING, "", seconds, f"the {level} run was not asked for", chosen)
        chosen[level] = ALL if jobs is None else sorted(jobs)
        outcome, took, why = run(level, None if jobs is None else sorted(jobs))
        seconds[level] = took
        if outcome != SURVIVED:
            return Verdict(outcome, level, seconds, why, chosen)
    if not seconds:
        return Verdict(UNREACHED, "", seconds, "no verify run executes its lines (coverage reports)", chosen)
    return Verdict(SURVIVED, "default" if "default" in seconds else "quick", seconds, "", chosen)


def coverage_reports(folder: Path = REPORTS) -> dict:
    out = {}
    for level in LEVELS:
        path = folder / f"coverage-{level}.json"
        out[level] = json.loads(path.read_text()) if path.is_file() else None
    return out


def copy_checkout(root: Path, into: Path) -> Path:
    """The checkout's files (tracked and untracked, not ignored) and its compiled move, in `into`."""
    names = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, names):
        if (root / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, into / name)
    for built in root.glob("runtime/ledger/*.so"):
        shutil.copy2(built, into / built.relative_to(root))
    return into


def annotation_only(source: str, mutated: str) -> bool:
    """Whether `mutated` differs from `source` only inside annotations (of arguments, returns
    and annotated assignments) of a module with `from __future__ import annotations`: kept as
    strings, never evaluated (the sampled files call no get_type_hints; a test keeps it so)."""
    try:
        before, after = ast.parse(source), ast.parse(mutated)
    except SyntaxError:
        return False
    future = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in before.body
    )
    return future and ast.dump(before) != ast.dump(after) and _bare(before) == _bare(after)


def _bare(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, (ast.arg, ast.AnnAssign)):
            node.annotation = None
    return ast.dump(tree)


def mutated_source(source: str, m: Mutant) -> str | None:
    """`source` with mutant `m` applied by cosmic-ray (None: the operator found no such occurrence)."""
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    return mutate_code(source, cosmic_ray.plugins.get_operator(m.operator)(), m.occurrence)


def verify_run(copy: Path, level: str, timeout: float, jobs=None) -> tuple[str, float, str]:
    """One verify run of the copy at `level`, of only `jobs` (None: all): (outcome, wall
    seconds, its first FAIL line)."""
    command = [sys.executable, str(copy / "verification/judges/intree.py"), str(copy)] + VERIFY[level]
    command += [arg for job in jobs or () for arg in ("--job", job)]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # verify and its worker processes
        proc.communicate()
        return TIMED_OUT, time.perf_counter() - start, f"no verdict within {timeout:.0f} s"
    took = time.perf_counter() - start
    text = out.decode(errors="replace")
    if proc.returncode == 0:
        return SURVIVED, took, ""
    lines = text.splitlines()
    failed = [ln.strip() for ln in lines if "] FAIL " in ln] or [
        ln.strip() for ln in lines if "Error" in ln and "] ok " not in ln
    ]
    tail = [ln for ln in lines if ln.strip()]
    why = failed[0] if failed else tail[-1] if tail else f"exit status {proc.returncode}"
    return KILLED, took, why[:240]
