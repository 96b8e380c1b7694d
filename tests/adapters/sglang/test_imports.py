"""SGLang's modules import on CPU with the stubs, and the stubs stay invisible outside SGLang."""

import importlib
import sys

import pytest

from slotwarden.adapters.sglang.drill import installed

if installed.skip_reason() is not None:
    pytest.skip(installed.skip_reason(), allow_module_level=True)

from slotwarden.adapters.sglang.drill import stubs  # noqa: E402

MODULES = [
    "sglang.srt.mem_cache.memory_pool",
    "sglang.srt.mem_cache.unified_radix_cache",
    "sglang.srt.session.streaming_session",
    "sglang.srt.managers.schedule_batch",
    "sglang.srt.managers.scheduler",
]


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    assert importlib.import_module(name).__file__.endswith(".py")


@pytest.mark.parametrize("name", sorted(stubs.STUBS))
def test_stub_is_not_served_outside_sglang(name):
    importlib.import_module("sglang.srt.managers.scheduler")  # SGLang has loaded its stubs by now
    module = sys.modules.get(name)
    assert module is None or isinstance(module, stubs._StubModule)
    finder = next(f for f in sys.meta_path if isinstance(f, stubs._SGLangOnlyFinder))
    assert finder.find_spec(name) is None  # asked from this file, not from SGLang's


def test_torch_and_transformers_still_see_no_triton_nor_torchvision():
    from torch.utils._triton import has_triton_package
    from transformers.utils import import_utils

    assert not has_triton_package()
    assert not import_utils.is_torchvision_available()
