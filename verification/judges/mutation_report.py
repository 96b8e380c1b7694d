"""mutation.md: the campaign's counts over every shard's results file (mutation-I-of-N.json) of
one sample, its score and its survivors with their triage. The triage file
(mutation-triage.txt, beside them) has one line a survivor: `key | verdict | reason`, the
verdict one of `equivalent`, `killed by a new check`, `open`. Score: killed and timed out over
the mutants judged, less the equivalent ones; a survivor not yet triaged counts against it,
and so does one left pending (its default run not yet done) or not reached by any verify run. A
verdict whose file changed since its run (its digest differs) is stale: left out, and counted."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from slotwarden.verification.judges import mutation as mt
from slotwarden.verification.judges.reach import ROOT, digest

VERDICTS = ("equivalent", "killed by a new check", "open")


def triage(folder: Path) -> dict[str, tuple[str, str]]:
    path = folder / "mutation-triage.txt"
    out = {}
    for n, raw in enumerate(path.read_text().splitlines() if path.is_file() else (), 1):
        if raw.strip() and not raw.startswith("#"):
            parts = [p.strip() for p in raw.split(" | ")]
            if len(parts) != 3 or parts[1] not in VERDICTS:
                raise ValueError(f"{path.name} line {n}: want 'key | {' or '.join(VERDICTS)} | reason', not {raw!r}")
            out[parts[0]] = (parts[1], parts[2])
    return out


def current(record: dict, root: Path = ROOT) -> bool:
    """Whether `record`'s verdict is of its file as it is now (same digest)."""
    path = root / record["path"]
    return path.is_file() and record.get("sha1") == digest(path)


def results(folder: Path, root: Path = ROOT) -> tuple[list[dict], dict]:
    """Every current mutant record of the newest sample's shard files, and that sample's header
    (with `stale`: how many records were left out, their file changed since)."""
    files = [json.loads(p.read_text()) for p in sorted(folder.glob("mutation-*-of-*.json"))]
    if not files:
        return [], {}
    head = max(files, key=lambda f: len(f["mutants"]))
    same = [f for f in files if (f["sample"], f["seed"], f["tool"]) == (head["sample"], head["seed"], head["tool"])]
    every = [dict(r, key=k, shard=f["shard"]) for f in same for k, r in f["mutants"].items()]
    kept = [r for r in every if current(r, root)]
    shards, commits = sorted(f["shard"] for f in same), sorted({f["commit"] for f in same})
    return kept, dict(head, shards=shards, commits=commits, stale=len(every) - len(kept))


def counts(records: list[dict], triaged: dict) -> dict:
    judged = [r for r in records if r["outcome"] != "not applied"]
    by = {o: sum(r["outcome"] == o for r in judged) for o in (mt.KILLED, mt.TIMED_OUT, mt.SURVIVED, mt.UNREACHED)}
    by[mt.PENDING] = sum(r["outcome"] == mt.PENDING for r in judged)
    by[mt.ANNOTATION] = sum(r["outcome"] == mt.ANNOTATION for r in judged)
    equivalent = sum(
        r["outcome"] == mt.ANNOTATION or triaged.get(r["key"], ("",))[0] == "equivalent"
        for r in judged
        if not _killed(r)
    )
    denominator = len(judged) - equivalent
    score = 100.0 * (by[mt.KILLED] + by[mt.TIMED_OUT]) / denominator if denominator else 0.0
    return dict(by, judged=len(judged), equivalent=equivalent, score=score)


def _killed(r: dict) -> bool:
    return r["outcome"] in (mt.KILLED, mt.TIMED_OUT)


def timing(records: list[dict]) -> list[str]:
    out = []
    for level in mt.LEVELS:
        runs = [r["seconds"][level] for r in records if level in r["seconds"]]
        if runs:
            killed = [r["seconds"][level] for r in records if level in r["seconds"] and r["level"] == level]
            out.append(
                f"- {level} verify runs: {len(runs)}, median {statistics.median(runs):.0f} s wall, mean "
                f"{statistics.mean(runs):.0f} s"
                + (f"; those that killed: median {statistics.median(killed):.0f} s" if killed else "")
            )
            split = {True: _selected(records, level, True), False: _selected(records, level, False)}
            for selected, mine in split.items() if split[True] else ():  # only once some run was selected
                label = "only the jobs reaching the mutant" if selected else "every job"
                if mine:
                    out.append(
                        f"  - of them with {label}: {len(mine)}, median {statistics.median(mine):.0f} s wall, "
                        f"mean {statistics.mean(mine):.0f} s"
                    )
    return out


def _selected(records: list[dict], level: str, selected: bool) -> list[float]:
    """The wall seconds of the `level` runs that ran only the jobs reaching their mutant
    (`selected`), or every job (a record from before the selection counts as every job)."""
    return [
        r["seconds"][level]
        for r in records
        if level in r["seconds"] and (r.get("jobs", {}).get(level, mt.ALL) != mt.ALL) == selected
    ]


def write_markdown(folder: Path, root: Path = ROOT) -> Path:
    records, head = results(folder, root)
    triaged = triage(folder)
    c = counts(records, triaged)
    out = ["# Mutation campaign", ""]
    if head:
        out.append(
            f"{head['tool']}; sample {head['sample']} (seed {head['seed']}), shards {', '.join(head['shards'])}; "
            f"commit {', '.join(head['commits'])}"
        )
    out += ["", "`slotwarden mutation --shard I/N` (`make mutation SHARD=I/N`); " + _scope(), ""]
    out += ["| outcome | mutants |", "| --- | --- |"]
    out += [
        f"| {k} | {c[k]} |" for k in (mt.KILLED, mt.TIMED_OUT, mt.SURVIVED, mt.UNREACHED, mt.PENDING, mt.ANNOTATION)
    ]
    out += [f"| judged | {c['judged']} |", f"| equivalent (in all) | {c['equivalent']} |"]
    if head.get("stale"):
        out += [
            "",
            f"Left out: {head['stale']} stale verdicts (their file changed since their run; a rerun judges them).",
        ]
    out += [
        "",
        f"**Score: {c['score']:.1f}%** of the {c['judged'] - c['equivalent']} non-equivalent mutants killed "
        "(killed and timed out; every survivor, pending or unreached one counts against it).",
        "",
    ]
    out += ["Time per mutant:"] + timing(records) + [""]
    out += ["## Survivors", "", "| mutant | outcome | edit | triage |", "| --- | --- | --- | --- |"]
    for r in sorted((r for r in records if not _killed(r) and r["outcome"] != "not applied"), key=lambda r: r["key"]):
        verdict, reason = triaged.get(
            r["key"], ("equivalent", r["why"]) if r["outcome"] == mt.ANNOTATION else ("not triaged", "")
        )
        edit = r["diff"].replace("|", "\\|").replace("\n", " / ")[:160]
        out.append(f"| {r['key']} | {r['outcome']} | `{edit}` | {verdict}{': ' + reason if reason else ''} |")
    out += ["", "## Killed", "", "| mutant | by | why |", "| --- | --- | --- |"]
    for r in sorted((r for r in records if _killed(r)), key=lambda r: r["key"]):
        out.append(f"| {r['key']} | {r['level']} | {r['why'][:140].replace('|', '/')} |")
    path = folder / "mutation.md"
    path.write_text("\n".join(out) + "\n")
    return path


def _scope() -> str:
    left = "; ".join(f"{k} ({why})" for k, why in mt.LEFT_OUT.items())
    return f"mutants of {', '.join(f + '/' for f in mt.FOLDERS)} except {left}."
