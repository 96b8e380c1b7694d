"""The scenarios of scenarios.py with the adapter installed: what SGLang shows is what it shows
bare, no legal move is refused, and the ledger's audit is clean, the engine's free list agreeing
slot by slot. The real scheduler's prefill round and flush run too (shell.py)."""

import pytest

from slotwarden.adapters.sglang.drill import installed

if installed.skip_reason() is not None:
    pytest.skip(installed.skip_reason(), allow_module_level=True)

import slotwarden.adapters.sglang as sw  # noqa: E402

from slotwarden.adapters.sglang.drill import census, objects, scenarios  # noqa: E402

SCENARIOS = ["plain", "radix", "session", "alloc_group", "flush", "rollback"]


def _run(name: str, extra_buffer: bool, guard: bool, backend: str = "python"):
    sw.uninstall()
    if guard:
        sw.install()
    try:
        fx = objects.build(extra_buffer=extra_buffer, backend=backend)
        return fx, getattr(scenarios, name)(fx)
    finally:
        sw.uninstall()


CASES = [
    pytest.param(name, extra, id=f"{name}-{'extra_buffer' if extra else 'no_buffer'}")
    for name in SCENARIOS
    for extra in (False, True)
]


@pytest.mark.parametrize(("name", "extra_buffer"), CASES)
def test_scenario_runs_the_same_guarded(name, extra_buffer):
    _, bare = _run(name, extra_buffer, guard=False)
    fx, seen = _run(name, extra_buffer, guard=True)
    slots = fx.pool.mamba_allocator
    assert isinstance(slots, sw.GuardedSlots)
    assert _comparable(seen) == _comparable(bare)
    audit = slots.guarded.audit()
    assert audit.problems == () and audit.free_list_ok, audit
    assert slots.unattributed == 0
    census.assert_balanced(fx)


def _comparable(seen: dict) -> dict:
    """What a scenario saw, with request ids (a counter's, new in each run) read as counts."""
    out = {}
    for key, value in seen.items():
        if isinstance(value, list) and value and all(isinstance(v, str) and v.startswith("req-") for v in value):
            value = len(value)
        out[key] = value
    return out


@pytest.mark.parametrize("name", ["radix", "session", "flush"])
def test_scenario_runs_the_same_on_the_rust_tree_core(name):
    """SGLang's default tree core: the hooks are the cache's and the component's public
    methods, which both cores go through."""
    _, bare = _run(name, False, guard=False, backend="rust")
    fx, seen = _run(name, False, guard=True, backend="rust")
    assert _comparable(seen) == _comparable(bare)
    audit = fx.pool.mamba_allocator.guarded.audit()
    assert audit.problems == () and audit.free_list_ok, audit


REPLAYS = [("lent_slot_rollback", False), ("sentinel_free", True), ("double_free", False)]


@pytest.mark.parametrize(("name", "extra_buffer"), REPLAYS, ids=[r[0] for r in REPLAYS])
def test_replay_is_refused_at_the_buggy_call_with_nothing_changed(name, extra_buffer):
    """Each bug of replays.py, bare a corruption (test_bare.py), is refused at its one buggy
    statement, the engine's free list and the ledger as they were just before it."""
    from slotwarden.verification.adapters import check_replay

    assert check_replay(name, extra_buffer) == ""  # refused once, at its buggy free, nothing changed
