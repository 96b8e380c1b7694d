"""slotwarden: the lifecycle of recurrent-state slots, declared once, enforced and verified."""

__version__ = "0.1.0"
