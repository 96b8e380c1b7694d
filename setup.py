"""The build of the compiled move (runtime/ledger/_move.c), launch check (runtime/_step.c), the
checker's canonical key, decoding and bookkeeping of a world (verification/checker/_key.c,
_decode.c, _search.c) and the abstract scheduler's successors (verification/abstract/
_successors.c); the rest is in pyproject.toml. Optional: without a C compiler the install still
succeeds, the ledger and the launch check keep to numpy and the checker runs in Python."""

import platform

from setuptools import Extension, setup

# x86-64-v2 (SSE4.2, every x86-64 CPU since about 2009): the int64 comparisons of the run loops
# vectorise; elsewhere the compiler's default target
FLAGS = ["-O3"] + (["-march=x86-64-v2"] if platform.machine() in ("x86_64", "AMD64") else [])

setup(
    ext_modules=[
        Extension(
            "slotwarden.runtime.ledger._move",
            ["runtime/ledger/_move.c", "runtime/ledger/_lane.c", "runtime/ledger/_ledger_lane.c"],
            depends=["runtime/ledger/_move.h"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension("slotwarden.runtime._step", ["runtime/_step.c"], extra_compile_args=FLAGS, optional=True),
        Extension(
            "slotwarden.verification.abstract._successors",
            ["verification/abstract/_successors.c"],
            depends=["verification/_records.h"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "slotwarden.verification.checker._search",
            ["verification/checker/_search.c"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "slotwarden.verification.checker._key",
            ["verification/checker/_key.c", "verification/checker/_decode.c"],
            depends=["verification/_records.h"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
    ]
)
