"""`slotwarden verify`'s SGLang job: the adapter on SGLang 0.5.23's real objects (adapters/sglang/drill).

Every scenario runs bare and guarded, on the Python tree core (no buffer and extra buffers) and
on SGLang's default Rust core where it has tree moves: the guarded run must show what the bare
one shows, refuse nothing, end with a clean audit (the engine's free list agreeing slot by slot),
zero unattributed allocs, SGLang's own pool equations balanced, and a trace that check-trace
accepts with no leak; the guarded runs judge first reads (`install(first_read=True)`). Every
bug replay, on the adapter as installed by default, must be refused at its one buggy call with the engine's
free list and the ledger as they were. Without SGLang (or its pinned packages) the job is a SKIP
row that says what is missing. Quick runs a subset (the Python core, one replay).
"""

from __future__ import annotations

import tempfile
import time
import warnings
from pathlib import Path
from typing import NamedTuple

from slotwarden.adapters.sglang.drill import installed

SCENARIOS = ("plain", "radix", "session", "alloc_group", "flush", "rollback", "lazy")
RUST = ("radix", "session", "flush", "lazy")  # the scenarios with tree moves, on SGLang's default core
REPLAYS = (("lent_slot_rollback", False), ("sentinel_free", True), ("double_free", False))
QUICK = (("plain", True, "python"), ("radix", False, "python"), ("session", False, "python"))


class Case(NamedTuple):
    scenario: str
    extra_buffer: bool
    backend: str

    def __str__(self) -> str:
        return f"{self.scenario}[{'extra_buffer' if self.extra_buffer else 'no_buffer'}, {self.backend}]"


def cases(quick: bool) -> list[Case]:
    if quick:
        return [Case(*c) for c in QUICK]
    from slotwarden.adapters.sglang.drill.scenarios import LAZY  # lazy mode needs extra buffers

    out = [Case(n, extra, "python") for n in SCENARIOS for extra in (False, True) if extra or n not in LAZY]
    return out + [Case(n, n in LAZY, "rust") for n in RUST]


def comparable(seen: dict) -> dict:
    """What a scenario saw, with request ids (a counter's, new in each run) read as counts."""
    out = {}
    for key, value in seen.items():
        if isinstance(value, list) and value and all(isinstance(v, str) and v.startswith("req-") for v in value):
            value = len(value)
        out[key] = value
    return out


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:300]


def _run(case: Case, trace: str | None):
    import slotwarden.adapters.sglang as sw
    from slotwarden.adapters.sglang.drill import objects, scenarios

    sw.uninstall()
    if trace is not None:
        sw.install(trace=trace, first_read=True)
    try:
        fx = objects.build(extra_buffer=case.extra_buffer, backend=case.backend, lazy=case.scenario in scenarios.LAZY)
        return fx, getattr(scenarios, case.scenario)(fx)
    finally:
        sw.uninstall()


def check_scenario(case: Case, folder: Path) -> str:
    """'' when `case` runs guarded as it runs bare and leaves nothing to find; else why not."""
    import slotwarden.adapters.sglang as sw
    from slotwarden.cli.trace.check import check_file
    from slotwarden.adapters.sglang.drill import census

    _, bare = _run(case, None)
    path = folder / f"{case.scenario}-{case.extra_buffer}-{case.backend}.trace"
    try:
        fx, seen = _run(case, str(path))
    except Exception as exc:  # a refusal of a legal move, or SGLang's own failure under the guard
        return f"refused or raised: {_first_line(exc)}"
    slots = fx.pool.mamba_allocator
    if not isinstance(slots, sw.GuardedSlots):
        return "the pool's allocator is not guarded"
    if comparable(seen) != comparable(bare):
        return f"saw {comparable(seen)} guarded, {comparable(bare)} bare"
    audit = slots.guarded.audit()
    if audit.problems or not audit.free_list_ok:
        return f"audit: {audit}"
    if slots.unattributed:
        return f"{slots.unattributed} unattributed allocs"
    for leak, message in (census.mamba_leak(fx), census.kv_leak(fx)):
        if leak:
            return f"SGLang's pool equation: {message}"
    report = check_file(path)
    if report.findings or report.leaks:
        first = report.findings[0].error if report.findings else f"{len(report.leaks)} leaks"
        return f"check-trace: {first}"
    return ""


def check_replay(name: str, extra_buffer: bool) -> str:
    """'' when replay `name` is refused at its one buggy free with nothing changed; else why not."""
    import torch

    import slotwarden.adapters.sglang as sw
    from slotwarden.model.errors import LifecycleError
    from slotwarden.adapters.sglang.drill import objects, replays

    refused = []
    real = sw.GuardedSlots.free

    def spied(self, free_index):
        before = (self.raw.free_slots.clone(), self.ledger.snapshot())
        try:
            return real(self, free_index)
        except LifecycleError as exc:
            after = self.ledger.snapshot()
            same = torch.equal(before[0], self.raw.free_slots) and all(
                torch.equal(v, after[k]) for k, v in before[1].items() if k != "counters"
            )
            refused.append((_first_line(exc), same))
            raise

    sw.uninstall()
    sw.GuardedSlots.free = spied
    try:
        sw.install()  # as installed by default (no first reads judged): the scenarios run with them on
        fx = objects.build(extra_buffer=extra_buffer)
        getattr(replays, name)(fx)
    except LifecycleError:
        pass
    finally:
        sw.uninstall()
        sw.GuardedSlots.free = real
    if len(refused) != 1:
        return f"refused {len(refused)} times (want once, at the buggy call): {refused}"
    return "" if refused[0][1] else f"refused ({refused[0][0]}) but the free list or the ledger changed"


def sglang_job(quick: bool) -> tuple[bool, str, dict]:
    """(ok, summary, detail) of the job; detail["skipped"] says why when SGLang is not installed."""
    why = installed.skip_reason()
    if why is not None:
        return True, f"SKIP: {why}", {"skipped": why}
    with warnings.catch_warnings():  # SGLang's import-time notes on a CPU machine (no Triton, no GGUF)
        warnings.simplefilter("ignore")
        return _run_all(quick)


def _run_all(quick: bool) -> tuple[bool, str, dict]:
    from slotwarden.adapters.sglang.drill import stubs

    stubs.install()
    start = time.perf_counter()
    failures = {}
    with tempfile.TemporaryDirectory(prefix="slotwarden-sglang-") as folder:
        for case in cases(quick):
            got = check_scenario(case, Path(folder))
            if got:
                failures[str(case)] = got
    replays = REPLAYS[:1] if quick else REPLAYS
    for name, extra in replays:
        got = check_replay(name, extra)
        if got:
            failures[f"replay {name}"] = got
    n = len(cases(quick))
    text = f"{n - len([k for k in failures if not k.startswith('replay')])}/{n} scenarios guarded = bare, clean"
    text += f"; {len(replays) - len([k for k in failures if k.startswith('replay')])}/{len(replays)} replays refused"
    text += " at the call"
    if failures:
        first = next(iter(failures.items()))
        text += f"; FAILED {first[0]}: {first[1]}"
    detail = {"failures": failures, "cases": [str(c) for c in cases(quick)], "replays": replays}
    return not failures, text, detail | {"seconds": time.perf_counter() - start}
