"""Every public call of a scheduler: refused once it is broken (`flush_cache` included), and
from a thread other than its pool's (`collect` included: it raises `WrongThread` and takes
nothing). A prompt on the meta device, and build()'s arguments, are refused with typed errors."""

import threading

import pytest

import torch

from slotwarden.kernels.layer import TinyMambaConfig
from slotwarden.model.errors import SlotwardenError, WrongThread
from slotwarden.runtime.scheduler.build import BadBuild, build
from slotwarden.runtime.scheduler.errors import BadConfig, BadRequest, SchedulerBroken

LAYER = TinyMambaConfig(layers=1)


def _broken(prefix_cache=True):
    sched = build(LAYER, slots=4, max_running=4, prefix_cache=prefix_cache)
    for p in ([1, 2, 3], [4, 5, 6], [7, 8, 9]):
        sched.submit(p, 2)
    sched.run()  # three published prefixes in the cache
    sched._broken = SchedulerBroken("the scheduler is broken: planted")
    return sched


def test_flush_cache_on_a_broken_scheduler_refuses_and_moves_nothing():
    sched = _broken()
    before = sched.pool.ledger.state_of(range(1, sched.pool.capacity + 1)).tolist()
    with pytest.raises(SchedulerBroken, match="planted"):
        sched.flush_cache()
    assert sched.pool.ledger.state_of(range(1, sched.pool.capacity + 1)).tolist() == before


def _from_another_thread(call):
    out = {}

    def run():
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out


def test_collect_from_another_thread_raises_wrong_thread_and_takes_nothing():
    sched = build(LAYER, slots=2)
    rid = sched.submit([1, 2], 2)
    sched.step()
    sched.abort(rid)  # its Result waits in the outbox
    out = _from_another_thread(sched.collect)
    assert isinstance(out.get("error"), WrongThread), out
    assert [r.rid for r in sched.collect()] == [rid]  # still there for the owner


def test_flush_cache_from_another_thread_raises_wrong_thread():
    sched = build(LAYER, slots=2, prefix_cache=True)
    sched.submit([1, 2, 3], 1)
    sched.run()
    held = len(sched.prefix.tree.holding())
    out = _from_another_thread(sched.flush_cache)
    assert isinstance(out.get("error"), WrongThread), out
    assert len(sched.prefix.tree.holding()) == held


@pytest.mark.parametrize("call", ["submit", "submit_n"])
def test_a_prompt_on_the_meta_device_is_a_bad_request(call):
    sched = build(LAYER, slots=2)
    prompt = torch.tensor([1, 2], device="meta")
    with pytest.raises(BadRequest, match="meta"):
        sched.submit(prompt, 2) if call == "submit" else sched.submit_n(prompt, 2, 2)
    assert not sched.requests and sched.submitted == 0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(model="junk"), "model"),
        (dict(pool="junk"), "pool"),
        (dict(trace=42), "trace"),
        (dict(config="junk"), "config"),
        (dict(cls=int), "cls"),
        (dict(device="meta"), "device"),
        (dict(device="nonsense"), "device"),
        (dict(device=3.5), "device"),
    ],
)
def test_build_refuses_a_bad_argument_by_name(kwargs, name):
    with pytest.raises(BadBuild, match=rf"build\({name}=") as caught:
        build(LAYER, **{"slots": 2, **kwargs}) if "model" not in kwargs else build(slots=2, **kwargs)
    assert isinstance(caught.value, BadConfig) and isinstance(caught.value, SlotwardenError)
    assert caught.value.field == name


def test_build_refuses_a_pool_config_on_the_meta_device():
    from slotwarden.runtime.scheduler.shapes import pool_config

    with pytest.raises(BadBuild, match="meta"):
        build(LAYER, pool=pool_config(LAYER, 2, device="meta"))
