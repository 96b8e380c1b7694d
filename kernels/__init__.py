"""slotwarden.kernels."""

from .conv import conv_update
from .layer import TinyMamba, TinyMambaConfig
from .ssm import selective_state_update

__all__ = ["TinyMamba", "TinyMambaConfig", "conv_update", "selective_state_update"]
