"""The verdict of `slotwarden verify` and its report: the summary table printed at the end
(per stage, the declaration mutants' kill matrix, the mutant matrix), and `report.md` and
`report.json` in the `--report` folder (the lifecycle diagram, the registered properties,
every row, every counterexample)."""

from __future__ import annotations

import json
from pathlib import Path

from slotwarden.model import registry
from slotwarden.verification.mutants import declaration as declaration_mutants
from slotwarden.verification.verify.jobs import Row


def verdict(ok: bool, level_name: str) -> str:
    """PASS or FAIL; a quick pass says that it proved nothing."""
    if not ok:
        return "FAIL"
    return "PASS (quick: proofs skipped)" if level_name == "quick" else "PASS"


def summary(rows: list[Row], total: float, level_name: str, level: dict) -> str:
    lines = ["", "== summary", "| stage | checks | passed | seconds | CPU seconds |", "|---|---:|---:|---:|---:|"]
    for stage in (
        "declaration",
        "mutations",
        "proofs",
        "exhaustive",
        "simulation",
        "differential",
        "hypothesis",
        "continuity",
        "interrupts",
        "faults",
        "mutants",
        "bad input",
        "edges",
        "adapters",
    ):
        mine = [r for r in rows if r.stage == stage]
        if mine:
            lines.append(
                f"| {stage} | {len(mine)} | {sum(r.ok for r in mine)} | {sum(r.seconds for r in mine):.1f} "
                f"| {sum(r.cpu for r in mine):.1f} |"
            )
        elif stage == "proofs" and not level["proofs"]:
            lines.append("| proofs | skipped (--quick) | - | - | - |")
    states = sum(r.detail.get("states", 0) for r in rows if r.stage == "exhaustive")
    lines.append(f"exhaustive: {states} reachable states over {sum('bounds' in r.detail for r in rows)} bounds")
    for r in rows:
        if r.stage == "mutations" and "kills" in r.detail:
            lines += ["", "== declaration mutants: kill matrix (per rule: how each of its mutants was killed)"]
            lines += declaration_mutants.matrix_lines(r.detail)
    mutants = [r for r in rows if r.stage == "mutants" and "checker" in r.detail]  # (one that raised: no matrix)
    if mutants:
        lines += [
            "",
            "== mutant matrix",
            "| mutant | bug (tracker) | expected catch | checker: property, trace | Hypothesis: examples, seconds, "
            "caught at |",
            "|---|---|---|---|---|",
        ]
        for r in mutants:
            c, h = r.detail["checker"], r.detail["hypothesis"]
            want, right = r.detail["expected"], r.detail["right_reason"]
            where = {
                "call": "the call (" + h["error"].split(":")[0] + ")",
                "audit": "idle audit (AuditFailed)",
                "invariant": f"{r.detail.get('machine', 'scheduler')} invariant",
            }.get(h["caught_by"], "MISSED" if want["runtime"] else "n/a (no runtime variant)")
            got = c["property"] or "MISSED"
            where = where if right["hypothesis"] or h["passed"] else "WRONG REASON " + where
            checked = (
                f"{got if right['checker'] or not c['property'] else 'WRONG REASON ' + got}, {len(c['trace'])} steps"
                if c.get("applies", True)
                else "n/a (only legal moves; the state's numbers are wrong)"
            )
            lines.append(
                f"| {r.name} | {r.detail['bug']} | {'/'.join(want['checker']) or '-'}; {'/'.join(want['runtime'])} "
                f"| {checked} | {h['examples']}, {h['seconds']:.1f} s, {where} |"
            )
    lines.append(f"\n{level_name} run: {total:.1f} s in all, {sum(r.cpu for r in rows):.1f} CPU seconds in its jobs")
    return "\n".join(lines)


def write_report(folder: Path, rows: list[Row], total: float, level_name: str, ok: bool) -> None:
    from slotwarden.model.diagram import mermaid

    folder.mkdir(parents=True, exist_ok=True)
    data = {"ok": ok, "level": level_name, "seconds": total, "results": [r._asdict() for r in rows]}
    (folder / "report.json").write_text(json.dumps(data, indent=2, default=str))
    md = [f"# slotwarden verify: {verdict(ok, level_name)}", "", "```mermaid", mermaid().rstrip(), "```", ""]
    md += ["## Properties", "", "| property | kind | in words | proofs | checks |", "|---|---|---|---|---|"]
    md += [
        f"| {p.name} | {p.kind.value} | {registry.text(p.name)} | {', '.join(p.proofs) or '-'} | "
        f"{', '.join(p.checks)} |"
        for p in registry.PROPERTIES.values()
    ]
    md += ["", "## Results", "", "| stage | check | ok | seconds | result |", "|---|---|---|---:|---|"]
    mark = lambda r: "skip" if "skipped" in r.detail else "yes" if r.ok else "NO"  # noqa: E731
    md += [f"| {r.stage} | {r.name} | {mark(r)} | {r.seconds:.1f} | {r.summary} |" for r in rows]
    for r in rows:
        if r.stage == "mutations" and "kills" in r.detail:
            md += ["", "## Declaration mutants", "", *declaration_mutants.matrix_lines(r.detail), ""]
            md += ["| mutant | killed by | witness |", "|---|---|---|"]
            md += [
                f"| {k['mutant']} | {k['killed_by'] or 'equivalent'} | "
                f"{k['detail'] or r.detail['equivalent'].get(k['mutant'], '')} |"
                for k in r.detail["kills"]
            ]
    md += ["", "## Jobs that raised", ""] if any("traceback" in r.detail for r in rows) else []
    for r in rows:
        if "traceback" in r.detail:
            md += [f"### {r.stage}: {r.name}", "", "```", r.detail["traceback"].rstrip(), "```", ""]
    md += ["", "## Counterexamples", ""]
    for r in rows:
        trace = r.detail.get("trace") or (r.detail.get("hypothesis") or {}).get("trace")
        checker = (r.detail.get("checker") or {}).get("trace") or ((r.detail.get("violation") or {}).get("trace"))
        if trace or checker:
            md += [f"### {r.stage}: {r.name}", ""]
            if checker:
                md += ["Shortest trace (exhaustive checker):", "", "```", *checker, "```", ""]
            if trace:
                md += ["Shrunk steps (Hypothesis, runnable):", "", "```python", trace, "```", ""]
    (folder / "report.md").write_text("\n".join(md))
