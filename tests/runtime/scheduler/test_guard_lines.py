"""The public calls' guard (runtime/scheduler/contract.py `guarded`) under a fault at each of its
own line events: nothing a call returned is lost. A fault at the line between a call's return
and the guard's protection of it once lost its results ("requests never handed back")."""

import pytest

from slotwarden.verification import interrupts as I


class _GuardLines(I.Raiser):
    """Counts line events as the sweep does, noting those of the guard and the SIGINT deferral."""

    def __init__(self):
        super().__init__(None, KeyboardInterrupt, I.ROOTS)
        self.hits = []

    @I.interrupter
    def local(self, frame, event, arg):
        if event == "line":
            self.count += 1
            if frame.f_code.co_name == "run_guarded" or frame.f_code.co_filename.endswith("signals.py"):
                self.hits.append(self.count)
        return self.local


@pytest.mark.parametrize("config", [I.CONFIGS[0], I.CONFIGS[-1]], ids=str)
def test_a_fault_at_any_line_of_the_guard_loses_nothing(config):
    lines = _GuardLines()
    I.drive(config, lines)
    assert len(lines.hits) > 100
    failures = I.sweep(config, lines.hits[::3], RuntimeError)
    assert not failures, "\n".join(f"{f.event} {f.where}: {f.what}" for f in failures[:10])
