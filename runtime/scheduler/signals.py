"""A SIGINT deferred to the boundary of a scheduler call (the approach of Trio's KeyboardInterrupt
protection): while a public call runs on the main thread, Python's default SIGINT handler is
replaced by one that only notes the signal; the previous handler is restored when the call
ends, and the noted signal is raised then as `KeyboardInterrupt` (`run()` raises it between
two steps). A user's Ctrl-C so never lands between two statements of the scheduler's
bookkeeping. Another thread's calls, and a handler of the user's own, are left as they are."""

from __future__ import annotations

import signal
import threading


class Deferred:
    """The SIGINT noted during the outermost public call of one scheduler."""

    def __init__(self):
        self.depth, self.pending, self.previous = 0, False, None

    def enter(self) -> None:
        self.depth += 1
        if self.depth == 1 and threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                self.previous = signal.signal(signal.SIGINT, self._note)

    def leave(self, deliver: bool) -> None:
        """The call ends: the previous handler back (outermost call), and a noted SIGINT raised
        if `deliver` (the call returned: its boundary)."""
        self.depth -= 1
        if self.depth == 0 and self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
        if deliver and self.depth == 0:
            self.deliver()

    def deliver(self) -> None:
        """Raise the SIGINT noted so far, here (a boundary: the scheduler is consistent)."""
        if self.pending:
            self.pending = False
            interrupt = KeyboardInterrupt("SIGINT, delivered at the boundary of a scheduler call")
            interrupt.at_boundary = True
            raise interrupt

    def _note(self, signum, frame) -> None:
        self.pending = True
