"""The tiny engine's scheduler: requests, sessions, batches, steps and fences.

scheduler.py  the `Scheduler` and its public calls     moves.py     the policy hooks (the seam)
admission.py  the batch builder                        forward.py   the forward pass
results.py    a finished step's results                sessions.py  a session between turns
contract.py   the fault contract                       build.py     `build()`
"""

from slotwarden.runtime.scheduler.config import SchedulerConfig
from slotwarden.runtime.scheduler.errors import AuditFailed, SchedulerBroken, StepFailed
from slotwarden.runtime.scheduler.request import Counters, Result, SessionState, StepReport
from slotwarden.runtime.scheduler.scheduler import Scheduler

__all__ = [
    "Scheduler",
    "SchedulerConfig",
    "StepReport",
    "Counters",
    "SessionState",
    "StepFailed",
    "AuditFailed",
    "SchedulerBroken",
    "Result",
]
