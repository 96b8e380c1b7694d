"""The coverage allowlist: the lines of model/, runtime/ and kernels/ that verify may leave
unreached, each with its reason (GPU only, an unreachable defensive branch, ...). One entry a
line of verification/reports/coverage-allowlist.txt: `path:line | the line's text | reason`
(`#` starts a comment). An entry is honest when its line exists and holds that text (stripped),
and the coverage report names it missed: a missed line, or the source of a missed branch.
`check` lists every dishonest entry (a test runs it on the committed report); `unexplained`
lists the missed lines that no entry names."""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError

from pathlib import Path
from typing import NamedTuple

from slotwarden.verification.judges.lines import numbers


class Entry(NamedTuple):
    path: str  # relative to the checkout, e.g. runtime/pool.py
    line: int
    text: str  # the line, stripped
    reason: str


class AllowlistError(SlotwardenError, ValueError):
    """A line of the allowlist file that is not `path:line | text | reason`."""


def parse(text: str) -> list[Entry]:
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        head, _, rest = raw.partition(" | ")
        text, bar, reason = rest.rpartition(" | ")  # the line's text may hold " | " itself
        parts = [p.strip() for p in (head, text, reason)]
        where, _, line = parts[0].rpartition(":")
        if not bar or not where or not line.isdigit() or not parts[2]:
            raise AllowlistError(f"allowlist line {n}: want 'path:line | text | reason', not {raw!r}")
        out.append(Entry(where, int(line), parts[1], parts[2]))
    return out


def missed(report: dict, path: str) -> set[int]:
    """The lines of `path` the report names missed: missed lines and sources of missed branches."""
    f = report["files"].get(path)
    if f is None:
        return set()
    return numbers(f["missing"]) | {int(b.split("->")[0]) for b in f["missing_branches"]}


def check(entries: list[Entry], report: dict, root: Path) -> list[str]:
    """Every dishonest entry, said in one line each (empty: all honest)."""
    problems = []
    seen: set[tuple[str, int]] = set()
    for e in entries:
        where = f"{e.path}:{e.line}"
        source = root / e.path
        lines = source.read_text().splitlines() if source.is_file() else None
        if (e.path, e.line) in seen:
            problems.append(f"{where}: listed twice")
        seen.add((e.path, e.line))
        if lines is None:
            problems.append(f"{where}: no such file")
        elif not 1 <= e.line <= len(lines):
            problems.append(f"{where}: the file has {len(lines)} lines")
        elif lines[e.line - 1].strip() != e.text:
            problems.append(f"{where}: holds {lines[e.line - 1].strip()!r}, not {e.text!r} (the line moved?)")
        elif e.line not in missed(report, e.path):
            problems.append(f"{where}: verify reaches it now (stale entry: drop it)")
    return problems


def unexplained(entries: list[Entry], report: dict) -> dict[str, set[int]]:
    """Per file, the missed lines and the sources of missed branches that no entry explains (an
    entry for a branch's source or for its target explains the branch)."""
    listed: dict[str, set[int]] = {}
    for e in entries:
        listed.setdefault(e.path, set()).add(e.line)
    out = {}
    for path, f in report["files"].items():
        mine = listed.get(path, set())
        left = numbers(f["missing"]) - mine
        for branch in f["missing_branches"]:  # explained by its source or by its (missed) target
            a, b = (int(n) for n in branch.split("->"))
            if a not in mine and b not in mine:
                left.add(a)
        if left:
            out[path] = left
    return out


def _read(raw: str, root: Path) -> tuple[Entry | None, list[str]]:
    """A line of the allowlist file as an entry (None: a comment or a blank line), and the lines
    of the file it names (none when there is no such file)."""
    if not raw.strip() or raw.lstrip().startswith("#"):
        return None, []
    entry = parse(raw)[0]
    source = root / entry.path
    return entry, source.read_text().splitlines() if source.is_file() else []


def _holds(entry: Entry, lines: list[str]) -> bool:
    """Whether the entry's line exists in `lines` and holds the entry's text."""
    return 1 <= entry.line <= len(lines) and lines[entry.line - 1].strip() == entry.text


def reanchor(text: str, report: dict, root: Path) -> tuple[str, list[str]]:
    """The allowlist `text` with each entry whose line no longer holds its text moved to the
    nearest line of its file that holds that text and that the report names missed (comments,
    reasons and the other entries kept as they are); and what moved, one line each. An entry
    with no such line stays, for `check` to name."""
    out, moved = [], []
    taken = {(e.path, e.line) for e in parse(text)}
    for raw in text.splitlines():
        entry, lines = _read(raw, root)
        if entry and not _holds(entry, lines):
            open_lines = missed(report, entry.path) - {n for p, n in taken if p == entry.path}
            same = [n for n in open_lines if _holds(entry._replace(line=n), lines)]
            if same:
                to = min(same, key=lambda n: (abs(n - entry.line), n))
                taken = (taken - {(entry.path, entry.line)}) | {(entry.path, to)}
                raw = raw.replace(f"{entry.path}:{entry.line} ", f"{entry.path}:{to} ", 1)
                moved.append(f"{entry.path}:{entry.line} -> {to}: {entry.text}")
        out.append(raw)
    return "\n".join(out) + "\n", moved


def drop_stale(text: str, report: dict, root: Path) -> tuple[str, list[str]]:
    """The allowlist `text` without the entries whose line holds their text but that the report
    names reached (verify reaches them now: nothing left to explain); and what went, one line
    each. Every other line (comments, honest or otherwise dishonest entries) is kept."""
    out, dropped = [], []
    for raw in text.splitlines():
        entry, lines = _read(raw, root)
        if entry and _holds(entry, lines) and entry.line not in missed(report, entry.path):
            dropped.append(f"{entry.path}:{entry.line}: {entry.text}")
            continue
        out.append(raw)
    return "\n".join(out) + "\n", dropped


def main(argv=None) -> int:
    """`python -m slotwarden.verification.judges.allowlist [--drop-stale]`: re-anchor the
    committed allowlist on coverage-default.json (after `make coverage`); with `--drop-stale`,
    drop the entries of lines verify now reaches; then print every entry still dishonest."""
    import argparse
    import json

    from slotwarden.verification.judges.paths import REPORTS, ROOT

    parser = argparse.ArgumentParser(prog="python -m slotwarden.verification.judges.allowlist")
    parser.add_argument("--drop-stale", action="store_true", help="drop the entries of lines verify now reaches")
    args = parser.parse_args(argv)
    path = REPORTS / "coverage-allowlist.txt"
    report = json.loads((REPORTS / "coverage-default.json").read_text())
    text, moved = reanchor(path.read_text(), report, ROOT)
    dropped: list = []
    if args.drop_stale:
        text, dropped = drop_stale(text, report, ROOT)
    path.write_text(text)
    for line in moved:
        print(f"moved {line}")
    for line in dropped:
        print(f"dropped {line} (verify reaches it now)")
    problems = check(parse(text), report, ROOT)
    for line in problems:
        print(f"still dishonest: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
