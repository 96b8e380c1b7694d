"""Every user error on the command line: one line on stderr, a non-zero exit, no traceback,
and no work started (output paths, devices and shards are checked first)."""

import pytest

from slotwarden.cli import commands as cli
from slotwarden.cli.commands import main

CASES = {  # name: argv ({file}: an existing file, {tmp}: an existing folder, without "missing")
    "verify shard not a number": ["verify", "--quick", "--shard", "abc"],
    "verify shard 0/2": ["verify", "--quick", "--shard", "0/2"],
    "verify shard 3/2": ["verify", "--quick", "--shard", "3/2"],
    "verify shard 1/0": ["verify", "--quick", "--shard", "1/0"],
    "verify shard -1/2": ["verify", "--quick", "--shard", "-1/2"],
    "verify shard 1/2/3": ["verify", "--quick", "--shard", "1/2/3"],
    "verify shard with no job": ["verify", "--quick", "--shard", "100/100"],
    "verify seed": ["verify", "--quick", "--seed", "abc"],
    "verify proof timeout negative": ["verify", "--proof-timeout", "-1"],
    "verify proof timeout nan": ["verify", "--proof-timeout", "nan"],
    "verify unknown proof": ["verify", "--only", "no_such_proof"],
    "verify report under a file": ["verify", "--quick", "--report", "{file}/r"],
    "verify report in no folder": ["verify", "--quick", "--report", "{tmp}/missing/r"],
    "diagram unwritable": ["diagram", "-o", "{tmp}/missing/x.svg"],
    "diagram into a folder": ["diagram", "-o", "{tmp}"],
    "diagram format": ["diagram", "--format", "gif"],
    "docs dir is a file": ["docs", "--dir", "{file}"],
    "demo slots 0": ["demo", "--slots", "0"],
    "demo slots not a number": ["demo", "--slots", "many"],
    "demo sessions -1": ["demo", "--sessions", "-1"],
    "demo requests -5": ["demo", "--requests", "-5"],
    "demo nothing to run": ["demo", "--sessions", "0", "--requests", "0"],
    "demo seed": ["demo", "--seed", "1.5"],
    "demo plot unwritable": ["demo", "--plot", "{tmp}/missing/o.png"],
    "demo device": ["demo", "--device", "warp-drive"],
    "demo no cuda": ["demo", "--device", "cuda:7"],
    "bench target": ["bench", "gpu"],
    "bench json unwritable": ["bench", "scheduler", "--json", "{tmp}/missing/b.json"],
    "bench device": ["bench", "pool", "--device", "nope"],
    "check-trace capacity 0": ["check-trace", "{file}", "--capacity", "0"],
    "check-trace plot unwritable": ["check-trace", "{file}", "--plot", "{tmp}/missing/s.png"],
    "no command": [],
    "unknown command": ["serve"],
    "unknown option": ["verify", "--fast"],
}


@pytest.fixture
def no_work(monkeypatch):
    """Any handler reaching its work fails the test: errors must come first."""
    import slotwarden.cli.demo
    import slotwarden.cli.docs
    import slotwarden.verification.verify.jobs as vjobs
    import slotwarden.verification.verify.workers as vworkers

    def started(*_, **__):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(slotwarden.cli.demo, "simulate", started)
    monkeypatch.setattr(slotwarden.cli.docs, "write_docs", started)
    monkeypatch.setattr(vjobs, "_agreement", started)
    monkeypatch.setattr(vworkers, "checker_job", started)
    monkeypatch.setattr(vjobs, "_machine", started)
    import slotwarden.cli.trace.check

    monkeypatch.setattr(slotwarden.cli.trace.check, "run", started)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_user_error_is_one_line_and_a_non_zero_exit(name, tmp_path, capsys, no_work):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    argv = [arg.format(file=a_file, tmp=tmp_path) for arg in CASES[name]]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert err.strip() and "\n" not in err.strip(), err
    assert err.startswith("slotwarden") and "Traceback" not in err + out
    assert not out, out  # nothing ran: no progress printed


def test_a_verify_run_that_checks_nothing_fails(monkeypatch, capsys):
    """Past the shard check too: a run whose selected jobs produce no result never passes."""
    import slotwarden.verification.verify.run as vmain

    class NoWorkers:  # the proof workers return nothing
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def map(self, *a):
            return iter(())

    monkeypatch.setattr(vmain, "jobs", lambda *a: [("proofs", "p", ("p", 1.0))])
    monkeypatch.setattr(vmain, "ProcessPoolExecutor", NoWorkers)
    assert main(["verify", "--quick"]) == 1
    assert "verify: FAIL" in capsys.readouterr().out


def test_an_os_error_during_the_work_is_one_line(monkeypatch, capsys):
    def full(args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "_docs", full)
    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["docs"].set_defaults(func=full)
    assert main(["docs"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "slotwarden docs: [Errno 28] No space left on device"


def test_writable_outputs_are_left_as_they_were(tmp_path, capsys):
    target = tmp_path / "l.mmd"
    assert main(["diagram", "-o", str(target)]) == 0
    assert target.read_text().startswith("stateDiagram-v2")
    assert [p.name for p in tmp_path.iterdir()] == ["l.mmd"]  # no probe file left behind
