"""Smoke tests of `slotwarden bench pool`: tiny sizes and repeats, structure only, no timing thresholds."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch

from slotwarden.bench import pool as bench_pool
from slotwarden.runtime.config import PoolConfig

HAS_SGLANG = bench_pool.load_sglang_allocator() is not None


def _tiny(ns=(1, 4), **kw):
    """Tiny sizes, two repeats of one round trip each: the whole bench in well under a second."""
    cfg = PoolConfig(num_slots=max(ns) + 1, layers=1, conv_dims=(8,), conv_kernel=4, heads=2, head_dim=4, state_size=4)
    return dict(ns=ns, repeats=2, loop_s=0.0, budget_s=0.0, bookkeeping_capacity=64, config=cfg, **kw)


def test_run_writes_a_parseable_report(tmp_path, capsys):
    out = tmp_path / "pool.json"
    args = argparse.Namespace(device="cpu", json=str(out), quick=True)
    assert bench_pool.run(args, **_tiny(ns=(1, 4, 64))) == 0
    printed = capsys.readouterr().out
    assert "| contender" in printed and "targets" in printed and "torch" in printed
    result = json.loads(out.read_text())
    names = {r["contender"] for r in result["rows"]}
    assert {"pylist", "strict", "off", "lifecycle"} <= names
    assert {(r["contender"], r["n"]) for r in result["rows"]} == {(c, n) for c in names for n in (1, 4, 64)}
    for r in result["rows"]:
        assert r["bookkeeping_us"] > 0 and r["zeroing_us"] > 0
        assert len(r["bookkeeping_runs_us"]) == 2
    meta = result["meta"]
    assert meta["device"] == "cpu" and meta["torch"] == torch.__version__
    assert meta["state"]["num_slots"] == 65 and meta["state"]["bytes_per_slot"] > 0
    assert 30 < result["ledger_bytes_per_slot"] < 32  # the columns (31 B), nothing else of a slot's length
    assert len(result["targets"]) == len(bench_pool.TARGETS) + 2  # the ratios, the zeroing ratio, the ledger's size
    assert all(t["met"] in (True, False, None) for t in result["targets"])


@pytest.mark.skipif(not HAS_SGLANG, reason="sglang not installed (pip install --no-deps sglang==0.5.23)")
def test_sglang_column_and_ratios():
    result = bench_pool.measure("cpu", **_tiny())
    assert result["meta"]["sglang_loaded"] and result["meta"]["sglang"]
    for r in result["rows"]:
        ref = bench_pool.row(result, "sglang", r["n"])
        assert r["bookkeeping_ratio_to_sglang"] == pytest.approx(r["bookkeeping_us"] / ref["bookkeeping_us"])
        assert r["zeroing_ratio_to_sglang"] == pytest.approx(r["zeroing_us"] / ref["zeroing_us"])
    assert {r["contender"] for r in result["rows"]} == set(bench_pool.CONTENDERS)


def test_without_sglang_ratios_are_na(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench_pool, "load_sglang_allocator", lambda: None)
    out = tmp_path / "nosg.json"
    assert bench_pool.run(argparse.Namespace(device="cpu", json=str(out), quick=True), **_tiny()) == 0
    printed = capsys.readouterr().out
    assert "pip install --no-deps sglang==0.5.23" in printed and "n/a" in printed
    result = json.loads(out.read_text())
    assert all(
        r["bookkeeping_ratio_to_sglang"] is None and r["zeroing_ratio_to_sglang"] is None for r in result["rows"]
    )
    assert "sglang" not in {r["contender"] for r in result["rows"]}


def test_round_trips_leave_every_pool_whole():
    """Each contender's round trip gives back everything it took, with and without zeroing."""
    sg = bench_pool.load_sglang_allocator()
    steps = bench_pool.bookkeeping_steps(16, torch.device("cpu"), sg)
    for step in steps.values():
        for _ in range(5):
            step(16)  # the whole pool, five times: fails if anything leaked
    pool = bench_pool.StatePool(PoolConfig(num_slots=4, layers=1, conv_dims=(8,), heads=2, head_dim=4, state_size=4))
    for t in pool.tensors:
        t.fill_(1)
    for step in bench_pool.zeroing_steps(pool, sg).values():
        for t in pool.tensors:
            t.fill_(1)
        step(4)
        assert all(bool((t[:, 1:] == 0).all()) and bool((t[:, 0] == 1).all()) for t in pool.tensors)
    assert pool.audit().clean


