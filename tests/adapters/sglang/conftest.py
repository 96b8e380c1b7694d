"""tests/adapters/sglang: SGLang 0.5.23's real objects on CPU, with the import-time stubs of stubs.py.

The stubs are installed here, so only the tests of this folder load them. Without SGLang or its
pinned packages nothing is stubbed, and each test module skips itself (installed.skip_reason names
the pip commands).
"""

from adapters.sglang import installed, stubs

if installed.skip_reason() is None:
    stubs.install()
