"""The `slotwarden` command line. Each subcommand imports what it needs when it runs.

User errors (a bad argument, an output path that cannot be written, a device that is not
there, a run that would check nothing) print one line on stderr and exit 2, before any work
starts; an OSError met during the work prints one line and exits 1. Never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slotwarden.cli.args import Parser, count, device, nameable, output_file, plot_file, positive_int, positive_seconds
from slotwarden.model.errors import SHOWN, cut, shown
from slotwarden.verification.usage import UsageError, output_folder

DOCS = Path("docs")
LONGEST = 5 * SHOWN
"""The longest error line printed: a message that echoes a long value is cut there."""


def _diagram(args) -> int:
    if args.output:
        output_file(args.output, "-o")
    if args.highlight is not None and len(args.highlight) > SHOWN:  # no event or state has so long a name
        raise UsageError(f"slotwarden diagram: --highlight {shown(args.highlight)}: not an event or a state")
    from slotwarden.model.diagram import RenderUnavailable, UnknownName, parse_highlight, render

    try:
        highlight = parse_highlight(args.highlight) if args.highlight is not None else None
        data = render(args.format, highlight=highlight)
    except (RenderUnavailable, UnknownName) as exc:
        print(f"slotwarden diagram: {exc}", file=sys.stderr)
        return 2
    if args.output:
        Path(args.output).write_bytes(data)
        print(f"wrote {args.output} ({args.format}, {len(data)} bytes)")
    elif args.format in ("svg", "png") and sys.stdout.isatty():
        print("slotwarden diagram: refusing to print binary output to a terminal; use -o FILE", file=sys.stderr)
        return 2
    else:
        sys.stdout.buffer.write(data)
    return 0


def _docs(args) -> int:
    nameable(args.dir, "--dir")
    output_folder(args.dir, "--dir")
    from slotwarden.cli.docs import write_docs

    for path in write_docs(Path(args.dir)):
        print(f"wrote {path}")
    return 0


def _verify(args) -> int:
    if args.report:
        nameable(args.report, "--report")
    if args.coverage:
        from slotwarden.verification.judges.reach import run_covered

        return run_covered(args)
    from slotwarden.verification.verify.run import run_verify

    return run_verify(args)


def _mutation(args) -> int:
    from slotwarden.verification.judges.campaign import run_campaign

    return run_campaign(args)


def _bench(args) -> int:
    device(args.device)
    if args.json:
        output_file(args.json, "--json")
    if args.target == "pool":
        from slotwarden.bench.pool import run
    elif args.target == "trace":
        from slotwarden.bench.trace import run
    elif args.target == "checker":
        from slotwarden.bench.checker import run
    else:
        from slotwarden.bench.scheduler import run
    return run(args)


def _demo(args) -> int:
    where = device(args.device)
    if args.sessions + args.requests == 0:
        raise UsageError("slotwarden demo: --sessions 0 --requests 0 is a workload of nothing: nothing to run")
    from slotwarden.cli.demo import MAX_WORKLOAD, available_bytes, state_bytes

    for flag, n in (("--sessions", args.sessions), ("--requests", args.requests)):
        if n > MAX_WORKLOAD:
            raise UsageError(f"slotwarden demo: {flag} {cut(str(n))}: at most {MAX_WORKLOAD} (planned up front)")
    need, free = state_bytes(args.slots), available_bytes(where)
    if free is not None and need > free:
        raise UsageError(
            f"slotwarden demo: --slots {cut(str(args.slots))}: the pool takes {need / 2**30:.3g} GiB, "
            f"more than the {free / 2**30:.3g} GiB available on {where}"
        )
    from slotwarden.runtime.scheduler.intake import MAX_SAMPLES

    if args.n > MAX_SAMPLES:
        raise UsageError(f"slotwarden demo: --n {args.n}: at most {MAX_SAMPLES} samples per prompt")
    if args.plot:
        from slotwarden.cli.demo import PLOT_HINT, have_matplotlib

        if not have_matplotlib():
            raise UsageError(f"slotwarden demo: --plot needs matplotlib: {PLOT_HINT}")
        output_file(args.plot, "--plot")
    from slotwarden.cli.demo import run

    return run(args)


def _check_trace(args) -> int:
    if args.plot:
        plot_file(args.plot, "--plot")
    from slotwarden.cli.trace.check import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="slotwarden",
        description="The lifecycle of recurrent-state slots in LLM serving: declared once, enforced, verified.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "diagram",
        help="draw the slot lifecycle",
        description="Draw the slot lifecycle from its declaration: each state labelled with its owner kind and "
        "filled with its group's colour, a legend, every edge labelled with its event and who may fire it. Mermaid "
        "and DOT need nothing more; SVG and PNG need pygraphviz (pip install 'slotwarden[render]').",
    )
    p.add_argument(
        "--format", choices=("mermaid", "dot", "svg", "png"), default="mermaid", help="output format (default: mermaid)"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument(
        "--highlight",
        metavar="EVENT|STATE",
        help="draw every edge of one event (e.g. rollback) or one state (e.g. LENT) in a contrasting colour; "
        "Mermaid output is then a flowchart",
    )
    p.set_defaults(func=_diagram)

    p = sub.add_parser(
        "docs",
        help="regenerate docs/lifecycle.md, docs/sglang.md, docs/lifecycle.svg and docs/seed-bug.svg",
        description="Regenerate the generated documentation from the declaration (a test fails when it drifts).",
    )
    p.add_argument("--dir", default=str(DOCS), help="the docs folder (default: docs)")
    p.set_defaults(func=_docs)

    p = sub.add_parser(
        "verify",
        help="run the full verification (the main job)",
        description="The full verification: the declaration's derived forms agree; CrossHair proves the model's "
        "safety properties; the exhaustive model checker covers the abstract scheduler within its bounds, firing "
        "every declared rule, reaching every `sometimes` goal and proving its liveness properties under weak fairness "
        "(every admitted request ends, every released slot becomes free, a waiting request is admitted when a slot is "
        "free; with --thorough, on its bounds of up to two million states); the abstract scheduler follows the "
        "runtime's on random workloads (differential); the Hypothesis machines run the pool, a guarded engine "
        "allocator and the scheduler (overlap off and on); the "
        "runtime's own transition path agrees with the model; every finished request's tokens and state equal a "
        "replay of its transcript, with the prefix cache off and on and with speculative requests, and speculative "
        "decoding gives plain decoding's tokens and states; every seeded runtime fault is caught; and "
        "every bug of the history, injected as a mutant, is caught for the expected reason. Exits 0 only if every "
        "proof is CONFIRMED, every "
        "check holds and every fault and mutant is caught.",
    )
    level = p.add_mutually_exclusive_group()
    level.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: small budgets, small bounds, no CrossHair",
    )
    level.add_argument(
        "--thorough",
        action="store_true",
        help="ten times the default Hypothesis budgets, the larger exhaustive bounds, "
        "Hypothesis counterexamples shrunk, and 120 s of simulation (see --simulate)",
    )
    p.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: a fixed one, reproducible)")
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N of the jobs (split a campaign over machines); a shard with no job is refused",
    )
    p.add_argument(
        "--report", metavar="DIR", help="write report.md and report.json (results, diagram, counterexamples) to DIR"
    )
    p.add_argument(
        "--proof-timeout",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="CrossHair per-condition timeout in seconds (default: 300)",
    )
    p.add_argument("--only", action="append", metavar="PROOF", help="run only this CrossHair proof (repeatable)")
    p.add_argument(
        "--simulate",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="seconds of seeded random walks (the model checker's simulation, checking its safety properties) "
        "over 8 slots, 16 requests, 4 sessions and the prefix cache (default: 120 with --thorough, else none)",
    )
    p.add_argument(
        "--fail-fast", action="store_true", help="stop at the first failing job (its row, then FAIL; the rest unrun)"
    )
    p.add_argument(
        "--job",
        action="append",
        metavar="STAGE/NAME",
        help="run only this job of the level, e.g. 'hypothesis/pool' (repeatable; an unknown name is refused with "
        "the close matches); 'exhaustive/coverage' brings the exhaustive searches whose results it reads",
    )
    p.add_argument(
        "--coverage",
        action="store_true",
        help="run under coverage.py (workers included; pip install 'slotwarden[coverage]') and write the line and "
        "branch coverage of model/, runtime/ and kernels/ to coverage-<level>.json/.md in --report DIR (default: "
        "verification/reports/)",
    )
    p.set_defaults(func=_verify)

    p = sub.add_parser(
        "mutation",
        help="judge verify by mutants of runtime/ and model/ (cosmic-ray; opt-in, long: pip install "
        "'slotwarden[mutation]')",
        description="Sample one cosmic-ray mutant at each of --sample places in runtime/ and model/, apply each to a "
        "copy of the checkout and run `verify --quick --fail-fast` on it, then the default run on the survivors, "
        "each with only the jobs whose coverage context in the level's committed coverage report executes the "
        "mutated statements (every job when they run outside any job, at import; a level that never executes "
        "them is not run: the mutant survives it). Writes each verdict to mutation-I-of-N.json as it goes (a "
        "rerun resumes) and mutation.md (counts, score, survivors and their triage from mutation-triage.txt) in --out.",
    )
    p.add_argument(
        "--shard", metavar="I/N", default="1/1", help="judge only every N-th mutant of the sample, from the I-th"
    )
    p.add_argument("--sample", type=positive_int, default=300, help="mutants in the sample (default: 300)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default: 0)")
    p.add_argument("--limit", type=positive_int, default=None, help="judge at most this many of the shard (a pilot)")
    p.add_argument(
        "--stage",
        choices=("quick", "default"),
        default="default",
        help="quick: only the --quick runs (survivors left pending); default: then the default run (default)",
    )
    p.add_argument("--timeout-quick", type=positive_seconds, default=600.0, metavar="S", help="(default: 600)")
    p.add_argument("--timeout-default", type=positive_seconds, default=1800.0, metavar="S", help="(default: 1800)")
    p.add_argument("--out", metavar="DIR", help="results and report folder (default: verification/reports)")
    p.add_argument(
        "--again",
        action="store_true",
        help="judge every survivor anew (reached or not, pending or not), as after a new check; the killed and "
        "the equivalent keep their verdicts",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="only rewrite mutation.md from the results files (pending mutants judged again from the coverage "
        "reports as they are now; no verify run)",
    )
    p.set_defaults(func=_mutation)

    p = sub.add_parser(
        "bench",
        help="side-by-side timings (pool: against SGLang's allocator; scheduler: host overhead per step; "
        "trace: check-trace's speed and memory; checker: the exhaustive checker's states per CPU-second)",
        description="Time the checked pool against real peers (pool) or the scheduler's host overhead per step "
        "(scheduler, then a shared-prefix workload with the prefix cache off and on, then plain against speculative "
        "decoding for each drafter), in one run on one device, and "
        "report ratios; or (trace) write clean synthetic traces of 10^5 and 10^6 events (--quick: 10^4 and 10^5) "
        "and report check-trace's events/s and its peak memory (tracemalloc) for each, side by side; or (checker) "
        "run the exhaustive checker and the reference it was made from on each default bounds (--quick: the tests' "
        "bounds) and report states and transitions per CPU-second and the ratio. Prints a table; --json writes the "
        "numbers.",
    )
    p.add_argument("target", choices=("pool", "scheduler", "trace", "checker"), help="what to measure")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run, noisier numbers (pool, scheduler, trace: fewer repetitions; checker: the tests' small "
        "bounds, two rounds)",
    )
    p.set_defaults(func=_bench)

    p = sub.add_parser(
        "demo",
        help="a synthetic serving workload of sessions and requests, ending with the audit",
        description="Run a synthetic workload of streaming sessions and plain requests through the scheduler "
        "(TinyMamba layer, checked pool) on the default device, with a progress bar; print throughput, peak slot "
        "use and the final audit.",
    )
    p.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--sessions", type=count, default=24, help="streaming sessions, >= 0 (default: 24)")
    p.add_argument("--requests", type=count, default=96, help="plain requests, >= 0 (default: 96)")
    p.add_argument("--slots", type=positive_int, default=16, help="pool size in slots, >= 1 (default: 16)")
    p.add_argument("--overlap", action="store_true", help="overlap scheduling (fences delay slot reuse)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default: 0)")
    p.add_argument("--plot", metavar="FILE.png", help="draw slot occupancy by state over time (needs matplotlib)")
    p.add_argument(
        "--prefix-cache",
        action="store_true",
        help="share recurrent state by prefix; half the plain requests continue an earlier one (report the hit "
        "rate and input tokens saved)",
    )
    p.add_argument(
        "--n",
        type=positive_int,
        default=1,
        metavar="N",
        help="parallel samples per fresh plain prompt, at temperature 1 (default: 1); with --prefix-cache each "
        "prompt is prefilled once for the samples to copy (report the prefill tokens saved net: a small pool, "
        "evictions and retractions can waste that prefill)",
    )
    p.set_defaults(func=_demo)

    p = sub.add_parser(
        "check-trace",
        help="replay a slot-event trace (JSON lines) against the lifecycle",
        description="Replay a slot-event trace (one JSON object a line; see docs/traces.md) against the model: "
        "report the first illegal move with its slot's history (a launch line's rows are judged as a step's write "
        "set), the slots not FREE at the end (leaks), and a "
        "summary. Exits 0 when clean, 1 on any illegal move or leak, 2 when the file is not a trace.",
    )
    p.add_argument("file", metavar="FILE", help="the trace (.jsonl)")
    p.add_argument(
        "--capacity",
        type=positive_int,
        default=None,
        help="pool size of a header-less file (default: the largest id); refused if it disagrees with a header",
    )
    p.add_argument(
        "--plot", metavar="FILE.png", help="draw a swimlane per slot around the first finding (needs matplotlib)"
    )
    p.set_defaults(func=_check_trace)
    return parser


def main(argv: list[str] | None = None) -> int:
    command = "slotwarden"
    try:
        args = build_parser().parse_args(argv)
        command = f"slotwarden {args.command}"
        return args.func(args)
    except UsageError as exc:
        text = str(exc) if str(exc).startswith("slotwarden") else f"{command}: {exc}"
        print(cut(text, LONGEST), file=sys.stderr)
        return 2
    except OSError as exc:  # met during the work (a disk full, a file removed meanwhile)
        print(cut(f"{command}: {exc}", LONGEST), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
