"""A stand-in for the device's stream in overlap mode: which launched steps have finished.

The forward pass itself runs eagerly (CPU torch), but the scheduler only learns a step's
results, and may only fence it, once this device says the step is done; with overlap on, a
step stays in flight while the next batch is built and launched. On CUDA an engine would pass
a `torch.cuda.Event`'s `query` as the `done` marker instead.
"""

from __future__ import annotations


class SimulatedDevice:
    def __init__(self):
        self.finished = 0  # every step up to this one has finished

    def marker(self, step: int):
        """`done()` for `step`: true once the device has finished it (never waits)."""
        return lambda: step <= self.finished

    def finish(self, step: int) -> None:
        self.finished = max(self.finished, step)
