"""tests/adapters/sglang: SGLang 0.5.23's real objects on CPU, with the import-time stubs of stubs.py.

The stubs are installed here, so only the tests of this folder load them. Without SGLang or its
pinned packages nothing is stubbed, and each test module skips itself (installed.skip_reason names
the pip commands).
"""

import pytest

from slotwarden.adapters.sglang.drill import installed, stubs

if installed.skip_reason() is None:
    stubs.install()


@pytest.fixture
def guarded():
    """The adapter installed for one test (pools built in it are guarded), then removed."""
    import slotwarden.adapters.sglang as sw

    sw.uninstall()
    yield sw.install(first_read=True)
    sw.uninstall()
