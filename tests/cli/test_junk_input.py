"""Junk input to the command line: never a traceback, one line, exit 2, and a bad value shown
in at most SHOWN characters and its length (each case printed a traceback or the whole value
before)."""

from __future__ import annotations

import pytest

from slotwarden.cli.commands import LONGEST, main
from slotwarden.model.errors import SHOWN

HEADER = '{"slotwarden_trace": 1, "capacity": 4}\n'
ALLOC = '{"step": 0, "event": "alloc", "ids": [1], "actor": "request", "actor_id": %s}\n'
LINE = '{"step": 0, "event": %s, "ids": [1], "actor": %s, "actor_id": 1}\n'
BIG = "x" * 5_000_000


def _one_line_exit_2(capsys, argv, *needles):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2, (code, out[-500:], err[-2000:])
    assert err.count("\n") == 1 and "Traceback" not in err, err[-2000:]
    assert len(err) <= LONGEST + 100, len(err)
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize(
    "data, why",
    [
        (HEADER + "[" * 100_000 + "]" * 100_000 + "\n", "t.jsonl:2: not a trace line: JSON nested deeper"),
        (HEADER + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n", "t.jsonl:2: not a trace line: JSON nested deeper"),
        (HEADER + ALLOC % ("9" * 5000), "t.jsonl:2: not a trace line: Exceeds the limit (4300 digits)"),
        (HEADER + LINE % ("[]", '"request"'), "t.jsonl:2: unknown event []"),
        (HEADER + LINE % ('"alloc"', "{}"), "t.jsonl:2: unknown actor kind {}"),
    ],
    ids=["nested list", "nested object", "5000-digit int", "event a list", "actor an object"],
)
def test_a_parser_limit_or_an_odd_json_value_is_not_a_trace(tmp_path, capsys, data, why):
    """RecursionError, ValueError (int-string limit) and TypeError (an unhashable event or
    actor) were tracebacks, exit 1."""
    (tmp_path / "t.jsonl").write_text(data)
    _one_line_exit_2(capsys, ["check-trace", tmp_path / "t.jsonl"], why)


def test_a_huge_event_name_is_shown_cut(tmp_path, capsys):
    """The old message was the whole 5 MB name."""
    (tmp_path / "t.jsonl").write_text(HEADER + LINE % (f'"{BIG}"', '"request"'))
    err = _one_line_exit_2(capsys, ["check-trace", tmp_path / "t.jsonl"], "unknown event 'xxx", "(5000000 characters)")
    assert len(err) < 2 * SHOWN + 200


@pytest.mark.parametrize("field", ["actor", "ids", "target", "step"])
def test_every_trace_field_error_shows_a_long_value_cut(tmp_path, capsys, field):
    values = {"step": 0, "event": '"alloc"', "ids": "[1]", "actor": '"request"', "actor_id": 1, "target": "null"}
    values[field] = f'"{BIG[:100_000]}"'
    line = "{" + ", ".join(f'"{k}": {v}' for k, v in values.items()) + "}\n"
    (tmp_path / "t.jsonl").write_text(HEADER + line)
    _one_line_exit_2(capsys, ["check-trace", tmp_path / "t.jsonl"], "(100000 characters)")


def test_a_plot_in_a_format_matplotlib_does_not_write_is_refused_first(tmp_path, capsys):
    """matplotlib's ValueError for the extension was a traceback, after the report."""
    pytest.importorskip("matplotlib")
    (tmp_path / "t.jsonl").write_text(HEADER + ALLOC % 1)
    err = _one_line_exit_2(capsys, ["check-trace", tmp_path / "t.jsonl", "--plot", tmp_path / "x.txt"], "'txt'")
    assert "png" in err and not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["demo", "--device", "cpu", "--slots", "99999999999"], "GiB"),
        (["demo", "--device", "cpu", "--sessions", "99999999999999999999"], "at most 1000000"),
        (["demo", "--device", "cpu", "--requests", "10000001"], "at most 1000000"),
        (["demo", "--slots", "9" * 5000], "(5000 characters)"),
        (["check-trace", "t", "--capacity", "9" * 5000], "(5000 characters)"),
        (["diagram", "--highlight", "x" * 100_000], "(100000 characters)"),
        (["diagram", "--format", "x" * 100_000], "characters)"),
        (["x" * 100_000], "characters)"),
        (["demo", "--device", "x" * 100_000], "(100000 characters)"),
        (["demo", "--plot", "/tmp/" + "x" * 100_000 + "/p.png"], "File name too long"),
        (["check-trace", "t", "--plot", "/tmp/x." + "x" * 100_000], "File name too long"),
        (["bench", "trace", "--json", "/tmp/" + "x" * 100_000], "File name too long"),
        (["docs", "--dir", "/tmp/" + "x" * 100_000], "File name too long"),
        (["verify", "--quick", "--report", "/tmp/" + "x" * 100_000], "File name too long"),
        (["verify", "--only", "x" * 100_000], "characters)"),
        (["check-trace", "x" * 100_000], "(100000 characters)"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None,
)
def test_junk_arguments_are_one_short_line(tmp_path, capsys, monkeypatch, argv, needle):
    """Each was a traceback (torch's allocation RuntimeError, OverflowError, ENAMETOOLONG from a
    path's check; exit 1) or echoed the whole argument; none starts any work."""
    import slotwarden.cli.demo

    monkeypatch.setattr(slotwarden.cli.demo, "simulate", lambda *a, **k: pytest.fail("work started"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t").write_text(HEADER + ALLOC % 1)
    _one_line_exit_2(capsys, argv, needle)


def test_an_internal_error_still_shows_its_traceback(tmp_path, monkeypatch):
    """Only user errors become exit 2: a bug in the replay is not dressed up as one."""
    from slotwarden.cli.trace import replay as trace_replay

    def broken(*_):
        raise KeyError("a bug")

    monkeypatch.setattr(trace_replay.Replay, "feed", broken)
    (tmp_path / "t.jsonl").write_text(HEADER + ALLOC % 1)
    with pytest.raises(KeyError):
        main(["check-trace", str(tmp_path / "t.jsonl")])
