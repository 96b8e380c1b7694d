"""`check-trace` streams: its memory does not grow with the trace, its windows are what the
report and the plot need, the parser's fast path reads what `json.loads` reads, and the trace
bench measures a clean trace."""

from __future__ import annotations

import tracemalloc

import pytest

from slotwarden.bench import trace as bench_trace
from slotwarden.cli.trace import check as check_trace
from slotwarden.cli.commands import main
from slotwarden.cli.trace.replay import AFTER, BEFORE, FINDINGS, Replay
from slotwarden.model.vocabulary import FREE_SLOT, Actor, Event
from slotwarden.runtime.trace import TraceFormatError, TraceLine, parse, parse_json


def _peak_of_cli(path) -> int:
    """The peak of Python's allocations while `slotwarden check-trace path` runs."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        assert main(["check-trace", str(path)]) == 0
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_the_checkers_memory_does_not_grow_with_the_trace(tmp_path, capsys):
    """Old code: every line and every move kept (about 730 bytes an event): the peak grew six
    times from 5,000 to 30,000 events. Now it is the pool's and the windows' size."""
    small = bench_trace.write(tmp_path / "small.jsonl", 5_000, capacity=16)
    large = bench_trace.write(tmp_path / "large.jsonl", 30_000, capacity=16)
    _peak_of_cli(small)  # imports and caches warmed
    a, b = _peak_of_cli(small), _peak_of_cli(large)
    capsys.readouterr()
    assert b < 1.3 * a + 64 * 1024, (a, b)


def test_findings_are_counted_and_the_first_ones_kept():
    """A trace of nothing but illegal moves keeps FINDINGS of them (with their histories)."""
    r1 = Actor.request(1)
    lines = [(n, TraceLine(0, Event.FINISH, (1,), r1)) for n in range(1, 3 * FINDINGS)]
    report = check_trace.check(lines, capacity=1)
    assert len(report.findings) == FINDINGS and report.illegal == 3 * FINDINGS - 1
    text = check_trace.render(report, "t")
    assert f"... and {3 * FINDINGS - 5} more illegal moves" in text and f"{3 * FINDINGS - 1} illegal moves" in text


def _states_line_by_line(lines, capacity):
    """Oracle: each slot's record after every line, by replaying prefix after prefix's last line."""
    replay, states = Replay(capacity), {}
    for lineno, line in lines:
        replay.feed(lineno, line)
        states[lineno] = dict(replay.slots)
    return states


@pytest.mark.parametrize("bad_at", [None, 300, 5], ids=["clean", "finding deep in", "finding near the start"])
def test_the_plots_window_is_the_unbounded_timeline_around_the_finding(bad_at):
    """The window's segments equal those read from every line's state (the old report kept
    every move); a replay that forgot each slot's last move before the window draws the lane's
    first bar wrong."""
    from slotwarden.cli.trace.plot import segments, window

    held = Actor.request(10**6)  # holds slot 1 (TAKEN) through the trace, moving only at its end
    body = [ln._replace(ids=(ln.ids[0] + 1,)) for ln in bench_trace.synthetic(600, capacity=2)]
    end = [TraceLine(10**6, Event.ADMIT, (1,), held), TraceLine(10**6, Event.FINISH, (1,), held)]
    body = [TraceLine(0, Event.ALLOC, (1,), held), *body[:595], end[0], *body[595:], end[1]]
    body.append(TraceLine(10**6, Event.FENCE, (1,), Actor.fence(10**6)))
    lines = list(enumerate(body, 2))
    if bad_at is not None:  # a finish by a request that holds nothing: refused
        lines.insert(bad_at, (0, TraceLine(10**6, Event.FINISH, (2,), Actor.request(123456))))
        lines = [(n, ln) for n, (_, ln) in enumerate(lines, 2)]
    report = check_trace.check(lines, capacity=3)
    lo, hi, lanes = window(report)
    last = len(lines) + 1
    at = bad_at + 2 if bad_at is not None else None
    want_lo, want_hi = (at - BEFORE, at + AFTER) if at else (last - BEFORE - AFTER, last)
    assert (lo, hi) == (max(want_lo, 1), min(want_hi, last)) and len(lanes) >= 2
    states = _states_line_by_line(lines, 3)
    moved_on = {n: {i for i in ln.ids} for n, ln in lines if n not in {f.lineno for f in report.findings}}
    for slot in lanes:
        want, start = [], lo
        record = states.get(lo - 1, {}).get(slot, FREE_SLOT)
        for n in range(lo, hi + 1):
            if slot in moved_on.get(n, ()):
                want.append((start, n, record))
                record, start = states[n][slot], n
        want.append((start, hi + 1, record))
        assert segments(report, slot, lo, hi) == [w for w in want if w[1] > w[0]], slot


LINES = [
    '{"step": 0, "event": "alloc", "ids": [1, 2], "actor": "request", "actor_id": -2, "target": null}',
    '{"step": 7, "event": "lend", "ids": [3], "actor": "session", "actor_id": 5, "target": 0}',
    '{"step": 0, "event": "free", "ids": [], "actor": "request", "actor_id": -0, "target": -1}\n',
    '{"step": 0, "event": "fence", "ids": [999999999999999999], "actor": "scheduler", "actor_id": 1, "target": null}',
    '{"step": 0, "event": "fence", "ids": [1], "actor": "scheduler", "actor_id": 1234567890123456789, "target": 5}',
]
BAD = [
    '{"step": 01, "event": "alloc", "ids": [1], "actor": "request", "actor_id": 1, "target": null}',
    '{"step": 0, "event": "alloc", "ids": [01], "actor": "request", "actor_id": 1, "target": null}',
    '{"step": 0, "event": "alloc", "ids": [1,, 2], "actor": "request", "actor_id": 1, "target": null}',
    '{"step": 0, "event": "alloc", "ids": [1], "actor": "request", "actor_id": 1, "target": null}}',
    '{"step": 0, "event": "alloc", "ids": [1], "actor": "request", "actor_id": 1, "target": nul}',
    '{"step": 0, "event": "alloc", "ids": [\u0661], "actor": "request", "actor_id": 1, "target": null}',
]


@pytest.mark.parametrize("text", LINES)
def test_the_fast_path_reads_what_the_json_parser_reads(text):
    assert parse(text, 3) == parse_json(text, 3)


@pytest.mark.parametrize("text", BAD)
def test_the_fast_path_refuses_what_the_json_parser_refuses(text):
    """Each is one character off the canonical form and not JSON: a fast path that accepted
    leading zeros, Unicode digits or trailing junk would read it."""
    with pytest.raises(TraceFormatError, match="line 3: not JSON"):
        parse(text, 3)


def test_the_trace_bench_writes_a_clean_trace_and_reports_each_size(capsys):
    class Args:
        quick, json, device = True, None, None

    assert bench_trace.run(Args(), sizes=(200, 400), capacity=4) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("check-trace on a clean synthetic trace (pool of 4 slots)")
    assert [row.split()[0] for row in out[2:4]] == ["200", "400"]
    assert all(line.to_json() == bench_trace.to_json(line) for line in bench_trace.synthetic(64, 4))


_PLAIN_INT = r"-?(?:0|[1-9][0-9]{0,17})"
_PLAIN = (  # the fast path's pattern before its quantifiers were made possessive
    rf'\{{"step": (0|[1-9][0-9]{{0,17}}), "event": "([a-z]+)", "ids": \[((?:{_PLAIN_INT}(?:, {_PLAIN_INT})*)?)\], '
    rf'"actor": "([a-z]+)", "actor_id": ({_PLAIN_INT}), "target": (null|{_PLAIN_INT})\}}[ \t\r\n]*'
)


def test_the_fast_paths_pattern_reads_the_lines_its_plain_form_reads():
    """Random one- and two-character edits of canonical lines: the possessive pattern matches
    exactly where the plain one does, with the same groups (seen failing with `[0-9]{0,16}+`
    for the step's digits)."""
    import random
    import re

    from slotwarden.runtime.trace import _CANONICAL

    plain, rng = re.compile(_PLAIN), random.Random(22)
    seeds = [*LINES, *BAD, *(bench_trace.to_json(ln) for ln in bench_trace.synthetic(40, 4))]
    seeds.append(
        '{"step": 123456789012345678, "event": "admit", "ids": [1, 22, 333], "actor": "request", '
        '"actor_id": 99, "target": -7}'
    )
    alphabet, agree = '0123456789-, []{}":\n\t elnu', 0
    for _ in range(6000):
        text = list(rng.choice(seeds))
        for _ in range(rng.randint(1, 2)):
            at = rng.randrange(len(text))
            edit = rng.randrange(3)
            if edit == 0:
                del text[at]
            elif edit == 1:
                text.insert(at, rng.choice(alphabet))
            else:
                text[at] = rng.choice(alphabet)
        text = "".join(text)
        a, b = plain.fullmatch(text), _CANONICAL.fullmatch(text)
        assert (a and a.groups()) == (b and b.groups()), text
        agree += a is not None
    assert agree > 150  # enough edits kept the line canonical for the groups to be compared