def test_list_baseline_is_keyed_by_request():
    lp = bench_pool.ListSlotPool(4)
    a = lp.alloc(7, 3)
    assert sorted(a) == [1, 2, 3] and lp.alloc(8, 2) is None
    lp.free(7)
    lp.free(7)  # a repeated free is a silent no-op, as in the engines it stands for
    assert sorted(lp.free_ids) == [1, 2, 3, 4]


def test_scaled_config_fits_the_budget():
    cfg = bench_pool.scaled_config("cpu", 1024)
    assert cfg.num_slots > 1024 and cfg.layers >= 1
    assert cfg.bytes_per_slot() * (cfg.num_slots + 1) <= bench_pool.STATE_BUDGET
    assert (cfg.conv_dims, cfg.heads, cfg.head_dim, cfg.state_size) == ((8192,), 32, 128, 128)


def test_a_target_reads_its_ratio_and_can_fail():
    def result(ratio):
        rows = [
            {"contender": c, "n": n, "bookkeeping_ratio_to_sglang": ratio, "zeroing_ratio_to_sglang": ratio}
            for c, n, _ in bench_pool.TARGETS
        ]
        return {
            "rows": rows
            + [
                {"contender": "strict", "n": 64, "bookkeeping_ratio_to_sglang": ratio, "zeroing_ratio_to_sglang": ratio}
            ],
            "ledger_bytes_per_slot": 30.0,
        }

    assert all(t["met"] for t in bench_pool.targets(result(0.5)))
    failed = [t for t in bench_pool.targets(result(5.0)) if t["met"] is False]
    assert len(failed) == len(bench_pool.TARGETS) + 1  # every ratio, not the ledger's size


def test_ledger_size_counts_every_per_slot_array(monkeypatch):
    """The size target reads every array of a slot's length the ledger keeps, not only its
    columns: an extra per-slot array (as an id sequence once went uncounted) shows in it."""
    base = bench_pool.ledger_bytes_per_slot(1024)
    columns_only = sum(t.numel() * t.element_size() for t in bench_pool.SlotLedger(1024).tensors.values()) / 1024
    assert base == columns_only  # the ledger keeps no per-slot array beside its columns

    class Bigger(bench_pool.SlotLedger):
        def __init__(self, capacity, **kw):
            super().__init__(capacity, **kw)
            self._extra = np.zeros(capacity + 1, dtype=np.int64)

    monkeypatch.setattr(bench_pool, "SlotLedger", Bigger)
    assert bench_pool.ledger_bytes_per_slot(1024) == pytest.approx(base + 8 * 1025 / 1024)


def test_the_drop_in_has_its_targets_beside_the_ledgers():
    """The guarded round trip (SGLang's allocator inside `GuardedAllocator`) is judged against
    SGLang's allocator of the same run: at most 2x at n=1, 3x at n=64 and n=1024."""
    assert [(n, limit) for c, n, limit in bench_pool.TARGETS if c == "guarded"] == [(1, 2.0), (64, 3.0), (1024, 3.0)]
    ratios = {1: 1.9, 64: 3.1, 1024: 2.5}
    rows = [
        {"contender": "guarded", "n": n, "bookkeeping_ratio_to_sglang": r, "zeroing_ratio_to_sglang": 1.0}
        for n, r in ratios.items()
    ]
    found = [
        t
        for t in bench_pool.targets({"rows": rows, "ledger_bytes_per_slot": 30.0})
        if "GuardedAllocator" in t["target"]
    ]
    assert [(t["value"], t["met"]) for t in found] == [(1.9, True), (3.1, False), (2.5, True)]
    assert found[0]["target"] == "GuardedAllocator(SGLang) <= 2x SGLang at n=1"
