"""`slotwarden demo`: a tiny synthetic workload runs to a clean audit; --plot draws a PNG."""

import sys

import pytest

from slotwarden.cli.commands import main
from slotwarden.cli.demo import simulate
from slotwarden.bench.workload import WorkloadSpec, make_plan

TINY = ["--sessions", "6", "--requests", "16", "--slots", "6", "--device", "cpu"]


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401

        return True
    except ImportError:
        return False


@pytest.mark.parametrize("overlap", [False, True])
def test_tiny_demo_exits_0_with_a_clean_audit(capsys, overlap):
    assert main(["demo", *TINY] + (["--overlap"] if overlap else [])) == 0
    out = capsys.readouterr().out
    assert "audit: clean — 6 slots, all FREE" in out
    for word in (
        "steps",
        "tokens generated",
        "tokens/s",
        "peak slots in use",
        "rollbacks",
        "retractions",
        "aborts",
        "by the reaper",
    ):
        assert word in out


def test_the_workload_exercises_every_path():
    r = simulate(WorkloadSpec(sessions=6, requests=16, seed=0), slots=6, device="cpu", progress=False)
    assert r["clean"] and r["steps"] > 0 and r["tokens_generated"] > 0
    assert set(r["aborts"]) == {"queued", "running", "session turn"}
    assert r["sessions_closed_by_reaper"] >= 1 and r["sessions_closed_by_client"] >= 1 and r["deferred_closes"] == 1
    assert r["sessions_closed_by_reaper"] + r["sessions_closed_by_client"] == 6
    assert r["retractions"] > 0
    assert r["peak_in_use"] == 6
    assert len(r["samples"]) == r["steps"]  # one sample a step, idle steps too
    assert all(sum(c.values()) == 6 for c in r["samples"])


def test_the_workload_is_seeded():
    spec = WorkloadSpec(sessions=3, requests=5, seed=7)
    assert make_plan(spec) == make_plan(spec)
    assert make_plan(spec) != make_plan(WorkloadSpec(sessions=3, requests=5, seed=8))
    a = simulate(spec, slots=4, device="cpu", progress=False)
    b = simulate(spec, slots=4, device="cpu", progress=False)
    assert (a["steps"], a["tokens_generated"], a["samples"]) == (b["steps"], b["tokens_generated"], b["samples"])


