"""The adapter's step fences, deferred tree locks, alloc groups and plugin switches, on SGLang's
real objects."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from slotwarden.adapters.sglang.drill import installed

if installed.skip_reason() is not None:
    pytest.skip(installed.skip_reason(), allow_module_level=True)

from slotwarden.adapters.sglang import hooks  # noqa: E402
from slotwarden.adapters.sglang import who as W  # noqa: E402
from slotwarden.adapters.sglang.slots import LockedEviction  # noqa: E402
from slotwarden.model.vocabulary import State  # noqa: E402

from slotwarden.adapters.sglang.drill import flow, objects  # noqa: E402


def _finished_in_flight(fx):
    """A request finishes while a step is on the device (SGLang's overlap loop)."""
    slots = fx.pool.mamba_allocator
    a = objects.make_req([1, 2, 3, 4, 5, 6])
    flow.start(fx, a)
    step = slots.launch()
    flow.run(fx, a)
    flow.finish(fx, a)
    return slots, a, step


def test_a_release_waits_for_its_steps_results(guarded):
    fx = objects.build(sizes=objects.Sizes(mamba_slots=2))
    slots = fx.pool.mamba_allocator
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)
    slot = int(a.kv.mamba_pool_idx)
    step = slots.launch()
    flow.run(fx, a)
    fx.pool.free_mamba_cache(a)  # while the step may still write it
    assert slots.state(slot) is State.RELEASED
    assert slot not in slots.free_slots.tolist()
    slots.fence(step)  # its results are processed
    assert slots.state(slot) is State.FREE and slot in slots.free_slots.tolist()


def test_without_the_batchs_admit_a_release_would_skip_its_fence(guarded, monkeypatch):
    """The broken variant the test above rules out: slots never admitted with their batch are
    candidates, and a candidate's free is a rollback, free at once under the step in flight."""
    from slotwarden.adapters.sglang import records

    monkeypatch.setattr(records, "admit", lambda *args: None)
    fx = objects.build(sizes=objects.Sizes(mamba_slots=2))
    slots = fx.pool.mamba_allocator
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)
    slot = int(a.kv.mamba_pool_idx)
    slots.launch()
    fx.pool.free_mamba_cache(a)
    assert slots.state(slot) is State.FREE and slot in slots.free_slots.tolist()


def test_a_lock_on_an_unpublished_insert_is_taken_at_its_fence(guarded):
    fx = objects.build()
    slots, a, step = _finished_in_flight(fx)
    node = a.last_node
    cached = hooks._node_slot(fx.cache, node)
    assert slots.state(cached) is State.CACHING  # the step in flight may still write it
    lock = fx.cache.lock(node)
    assert slots.ledger.record(cached).readers == 0
    with pytest.raises(LockedEviction, match=f"slot {cached}"):
        with W.attributed(W.Who(W.Mode.TREE)):
            slots.free(torch.tensor([cached]))
    slots.fence(step)
    assert slots.state(cached) is State.CACHED and slots.ledger.record(cached).readers == 1
    fx.cache.unlock(lock)
    assert slots.ledger.record(cached).readers == 0


def test_the_scheduler_step_launches_and_fences():
    slots = SimpleNamespace(launched=[], fenced=[])
    fake = type("GuardedSlots", (), {})
    guarded = fake()
    guarded.launch = lambda: slots.launched.append(7) or 7
    guarded.fence = lambda step: slots.fenced.append(step)
    guarded.check_batch = lambda reqs: None
    guarded.filled = lambda batch, outside: None
    guarded.tracked = lambda batch: None
    sched = SimpleNamespace(req_to_token_pool=SimpleNamespace(mamba_allocator=guarded))
    batch = SimpleNamespace()
    real = hooks.slots_of
    hooks.slots_of = lambda pool: getattr(pool, "mamba_allocator", None)
    try:
        ran = hooks.scheduler_run_batch(lambda self, b: "ran")(sched, batch)
        done = hooks.scheduler_process_batch_result(lambda self, b, r: "done")(sched, batch, None)
        hooks.scheduler_on_idle(lambda self: "idle")(sched)
    finally:
        hooks.slots_of = real
    assert (ran, done) == ("ran", "done")
    assert slots.launched == [7] and batch._slotwarden_step == 7 and slots.fenced == [7, None]


def test_a_batchs_write_set_is_checked_before_its_step_runs(guarded):
    """Each row writes its `Req`'s own state slot: a batch whose index maps a row to another
    request's slot (a stale or wrong-seeded mapping) is refused, nothing runs, no step is launched."""
    from slotwarden.model.errors import IllegalStep

    fx = objects.build()
    slots = fx.pool.mamba_allocator
    a, b = objects.make_req([1, 2, 3]), objects.make_req([4, 5, 6, 7])
    flow.start(fx, a)
    flow.start(fx, b)
    assert len(flow.step(fx, [a, b])) == 1 and slots.ledger.launched == 1
    a.kv.mamba_pool_idx = b.kv.mamba_pool_idx.clone()  # row 0 now indexes b's slot
    with pytest.raises(IllegalStep, match=f"slot {int(b.kv.mamba_pool_idx)}") as e:
        flow.step(fx, [a, b])
    assert e.value.row == 0 and slots.ledger.launched == 1


def test_an_alloc_group_passes_through_and_is_attributed(guarded):
    fx = objects.build()
    slots = fx.pool.mamba_allocator
    slots.alloc_group_begin(3)
    a = objects.make_req([1, 2, 3])
    flow.start(fx, a)  # its slot comes out of the group
    slots.alloc_group_end()  # the unused two go back through the engine's own free
    assert fx.mamba_free() == fx.sizes.mamba_slots - 1
    assert slots.ledger.record(int(a.kv.mamba_pool_idx)).state is State.RUNNING
    assert slots.guarded.audit().problems == ()


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    prelude = "from slotwarden.adapters.sglang.drill import stubs; stubs.install()\n"
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("switch", ["1", "0"])
def test_the_environment_switch_installs_through_sglangs_plugins(switch):
    from importlib.metadata import entry_points

    names = {ep.value for ep in entry_points(group="sglang.srt.plugins")}
    assert "slotwarden.adapters.sglang.plugin:load" in names, "pip install -e . registers the plugin"
    env = dict(os.environ, SLOTWARDEN_SGLANG=switch)
    code = "from sglang.srt.plugins import load_plugins; load_plugins()\n"
    code += "import slotwarden.adapters.sglang as sw; print('installed', sw.installed() is not None)"
    done = _run(code, env)
    assert f"installed {switch == '1'}" in done.stdout, done.stdout + done.stderr


def test_the_pytest_plugin_installs(tmp_path):
    (tmp_path / "conftest.py").write_text("from slotwarden.adapters.sglang.drill import stubs\nstubs.install()\n")
    (tmp_path / "test_on.py").write_text(
        "def test_on():\n    import slotwarden.adapters.sglang as sw\n    assert sw.installed() is not None\n"
    )
    args = [sys.executable, "-m", "pytest", "-q", "-p", "slotwarden.adapters.sglang", "-p", "no:cacheprovider"]
    done = subprocess.run([*args, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
