"""The tiny engine's scheduler: requests, sessions, batches, steps and fences."""
