"""The shipped Hypothesis machines, run against our pool, an engine allocator behind the
guard, and the scheduler (with and without overlap)."""

from hypothesis import settings

from slotwarden.verification.stateful import GuardMachine, PoolMachine, SchedulerMachine

PoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
GuardMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
SchedulerMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)

TestPool = PoolMachine.TestCase
TestGuard = GuardMachine.TestCase
TestScheduler = SchedulerMachine.TestCase
