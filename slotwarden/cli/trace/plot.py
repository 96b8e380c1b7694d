"""`check-trace --plot`: a swimlane per slot, its state over the trace's lines, around the first finding.

Each lane is one slot; each bar is the time the slot spent in one state, filled with the colour
of the state's group (`slotwarden.model.palette`, as in the lifecycle diagrams) and labelled
with the state and who holds it (`s5>r3`: session 5's slot, lent to request 3). The first
illegal move is marked on its slot's lane, in the refused colour, with the error's first words.
With no finding the plot shows the end of the trace. It draws from the report's window of moves
(`slotwarden.cli.trace.replay`): those lines and each slot's last move before them.
"""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.palette import LINE, REFUSED, colour, ink
from slotwarden.model.vocabulary import FREE_SLOT, NOBODY, Group

from slotwarden.cli.trace.replay import AFTER, BEFORE
from slotwarden.cli.trace.report import Report

MAX_LANES = 12


class PlotUnavailable(SlotwardenError, RuntimeError):
    """matplotlib is not installed."""


def window(report: Report) -> tuple[int, int, list[int]]:
    """The first and last line shown and the slots (lanes) drawn, the finding's slot first."""
    lines = [m.lineno for m in report.moves] + [f.lineno for f in report.findings]
    last = report.last or max(lines, default=1)
    if report.findings:
        at = report.findings[0].lineno
        lo, hi = at - BEFORE, at + AFTER
    else:
        lo, hi = last - BEFORE - AFTER, last
    lo, hi = max(lo, 1), min(hi, last)
    moved = sorted({m.slot for m in report.moves if lo <= m.lineno <= hi})
    first = report.findings[0].slot if report.findings else None
    lanes = ([first] if first is not None else []) + [s for s in moved if s != first]
    return lo, hi, lanes[:MAX_LANES]


def segments(report: Report, slot: int, lo: int, hi: int):
    """(start, end, record) for each state the slot was in between lines lo and hi."""
    record, start, out = FREE_SLOT, lo, []
    for m in report.moves:
        if m.slot != slot:
            continue
        if m.lineno < lo:
            record = m.after
            continue
        if m.lineno > hi:
            break
        out.append((start, m.lineno, record))
        record, start = m.after, m.lineno
    out.append((start, hi + 1, record))
    return [(a, b, r) for a, b, r in out if b > a]


def short(rec) -> str:
    """Who holds the slot, in a few letters: `r1`, `s5`, `s5>r3` (lent to request 3)."""
    kind = LIFECYCLE.spec(rec.state).owner
    if kind is None or rec.owner == NOBODY:
        return ""
    lent = f">r{rec.borrower}" if rec.borrower != NOBODY else ""
    return f"{kind.name[0].lower()}{rec.owner}{lent}"


def plot(report: Report, path) -> None:
    """Draw the report's window to `path` (its suffix is the format; `plot_formats` lists them)."""
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'slotwarden[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    lo, hi, lanes = window(report)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * (hi - lo + 2)), 0.7 * len(lanes) + 1.8))
    for y, slot in enumerate(lanes):
        for a, b, rec in segments(report, slot, lo, hi):
            fill = colour(LIFECYCLE.spec(rec.state).group)
            ax.barh(y, b - a, left=a - 0.5, height=0.6, color=fill, edgecolor=LINE, linewidth=0.6)
            label = rec.state.name + (f"\n{short(rec)}" if short(rec) else "")
            ax.text(a - 0.4, y, label, va="center", ha="left", fontsize=6.5, color=ink(fill), clip_on=True)
    if report.findings and report.findings[0].slot in lanes:
        f = report.findings[0]
        y = lanes.index(f.slot)
        ax.plot([f.lineno], [y], marker="X", markersize=14, color=REFUSED, markeredgecolor="white", zorder=5)
        ax.annotate(
            f.error.split(":")[0],
            (f.lineno, y),
            xytext=(f.lineno, -0.85),
            textcoords="data",
            ha="center",
            fontsize=8,
            color=REFUSED,
            arrowprops=dict(arrowstyle="-", color=REFUSED),
        )
    ax.set_yticks(range(len(lanes)), [f"slot {s}" for s in lanes])
    ax.set_ylim(len(lanes) - 0.5, -1.2)
    ax.set_xlim(lo - 0.6, hi + 0.6)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("trace line")
    title = "first illegal move" if report.findings else "end of trace"
    ax.set_title(f"slot states around the {title} (lines {lo}-{hi})", fontsize=10)
    ax.legend(
        handles=[Patch(facecolor=colour(g), edgecolor=LINE, label=g.name) for g in Group],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        ncol=len(Group),
        fontsize=7,
        frameon=False,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
