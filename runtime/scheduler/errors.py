"""The scheduler's typed errors: refusals at its door (nothing changed) and its fault states."""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError, shown


class SchedulerError(SlotwardenError):
    """Base of the scheduler's own errors."""


class BadRequest(SchedulerError, ValueError):
    """`submit` refused its arguments (a prompt token outside the vocabulary or not an int, an
    empty prompt, a budget that is not a positive int); nothing was recorded."""


class BadConfig(SchedulerError, ValueError):
    """A `SchedulerConfig` field of the wrong type or out of range; raised when the config is
    made, so no scheduler is ever built on it. Names the field and the bad value."""

    def __init__(self, field: str, value, want: str):
        self.field, self.value, self.want = field, value, want
        super().__init__(f"bad SchedulerConfig.{field} {shown(value)}: {want}")

    def __reduce__(self):  # pickle's default would call it with the text alone
        return (type(self), (self.field, self.value, self.want))


class UnknownRequest(SchedulerError, LookupError):
    """A request id the scheduler never handed out (or not an int id); nothing changed."""


class UnknownSession(SchedulerError, LookupError):
    """A session id the scheduler never handed out (or not an int id); nothing changed."""


class SessionClosed(SchedulerError, ValueError):
    """A turn submitted to, or the state asked of, a session that is closed or closing;
    nothing was recorded."""


class SessionBusy(SchedulerError, RuntimeError):
    """The state asked of a session whose slot is lent to its turn: the turn writes it in
    place, so there is no state between turns to give until the turn ends."""


class NoSessionState(SchedulerError, LookupError):
    """The state asked of a session that has none to give: no turn of it has finished yet, or
    its last turn ended mid-way (aborted, retracted or failed) and the next turn rebuilds it."""


class StepFailed(SchedulerError, RuntimeError):
    """The forward pass of a step raised after it may have written state: its requests were
    ended first (reason "step N failed: ..."), everything else continues exactly. The message
    names what it ended. A parallel-sampling group's prompt request (`submit_n`) ends with no
    Result and is not counted in `counters.failures`, like its finish; its siblings go on as
    plain requests. So a step that held only such a request raises with no failed Result."""


class AuditFailed(SchedulerError, RuntimeError):
    """The idle audit found a slot unaccounted for; the message carries the slots' history."""


class SchedulerBroken(SchedulerError, RuntimeError):
    """A fault left the scheduler's bookkeeping out of step with the pool. It refuses every
    further call with this error; the message names the fault (also its `__cause__`) and
    what disagreed. Results already ended can still be taken with `collect()`."""


class NotIdle(SchedulerError, RuntimeError):
    """`run()` stepped `max_steps` times and the scheduler is still not idle; the message names
    the sessions that park slots while requests wait. Nothing is lost: run() again."""
