"""slotwarden.kernels."""

if __name__ != "slotwarden.kernels":  # imported as a bare folder (`import kernels` from the repository root)
    raise ImportError(
        f"this folder is the package slotwarden.kernels, imported here as {__name__!r}: "
        "use `import slotwarden.kernels` (install the project with `pip install -e .`)"
    )

from slotwarden.kernels.conv import conv_update
from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.kernels.ssm import selective_state_update

__all__ = ["TinyMamba", "TinyMambaConfig", "conv_update", "selective_state_update"]
