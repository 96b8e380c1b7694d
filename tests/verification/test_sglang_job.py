"""verify's SGLang job (verification/adapters.py): a SKIP row without SGLang, a pass on SGLang's real
objects, and a FAIL for a broken adapter (a tree eviction's free mapped to a request's free) and
for a guard that lets a replayed bug through."""

import pytest

from slotwarden.adapters.sglang.drill import installed
from slotwarden.verification import adapters
from slotwarden.verification.verify.jobs import LEVELS, jobs

NEEDS_SGLANG = pytest.mark.skipif(installed.skip_reason() is not None, reason=str(installed.skip_reason()))


def test_the_job_is_in_every_run():
    for level in LEVELS.values():
        assert [name for stage, name, _ in jobs(level, 1.0, None, None) if stage == "adapters"] == ["sglang"]


def test_without_sglang_the_job_is_a_skip_row_naming_why(monkeypatch):
    monkeypatch.setattr(installed, "skip_reason", lambda: "sglang==0.5.23 (absent): pip install ...")
    ok, text, detail = adapters.sglang_job(quick=True)
    assert ok and text.startswith("SKIP: sglang==0.5.23 (absent)") and detail["skipped"]


@NEEDS_SGLANG
def test_the_job_passes_on_sglangs_real_objects():
    ok, text, detail = adapters.sglang_job(quick=True)
    assert ok, text
    assert detail["failures"] == {} and len(detail["cases"]) == len(adapters.QUICK)


@NEEDS_SGLANG
def test_the_job_fails_when_a_hook_maps_the_trees_free_to_a_requests(monkeypatch):
    from slotwarden.adapters.sglang import hooks
    from slotwarden.adapters.sglang import who as W

    site = "MambaComponent.apply_component_action"  # the tree's eviction: EVICT by the node
    monkeypatch.setitem(hooks.HOOKS, site, hooks._mode(site, hooks._cache_pool, W.Mode.HOLDER))
    ok, text, detail = adapters.sglang_job(quick=True)
    assert not ok, text
    assert "radix[no_buffer, python]" in detail["failures"], detail["failures"]
    assert "IllegalFree" in detail["failures"]["radix[no_buffer, python]"]


@NEEDS_SGLANG
def test_the_job_fails_when_the_guard_lets_a_replayed_bug_through(monkeypatch):
    import slotwarden.adapters.sglang as sw

    monkeypatch.setattr(sw.GuardedSlots, "free", lambda self, free_index: self.raw.free(free_index))
    assert adapters.check_replay("double_free", False).startswith("refused 0 times")


@NEEDS_SGLANG
def test_the_lazy_scenario_passes_and_fails_when_the_boundarys_free_is_unmapped(monkeypatch, tmp_path):
    """Lazy extra buffers in the default run: guarded = bare on both tree cores; with the
    post-decode's free left to the plain holder mapping, the session's lent track slot is refused."""
    from slotwarden.adapters.sglang import hooks
    from slotwarden.adapters.sglang.drill import stubs

    stubs.install()
    lazy = [c for c in adapters.cases(quick=False) if c.scenario == "lazy"]
    assert {(c.extra_buffer, c.backend) for c in lazy} == {(True, "python"), (True, "rust")}
    assert all(adapters.check_scenario(c, tmp_path) == "" for c in lazy)
    monkeypatch.delitem(hooks.HOOKS, "SchedulerBatchResultProcessor.mamba_lazy_post_decode_at_boundary")
    assert "IllegalFree" in adapters.check_scenario(lazy[0], tmp_path)
