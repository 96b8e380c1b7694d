"""Slot-event traces: the format, the recorder, `slotwarden check-trace` and the examples."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from slotwarden import trace_examples
from slotwarden.cli.trace import check as check_trace
from slotwarden.cli.commands import main
from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.ledger.recorder import FlightRecorder
from slotwarden.runtime.trace import FREE, TraceFormatError, TraceLine, TraceWriter, parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["check-trace", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


# -- the examples ------------------------------------------------------------------------------
def test_the_examples_are_in_sync_with_their_generator():
    for name, text in trace_examples.render().items():
        assert (EXAMPLES / name).read_text() == text, f"examples/{name} is stale: python -m slotwarden.trace_examples"


def test_the_seed_bug_example_fails_naming_slot_move_and_session(capsys):
    rc, out, _ = run_cli(capsys, EXAMPLES / "seed-bug.jsonl")
    assert rc == 1
    first = out.splitlines()[0]
    assert first.startswith(
        "first illegal move, line 10: illegal free by request 3 on slot 1 (state LENT, owner 5, lent to request 3)"
    )
    assert "belongs to session 5" in first
    assert "line 9 (step 2): lend by session 5 -> 3: PARKED (session 5) -> LENT (session 5, lent to request 3)" in out
    assert "leaks at the end (1 slot not FREE):\n  slot 1: LENT (session 5, lent to request 3)" in out
    assert out.rstrip().endswith("3 illegal moves, 1 leaks")


def test_the_clean_example_passes(capsys):
    rc, out, _ = run_cli(capsys, EXAMPLES / "clean.jsonl")
    assert rc == 0 and out.rstrip().endswith("clean") and "illegal" not in out


@pytest.mark.parametrize(
    "drop, expect",
    [
        ('"event": "rollback", "ids": [1]', "line 9: illegal lend by session 5 on slot 1 (state LENT"),
        ('"event": "fence", "ids": [1]', "slot 1: RELEASED"),
        ('"event": "park"', "illegal lend by session 5 on slot 1 (state RUNNING, owner 1)"),
    ],
    ids=["no rollback", "no last fence", "no park"],
)
def test_the_clean_example_broken_by_one_line_fails(tmp_path, capsys, drop, expect):
    """Broken variants of the clean trace: each missing move is a finding or a leak."""
    kept = [ln for ln in lines_of(EXAMPLES / "clean.jsonl") if drop not in ln]
    assert len(kept) == len(lines_of(EXAMPLES / "clean.jsonl")) - 1
    (tmp_path / "t.jsonl").write_text("\n".join(kept) + "\n")
    rc, out, _ = run_cli(capsys, tmp_path / "t.jsonl")
    assert rc == 1 and expect in out


# -- malformed traces ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad, why",
    [
        ("{not json", "not JSON"),
        ('{"step": 0, "event": "vanish", "ids": [1], "actor": "request", "actor_id": 1}', "unknown event 'vanish'"),
        ('{"step": 0, "event": "alloc", "ids": [1], "actor": "robot", "actor_id": 1}', "unknown actor kind 'robot'"),
        ('{"step": 0, "event": "alloc", "ids": [1]}', "missing actor, actor_id"),
        (
            '{"step": 0, "event": "alloc", "ids": "1", "actor": "request", "actor_id": 1}',
            "ids must be a list of integers",
        ),
        (
            '{"step": -1, "event": "alloc", "ids": [1], "actor": "request", "actor_id": 1}',
            "step must be an integer >= 0",
        ),
        ("[1, 2]", "a trace line is a JSON object"),
        ('{"slotwarden_trace": 1, "capacity": 4}', "the header may only be the first line"),
    ],
)
def test_a_malformed_line_is_one_error_naming_its_number(tmp_path, capsys, bad, why):
    good = lines_of(EXAMPLES / "clean.jsonl")
    (tmp_path / "t.jsonl").write_text("\n".join(good[:3] + [bad] + good[3:]) + "\n")
    rc, out, err = run_cli(capsys, tmp_path / "t.jsonl")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and f"t.jsonl:4: {why}" in err


def test_a_missing_file_is_an_error(tmp_path, capsys):
    rc, _, err = run_cli(capsys, tmp_path / "none.jsonl")
    assert rc == 2 and "cannot read" in err


def test_lines_round_trip():
    for line in (
        TraceLine(3, Event.LEND, (1, 2), Actor.session(5), 7),
        TraceLine(0, FREE, (4,), Actor.request(1)),
        TraceLine(9, Event.FENCE, (2,), Actor.fence(9), NOBODY),
    ):
        assert parse(line.to_json(), 1) == line
    with pytest.raises(TraceFormatError, match="line 7: target must be an integer or null"):
        parse('{"step": 0, "event": "park", "ids": [1], "actor": "request", "actor_id": 1, "target": "s"}', 7)


# -- the recorder -------------------------------------------------------------------------------
CFG = PoolConfig(num_slots=3, layers=1, conv_dims=(4,), conv_kernel=2, heads=1, head_dim=2, state_size=2)


def test_without_a_trace_the_pool_keeps_its_plain_recorder():
    assert type(StatePool(CFG).ledger.recorder) is FlightRecorder


def test_a_pool_trace_replays_on_the_model_and_a_refused_call_is_not_written():
    buf = io.StringIO()
    pool = StatePool(CFG, trace=TraceWriter(buf, CFG.num_slots))
    r1 = Actor.request(1)
    ids = pool.alloc(2, r1)
    with pytest.raises(Exception):
        pool.finish(ids, r1)  # TAKEN cannot finish: refused, not traced
    pool.rollback(ids, r1)
    lines = [(n, parse(t, n)) for n, t in enumerate(buf.getvalue().splitlines(), 1)]
    assert len(lines) == 3
    report = check_trace.check([(n, ln) for n, ln in lines[1:]], capacity=lines[0][1].capacity)
    assert report.clean and report.events == {"alloc": 1, "rollback": 1}


def test_a_free_replays_as_the_move_the_declaration_gives():
    r1 = Actor.request(1)
    lines = [
        (1, TraceLine(0, Event.ALLOC, (1, 2), r1)),
        (2, TraceLine(0, Event.ADMIT, (2,), r1)),
        (3, TraceLine(1, FREE, (1, 2), r1)),  # 1 is a candidate (rollback), 2 runs (finish)
        (4, TraceLine(1, Event.FENCE, (2,), Actor.fence(1))),
        (5, TraceLine(1, FREE, (1,), r1)),  # a double free
    ]
    report = check_trace.check(lines, capacity=2)
    assert [f.lineno for f in report.findings] == [5] and "a double free" in report.findings[0].error
    assert [m.after.state.name for m in report.moves if m.lineno == 3] == ["FREE", "RELEASED"]
    assert not report.leaks


# -- the plot -----------------------------------------------------------------------------------
def test_plot_draws_the_finding_slot_first(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "seed.png"
    rc, text, _ = run_cli(capsys, EXAMPLES / "seed-bug.jsonl", "--plot", out)
    assert rc == 1 and f"wrote {out}" in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from slotwarden.cli.trace.plot import segments, window

    report = check_trace.check(check_trace.read(EXAMPLES / "seed-bug.jsonl")[1], 2)
    lo, hi, lanes = window(report)
    assert lanes[0] == 1 and lo <= 10 <= hi
    assert [r.state.name for _, _, r in segments(report, 1, lo, hi)] == ["FREE", "TAKEN", "RUNNING", "PARKED", "LENT"]


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc, _, err = run_cli(capsys, EXAMPLES / "clean.jsonl", "--plot", tmp_path / "x.png")
    assert rc == 2 and "pip install 'slotwarden[plot]'" in err


@pytest.mark.parametrize("overlap", [False, True], ids=["sync", "overlap"])
def test_a_scheduler_workloads_trace_replays_clean_on_the_model(monkeypatch, overlap):
    """The runtime and the model agree on a real workload (sessions lent, parked and closed,
    retractions, aborts, fences), and check-trace raises no false alarm on it; the same trace
    without its first fence (a broken variant) is not clean."""
    from slotwarden.cli import demo
    from slotwarden.runtime.trace import attach
    from slotwarden.bench.workload import WorkloadSpec

    buf, built = io.StringIO(), []
    make = demo.build_scheduler

    def traced(*args, **kw):
        sched = make(*args, **kw)
        attach(sched.pool.ledger, TraceWriter(buf, sched.pool.capacity))
        built.append(sched)
        return sched

    monkeypatch.setattr(demo, "build_scheduler", traced)
    demo.simulate(WorkloadSpec(sessions=3, requests=8, seed=1), slots=4, device="cpu", overlap=overlap, progress=False)
    numbered = [(n, parse(t, n)) for n, t in enumerate(buf.getvalue().splitlines(), 1)]
    report = check_trace.check([x for x in numbered if isinstance(x[1], TraceLine)], capacity=4)
    assert built and report.lines > 50 and report.clean, check_trace.render(report, "workload")
    assert {"alloc", "lend", "park", "close", "retract", "abort", "fence"} <= set(report.events)
    lines = [x for x in numbered if isinstance(x[1], TraceLine)]
    first_fence = next(i for i, (_, ln) in enumerate(lines) if ln.event is Event.FENCE)
    assert not check_trace.check(lines[:first_fence] + lines[first_fence + 1 :], capacity=4).clean


@pytest.mark.parametrize("overlap", [False, True], ids=["sync", "overlap"])
def test_a_speculative_workloads_trace_replays_clean_and_an_early_commit_is_a_finding(overlap):
    """Windows drafted, verified and committed, beside a session and an abort, replay clean;
    the same trace with a commit moved before its verify's fence (vLLM #50021 offline) is not."""
    from slotwarden.runtime.scheduler.drafter import ModelDrafter
    from slotwarden.runtime.trace import attach
    from scheduling import MODEL, make_scheduler

    buf = io.StringIO()
    sched = make_scheduler(8, overlap=overlap)
    attach(sched.pool.ledger, TraceWriter(buf, sched.pool.capacity))
    sched.drafter = ModelDrafter(MODEL)
    sid = sched.open_session()
    sched.submit([1, 2, 3, 4], 6, spec_k=2)
    sched.submit([5, 6], 5, session=sid, spec_k=1)
    sched.run()
    sched.submit([7], 4, session=sid, spec_k=2)
    rid = sched.submit([9, 9, 9], 9, spec_k=3)
    sched.step(), sched.step()
    sched.abort(rid)
    sched.close_session(sid)
    sched.run()
    lines = [x for x in enumerate(buf.getvalue().splitlines(), 1) if isinstance(x[1], str)]
    lines = [(n, parse(t, n)) for n, t in lines]
    lines = [x for x in lines if isinstance(x[1], TraceLine)]
    report = check_trace.check(lines, capacity=8)
    assert report.clean and {"draft", "verify", "commit", "abort"} <= set(report.events), check_trace.render(
        report, "speculative"
    )
    commit = next(i for i, (_, ln) in enumerate(lines) if ln.event is Event.COMMIT)
    verify = max(i for i, (_, ln) in enumerate(lines[:commit]) if ln.event is Event.VERIFY)
    early = lines[: verify + 1] + [lines[commit]] + [x for i, x in enumerate(lines) if i > verify and i != commit]
    bad = check_trace.check(early, capacity=8)
    assert not bad.clean and "VERIFYING" in bad.findings[0].error