@pytest.mark.skipif(not _has_matplotlib(), reason="needs matplotlib (pip install 'slotwarden[plot]')")
def test_plot_writes_a_png(tmp_path, capsys):
    out = tmp_path / "occupancy.png"
    assert main(["demo", *TINY, "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in capsys.readouterr().out


def test_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "never.png"
    assert main(["demo", *TINY, "--plot", str(out)]) == 2
    assert "slotwarden[plot]" in capsys.readouterr().err
    assert not out.exists()


def test_a_leak_fails_the_demo(monkeypatch, capsys):
    """A planted bug (closing a session never releases its slot, as in SGLang #23496) must not
    exit 0: the audit catches the slot the closed session still owns."""
    import torch

    from slotwarden.runtime.pool import StatePool

    monkeypatch.setattr(StatePool, "close", lambda self, session: torch.zeros(0, dtype=torch.int64))
    assert main(["demo", "--sessions", "2", "--requests", "2", "--slots", "4", "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "audit: FAILED" in out and "audit: clean" not in out


@pytest.mark.parametrize("seed", range(4))
def test_a_tight_pool_finishes_without_a_deadlock(seed):
    """3 slots, 6 sessions: every slot is often parked in a session whose next turn waits behind
    a request that needs a fresh slot. Admission lets those turns pass the starved request (they
    bring their own slot), so the run ends clean; strict FIFO admission stalled here."""
    r = simulate(
        WorkloadSpec(sessions=6, requests=14, seed=seed), slots=3, device="cpu", progress=False, max_steps=2000
    )
    assert r["clean"], r["audit"]
    assert r["sessions_closed_by_reaper"] + r["sessions_closed_by_client"] == 6


def test_a_stall_is_reported_not_spun(monkeypatch):
    """The stall guard, on the deadlock planted back (strict FIFO admission: no session turn may
    pass a request starved of a slot): the run stops as a failure naming who holds the slots,
    long before max_steps."""
    import slotwarden.runtime.scheduler.admission as admission

    monkeypatch.setattr(admission, "has_own_slot", lambda sched, req: False)
    r = simulate(
        WorkloadSpec(sessions=6, requests=14, seed=0),
        slots=3,
        device="cpu",
        progress=False,
        max_steps=2000,
        stall_steps=40,
    )
    assert not r["clean"]
    assert r["audit"].startswith("audit: FAILED — the run stopped: Stalled: no batch for 40 steps"), r["audit"]
    assert "slots {'SESSION_OWNED': 3}" in r["audit"] and "3 sessions hold a slot" in r["audit"], r["audit"]
    assert r["steps"] < 2000


def test_the_prefix_cache_demo_reports_its_savings_and_ends_clean(capsys, tmp_path):
    """Follow-ups share prefixes: the cache hits and saves input tokens; without follow-ups (no
    prefix shared) it cannot, which the same numbers show."""
    spec = WorkloadSpec(sessions=2, requests=16, seed=0, follow_share=0.5)
    r = simulate(spec, slots=8, device="cpu", progress=False, prefix_cache=True)
    c = r["prefix_cache"]
    assert r["clean"] and c["hits"] > 0 and c["tokens_saved"] > 0 and c["inserts"] > 0
    assert c["saved_by_step"][-1] == c["tokens_saved"] and len(c["saved_by_step"]) == r["steps"]
    alone = simulate(
        spec.__class__(sessions=2, requests=16, seed=0), slots=8, device="cpu", progress=False, prefix_cache=True
    )
    assert alone["clean"] and alone["prefix_cache"]["hits"] == 0
    assert simulate(spec, slots=8, device="cpu", progress=False)["prefix_cache"] is None  # off: nothing to report
    args = [*TINY, "--prefix-cache"] + (["--plot", str(tmp_path / "c.png")] if _has_matplotlib() else [])
    assert main(["demo", *args]) == 0
    out = capsys.readouterr().out
    assert "prefix cache          hit rate" in out and "input tokens saved" in out
    assert "audit: clean — 6 slots, all FREE" in out


def test_parallel_samples_share_their_prompt_with_the_cache_and_not_without(capsys):
    """`--n 3`: every fresh plain prompt is sent as three samples. With the cache, each prompt
    is prefilled once (its prompt request) and the siblings' copies save more than that costs;
    without it, every sample prefills its prompt."""
    spec = WorkloadSpec(sessions=1, requests=6, seed=0, samples=3)
    on = simulate(spec, slots=8, device="cpu", progress=False, prefix_cache=True)
    off = simulate(spec, slots=8, device="cpu", progress=False)
    c = on["prefix_cache"]
    assert on["clean"] and off["clean"] and c["prompt_tokens"] > 0 and c["tokens_saved"] > c["prompt_tokens"]
    assert on["prefill_tokens"] < off["prefill_tokens"]
    small = ["--sessions", "1", "--requests", "6", "--slots", "6", "--device", "cpu"]
    assert main(["demo", *small, "--prefix-cache", "--n", "3"]) == 0
    out = capsys.readouterr().out
    assert "parallel sampling     3 samples per fresh plain prompt; each group's prompt request prefills" in out
    assert "nothing saved" not in out
    assert main(["demo", *TINY, "--n", "257"]) == 2
    assert "at most 256 samples" in capsys.readouterr().err


def test_parallel_samples_in_a_pool_too_small_to_share_say_nothing_was_saved(capsys):
    """Old code printed a negative saving under 'each prompt prefilled once', unqualified."""
    tiny = ["--sessions", "0", "--requests", "2", "--slots", "1", "--device", "cpu"]
    assert main(["demo", *tiny, "--prefix-cache", "--n", "4"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("parallel sampling"))
    assert "tokens saved net; nothing saved: evictions, retractions or too few slots" in line, line
