"""The SGLang adapter: slotwarden's lifecycle enforced inside SGLang's own objects.

    SLOTWARDEN_SGLANG=1 python -m sglang.launch_server ...     # a server (SGLang's plugin hook)
    import slotwarden.adapters.sglang as sw; sw.install()      # in code, before the pools are built
    pytest -p slotwarden.adapters.sglang ...                   # for a test run

Every Mamba slot move SGLang makes is attributed to SGLang's own object (the `Req`, the
streaming session's record, the tree node, the scheduler's step) and checked against the
declared lifecycle at the call; a bad one raises the model's typed error there, with the call
site and the slot's last moves, and changes nothing. docs/sglang.md has the table of call sites.
"""

from slotwarden.adapters.sglang.install import install, installed, uninstall
from slotwarden.adapters.sglang.slots import GuardedSlots, LockedEviction

__all__ = ["GuardedSlots", "LockedEviction", "install", "installed", "uninstall", "pytest_configure"]


def pytest_configure(config) -> None:
    """As a pytest plugin (`-p slotwarden.adapters.sglang`): install before any test runs."""
    install()
