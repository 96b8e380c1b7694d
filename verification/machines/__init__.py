"""The stateful Hypothesis machines that ship with the library."""
