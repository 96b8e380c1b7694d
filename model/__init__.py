"""slotwarden.model."""