def test_a_pool_traced_to_a_path_has_every_line_on_disk_without_a_close(tmp_path):
    path = tmp_path / "pool.jsonl"
    pool = StatePool(CFG, trace=path)
    pool.alloc(1, Actor.request(1))
    assert path.read_text().splitlines()[-1].startswith('{"step": 0, "event": "alloc", "ids": [1]')


def test_an_early_fence_is_a_finding():
    """The overlap bug offline: a slot released during step 2 freed by the fence of step 1."""
    r1 = Actor.request(1)
    lines = [
        (1, TraceLine(2, Event.ALLOC, (1,), r1)),
        (2, TraceLine(2, Event.ADMIT, (1,), r1)),
        (3, TraceLine(2, Event.FINISH, (1,), r1)),
        (4, TraceLine(2, Event.FENCE, (1,), Actor.fence(1))),
        (5, TraceLine(3, Event.FENCE, (1,), Actor.fence(2))),
    ]
    report = check_trace.check(lines, capacity=1)
    assert [f.lineno for f in report.findings] == [4] and "waits for the fence of step 2" in report.findings[0].error
    assert not report.leaks


# -- files that are not traces, actors the runtime refuses, the documented example ---------------
ALLOC = '{"step": 0, "event": "alloc", "ids": [%s], "actor": "request", "actor_id": %s}'


