"""Stand-ins for the heavy modules that SGLang 0.5.23 imports at module level, for CPU drills only.

Each stub is served only to imports made from SGLang's own files (a meta-path finder looks at the
importing frame), so torch and transformers keep seeing the real machine: no triton, no
torchvision. Their cached availability checks are settled first, before any stub exists.
Nothing here is ever called by the tests: the stubs only let the module bodies run.

STUBS names each stubbed module with the reason it is stubbed instead of installed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

STUBS = {
    "triton": "GPU kernel compiler (large binary wheel); kernel modules only decorate with @triton.jit at import",
    "torchvision": "must match the torch build exactly; only configs/deepseek_ocr.py imports it at module level",
    "tvm_ffi": "apache-tvm-ffi loads JIT-built CUDA kernels; only the jit kernel registry imports it",
}


def _sglang_dir() -> str:
    """Where the installed sglang package lies (found without importing it)."""
    spec = importlib.util.find_spec("sglang")
    return os.path.join(list(spec.submodule_search_locations)[0], "")


_SGLANG_DIR = None  # set by install()
_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 4))  # the checkout


def _decorator(*args, **kwargs):
    """`@triton.jit`, `@triton.autotune(...)`, `@tvm_ffi.register_object(name)`: return the function."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


class _AnyType(type):
    """Attributes of a stand-in are stand-ins too (`tl.math.exp2`, `tl.tensor`)."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(name)


class _Anything(metaclass=_AnyType):
    """A type-like stand-in: constructible, subscriptable, usable as a base class."""

    def __init__(self, *args, **kwargs):
        pass

    def __class_getitem__(cls, item):
        return cls


def _stand_in(name: str) -> type:
    return _AnyType(name, (_Anything,), {})


class _StubModule(types.ModuleType):
    """A module whose every public attribute is a decorator or a type-like stand-in."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in ("jit", "autotune", "heuristics", "register_object", "register_func"):
            return _decorator
        value = _stand_in(name)
        setattr(self, name, value)
        return value


def _extras(module: types.ModuleType) -> None:
    """The few values SGLang's module bodies compute with at import time."""
    if module.__name__ == "triton":
        module.cdiv = lambda a, b: -(-a // b)
        module.next_power_of_2 = lambda n: 1 << (n - 1).bit_length()
        module.__version__ = "3.0.0"
    if module.__name__ == "torchvision":
        module.__version__ = "0.0.0"


def _importer_is_sglang() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<frozen") or "importlib" in name or name == __file__):
            return name.startswith(_SGLANG_DIR)
        frame = frame.f_back
    return False


class _SGLangOnlyFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in STUBS or not _importer_is_sglang():
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        _extras(module)
        return module

    def exec_module(self, module):
        pass


def _settle_real_checks() -> None:
    """Let torch and transformers cache "no triton, no torchvision" while it is still true."""
    import torch._dynamo  # noqa: F401  (its import-time triton probes run now)
    import torch._inductor.output_code  # noqa: F401  (what @torch.compile loads; probes triton at import)
    import torch._inductor.runtime.triton_compat  # noqa: F401
    from torch.utils._triton import has_triton_package

    has_triton_package()
    from transformers.utils import import_utils

    for check in ("is_torchvision_available", "is_torchvision_v2_available", "is_triton_available"):
        fn = getattr(import_utils, check, None)
        if fn is not None:
            fn()
    # this repository's top-level kernels/ folder (slotwarden.kernels) is not HF's `kernels` package: a
    # checkout on sys.path would make transformers import it by that name
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if os.path.abspath(p or ".") != _REPO]
    try:
        import_utils.is_kernels_available()
    finally:
        sys.path[:] = saved


def install() -> None:
    """Put the finder first on sys.meta_path (idempotent)."""
    if any(isinstance(f, _SGLangOnlyFinder) for f in sys.meta_path):
        return
    global _SGLANG_DIR
    _SGLANG_DIR = _sglang_dir()
    _settle_real_checks()
    sys.meta_path.insert(0, _SGLangOnlyFinder())
