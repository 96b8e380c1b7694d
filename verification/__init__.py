"""slotwarden.verification."""
