"""The stateful Hypothesis machines that ship with the library, so that another implementation
is checked by importing one (a test file only says `TestX = PoolMachine.TestCase`).

- the pool: `PoolMachine` (a pool under test, `StatePoolUnderTest` by default) and
  `GuardMachine` (an engine allocator behind `LedgerGuard`), `AllocatorMachine` (the drop-in
  `GuardedAllocator`, every free judged by the declaration's free rule);
- the scheduler: `SchedulerMachine`, `CachedSchedulerMachine`, `machine_for(cls)` for a mutant;
- continuity: `ContinuityMachine`, `CachedContinuityMachine`, `continuity_machine_for(cls)`;
- the fault contract: `FaultMachine`, `CachedFaultMachine` (faults at the scheduler's pool calls);
- the prefix tree: `RadixMachine`, `radix_machine_for(cls)`;
- bad input: `BadInputMachine`, `SchedulerBadInputMachine`.
"""

from slotwarden.verification.machines.allocator import AllocatorMachine
from slotwarden.verification.machines.bad_input import BadInputMachine, SchedulerBadInputMachine
from slotwarden.verification.machines.continuity import (
    CachedContinuityMachine,
    ContinuityMachine,
    continuity_machine_for,
)
from slotwarden.verification.machines.faults import CachedFaultMachine, FaultMachine
from slotwarden.verification.machines.guard import GuardMachine, GuardUnderTest, TensorFreeList
from slotwarden.verification.machines.pool import PoolMachine
from slotwarden.verification.machines.radix import RadixMachine, radix_machine_for
from slotwarden.verification.machines.scheduler import (
    CachedSchedulerMachine,
    SchedulerMachine,
    machine_for,
    marks_broken,
)
from slotwarden.verification.machines.shared import MODEL, NODE_IDS, REQUEST_IDS, SESSION_IDS
from slotwarden.verification.machines.under_test import PoolUnderTest, StatePoolUnderTest

__all__ = [
    "AllocatorMachine",
    "BadInputMachine",
    "CachedContinuityMachine",
    "CachedFaultMachine",
    "CachedSchedulerMachine",
    "ContinuityMachine",
    "FaultMachine",
    "GuardMachine",
    "GuardUnderTest",
    "MODEL",
    "NODE_IDS",
    "PoolMachine",
    "PoolUnderTest",
    "RadixMachine",
    "REQUEST_IDS",
    "SESSION_IDS",
    "SchedulerBadInputMachine",
    "SchedulerMachine",
    "StatePoolUnderTest",
    "TensorFreeList",
    "continuity_machine_for",
    "machine_for",
    "marks_broken",
    "radix_machine_for",
]
