"""One root error: every exception class slotwarden defines inherits `SlotwardenError` (keeping
its other bases), so `except SlotwardenError` catches every error the library raises on purpose.
The walk is shown catching a planted class that does not."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import slotwarden
from slotwarden.model.errors import LifecycleError, SlotwardenError

ROOTS = ("slotwarden.model", "slotwarden.runtime", "slotwarden.kernels", "slotwarden.verification", "slotwarden")
INTERNAL = {
    "slotwarden.verification.checker.packing.OutOfRange": "the codec's own control flow, caught where it is raised",
}


DRILL = "slotwarden.adapters.sglang.drill."  # SGLang's real objects: imported after the stubs, or not at all


def modules() -> list:
    from slotwarden.adapters.sglang.drill import installed, stubs

    with_sglang = installed.skip_reason() is None
    if with_sglang:
        stubs.install()  # as the drill's docstring asks: SGLang's heavy imports served first
    seen = []
    for root in ROOTS:
        package = importlib.import_module(root)
        for info in pkgutil.walk_packages(package.__path__, root + "."):
            if info.name.endswith("__main__") or info.name in seen:
                continue
            if (
                info.name.startswith(DRILL)
                and not with_sglang
                and info.name not in (DRILL + "installed", DRILL + "stubs")
            ):
                continue
            seen.append(info.name)
    return [importlib.import_module(name) for name in seen]


def orphans(mods) -> list:
    """Exception classes defined in `mods` that do not inherit `SlotwardenError`."""
    found = []
    for mod in mods:
        for name, cls in inspect.getmembers(mod, inspect.isclass):
            where = f"{cls.__module__}.{cls.__qualname__}"
            if cls.__module__ != mod.__name__ or not issubclass(cls, BaseException) or where in INTERNAL:
                continue
            if not issubclass(cls, SlotwardenError):
                found.append(where)
    return found


def test_every_error_the_library_defines_has_the_one_root():
    mods = modules()
    assert len(mods) > 100  # the walk found the package
    assert not orphans(mods)


def test_the_walk_catches_a_planted_error(tmp_path, monkeypatch):
    (tmp_path / "planted_errors.py").write_text(
        "from slotwarden.model.errors import SlotwardenError\n"
        "class Rooted(SlotwardenError, ValueError):\n    pass\n"
        "class Stray(ValueError):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert orphans([importlib.import_module("planted_errors")]) == ["planted_errors.Stray"]


@pytest.mark.parametrize(
    "where", ["slotwarden.runtime.scheduler.errors.SchedulerBroken", "slotwarden.runtime.radix.errors.BadTokens"]
)
def test_scheduler_and_cache_refusals_are_caught_by_the_root(where):
    module, name = where.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, SlotwardenError) and not issubclass(cls, LifecycleError)
    assert slotwarden.SlotwardenError is SlotwardenError