@pytest.mark.parametrize(
    "data, where, why",
    [
        (ALLOC % (10**23, 1) + "\n", 1, "slot id 100000000000000000000000 is above 16777216"),
        ('{"slotwarden_trace": 1, "capacity": 100000000000}\n' + ALLOC % (1, 1) + "\n", 1, "capacity 100000000000"),
        (b'{"slotwarden_trace": 1, "capacity": 4}\n\xff\xfe{}\n', 2, "not UTF-8 (byte 0xff at column 1)"),
        ("", 1, "no events"),
        ('{"slotwarden_trace": 1, "capacity": 4}\n\n', 2, "no events"),
    ],
    ids=["huge id, no header", "huge capacity", "not UTF-8", "empty", "header only"],
)
def test_a_file_that_is_not_a_trace_is_one_line_exit_2(tmp_path, capsys, data, where, why):
    """Each of these was a traceback (OverflowError, MemoryError, UnicodeDecodeError) or, for an
    empty file, a clean exit 0."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    rc, out, err = run_cli(capsys, path)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and f"t.jsonl:{where}: {why}" in err


def test_a_huge_id_with_a_header_is_a_finding(tmp_path, capsys):
    (tmp_path / "t.jsonl").write_text('{"slotwarden_trace": 1, "capacity": 4}\n' + ALLOC % (10**23, 1) + "\n")
    rc, out, _ = run_cli(capsys, tmp_path / "t.jsonl")
    assert rc == 1 and "not a slot of a pool of 4" in out


@pytest.mark.parametrize("who, why", [(NOBODY, "NOBODY"), (2**63, "int64"), (-(2**63) - 1, "int64")])
def test_an_actor_the_runtime_refuses_is_an_illegal_move(who, why):
    """NOBODY (-1) and ids outside int64 are refused by `runtime.inputs.actor`; the old checker
    replayed them as legal allocs."""
    report = check_trace.check([(1, TraceLine(0, Event.ALLOC, (1,), Actor.request(who)))], capacity=1)
    assert [f.lineno for f in report.findings] == [1] and why in report.findings[0].error
    assert not report.moves


def test_negative_actors_other_than_nobody_are_actors():
    """`GuardedAllocator` names unattributed calls request -2: the check must not refuse them."""
    r = Actor.request(-2)
    report = check_trace.check([(1, TraceLine(0, Event.ALLOC, (1,), r)), (2, TraceLine(0, Event.ROLLBACK, (1,), r))], 1)
    assert report.clean


def test_an_empty_batch_is_a_finding_that_names_no_slot():
    report = check_trace.check([(3, TraceLine(0, FREE, (), Actor.request(1)))], capacity=1)
    (f,) = report.findings
    assert f.lineno == 3 and f.slot is None and "-1" not in f.error and "free by" in f.error and "empty" in f.error


@pytest.mark.parametrize("cap, rc", [(4, 0), (5, 2)])
def test_capacity_that_disagrees_with_the_header_is_refused(tmp_path, capsys, cap, rc):
    text = '{"slotwarden_trace": 1, "capacity": 4}\n' + ALLOC % (1, 1) + "\n"
    text += '{"step": 0, "event": "rollback", "ids": [1], "actor": "request", "actor_id": 1}\n'
    (tmp_path / "t.jsonl").write_text(text)
    got, out, err = run_cli(capsys, tmp_path / "t.jsonl", "--capacity", cap)
    assert got == rc
    if rc == 2:
        assert out == "" and err.count("\n") == 1 and "t.jsonl:1: the header gives capacity 4, --capacity 5" in err


def test_the_format_example_in_the_docs_replays_clean(tmp_path, capsys):
    doc = (ROOT / "docs" / "traces.md").read_text()
    example = doc.split("## The format", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    assert example.count("\n") >= 5
    (tmp_path / "t.jsonl").write_text(example)
    rc, out, _ = run_cli(capsys, tmp_path / "t.jsonl")
    assert rc == 0 and out.rstrip().endswith("clean"), out


def test_the_summary_counts_event_lines_and_the_docs_list_every_event():
    """Old code: 'seed-bug.jsonl: 11 lines' while its findings cite line 12 (the header is a
    line too), and docs/traces.md's event row lacked insert, lock, unlock, evict."""

    root = Path(__file__).resolve().parents[2]
    capacity, lines = check_trace.read(root / "examples" / "seed-bug.jsonl")
    text = check_trace.render(check_trace.check(lines, capacity), "seed-bug.jsonl")
    assert f"seed-bug.jsonl: {len(lines)} event lines," in text
    row = next(x for x in (root / "docs" / "traces.md").read_text().splitlines() if x.startswith("| `event` |"))
    assert all(f"`{e.name.lower()}`" in row for e in Event), row
