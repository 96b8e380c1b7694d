"""Side-by-side timings against real peers (`slotwarden bench`)."""
