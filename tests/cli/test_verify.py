"""`slotwarden verify` end to end on a shard of its quick campaign: exit code, summary, report."""

import json

from slotwarden.cli.commands import main


def test_a_quick_shard_passes_and_writes_the_report(tmp_path, capsys):
    assert main(["verify", "--quick", "--shard", "1/4", "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "verify: PASS" in out and "== summary" in out and "shard 1/4" in out
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["ok"] and data["level"] == "quick" and data["results"]
    stages = {r["stage"] for r in data["results"]}
    assert "declaration" in stages and "mutants" in stages
    assert "```mermaid" in (tmp_path / "report.md").read_text()


def test_shard_must_be_in_range(capsys):
    assert main(["verify", "--quick", "--shard", "5/4"]) == 2
    assert "want I/N" in capsys.readouterr().err
