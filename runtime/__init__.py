"""slotwarden.runtime."""
