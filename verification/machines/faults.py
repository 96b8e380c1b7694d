"""The fault-injecting scheduler machines: the continuity machines' workloads with faults raised
before or after the pool calls the scheduler makes, and the fault contract judged after each.

Each example plans its faults (an exception, `KeyboardInterrupt` included), armed one at a time
at a public call's start, each at a coming pool call: every move (its own and its prefix cache's),
`launch`, `fence`, `on_device` and the zeroing alloc runs before its ledger write; now and then a
second one, before or after the next pool call once the first struck (in the recovery); the
teardown's drain is faulted too. A fault after alloc is taken as the scheduler takes it
(admission.py): the slots moved, their zeroing not confirmed, so the machine fills them with
garbage. Then either the scheduler went on:
every handle (a waiting candidate's too) agrees with the pool, every request ends with the tokens
and state of its transcript's fault-free replay (`ContinuityMachine`), the idle audit is clean;
or it is broken: every later public call raises `SchedulerBroken`, naming the fault. Any other
exception fails the machine.
"""

from __future__ import annotations

from typing import NamedTuple

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from slotwarden.model.properties import exclusive
from slotwarden.model.vocabulary import Actor
from slotwarden.runtime.scheduler.errors import SchedulerBroken
from slotwarden.verification.machines.continuity import CachedContinuityMachine, ContinuityMachine
from slotwarden.verification.machines.scheduler import (
    GROUP_FEATURES,
    CachedSchedulerMachine,
    SchedulerMachine,
    marks_broken,
)
from slotwarden.verification.machines.scheduler import _scheduler_draws

POOL_CALLS = (
    "alloc",
    "alloc_each",
    "_zero_batch",  # the zeroing alloc runs once its checks passed, before the ledger writes
    "lend",
    "admit",
    "fire_each",
    "rollback",
    "zero",
    "retract",
    "finish",
    "park",
    "abort",
    "close",
    "launch",
    "fence",
    "on_device",
    "insert",
    "lock",
    "unlock",
    "evict",
    "copy",
)
ALLOCS = ("alloc", "alloc_each", "_zero_batch")
GARBAGE = 3.0  # what a slot holds whose zeroing did not run
DRAIN = 60  # faulted steps at teardown, at most
EXPIRES = 60  # pool calls an armed fault waits for its call
PUBLIC = ("step", "run", "abort", "close_session", "flush_cache", "submit", "submit_n", "open_session")


class Fault(NamedTuple):
    name: str | None  # the pool call it strikes (None: any)
    at: int  # at that call's `at`-th occurrence from now (counted from 1)
    when: str  # "before" or "after" the call
    exc: type


class PoolFaults:
    """Wraps the pool's calls (`POOL_CALLS`, as instance attributes) and raises each armed fault."""

    def __init__(self, pool):
        self.pool, self.armed, self.later, self.raised, self.log, self.waited = pool, [], [], [], [], 0
        self.plan: list = []  # what to arm next: a list of `Fault`s each (the second strikes after the first)
        for name in POOL_CALLS:
            setattr(pool, name, self._wrap(name, getattr(pool, name)))

    def arm_next(self) -> None:
        """At a public call's start, with nothing armed: arm the plan's next faults (a second one
        counts from the first's strike: it hits the recovery)."""
        if not self.armed and self.plan:
            self.armed, self.waited = list(self.plan.pop(0)), 0

    def _due(self, name: str) -> Fault | None:
        if not self.armed:
            return None
        self.waited += 1
        if self.waited > EXPIRES:  # its call may never come (a park with no sessions): the next is armed
            self.armed = []
            return None
        f = self.armed[0]
        if f.name not in (None, name):
            return None
        if f.at > 1:
            self.armed[0] = f._replace(at=f.at - 1)
            return None
        self.later, self.armed, self.waited = self.armed[1:], [], 0  # the next counts from this strike
        return f

    def injected(self, exc: BaseException | None) -> bool:
        """Whether `exc` is an injected fault, or raised by one (its cause or context chain)."""
        seen = set()
        while exc is not None and id(exc) not in seen:
            if any(exc is e for e in self.raised):
                return True
            seen.add(id(exc))
            exc = exc.__cause__ or exc.__context__
        return False

    def _wrap(self, name: str, fn):
        def faulted(*args, **kwargs):
            fault = self._due(name)
            if fault is not None and fault.when == "before":
                raise self._raise(fault, name)
            out = fn(*args, **kwargs)
            if fault is not None:
                if name in ("alloc", "alloc_each") and out is not None:
                    for t in self.pool.tensors:  # the slots moved; their zeroing is not confirmed
                        t[:, out.long()] = GARBAGE
                raise self._raise(fault, name)
            return out

        return faulted

    def _raise(self, fault: Fault, name: str) -> BaseException:
        exc = fault.exc(f"injected {fault.when} pool.{name}")
        self.raised.append(exc)
        self.armed, self.later = self.later, []
        self.log.append(f"{fault.exc.__name__} {fault.when} pool.{name}")
        return exc


CACHE_CALLS = ("insert", "lock", "unlock", "evict", "copy")  # made only with the prefix cache on


def plans(calls: tuple):
    """An example's faults over the pool calls `calls`: up to 6 pairs (a fault; maybe a second).

    A fault strikes at the `at`-th coming call named (or of any kind); the simplest draws, which
    Hypothesis makes most, are after an alloc, where a candidate's slot is decided. A second one
    strikes before or after the first call made once the first struck: mostly in its recovery."""
    first = st.builds(
        Fault,
        name=st.one_of(st.sampled_from(ALLOCS), st.none(), st.sampled_from(calls)),
        at=st.integers(1, 4),
        when=st.sampled_from(["after", "before"]),
        exc=st.sampled_from([KeyboardInterrupt, RuntimeError]),
    )
    again = st.builds(
        Fault,
        name=st.one_of(st.none(), st.sampled_from(calls)),
        at=st.just(1),
        when=st.sampled_from(["after", "before"]),
        exc=st.sampled_from([RuntimeError, KeyboardInterrupt]),
    )
    return st.lists(st.tuples(first, st.one_of(again, st.none())), min_size=1, max_size=6)


class Faulted(NamedTuple):
    """What a public call that raised an injected fault gives the machine's rules instead."""

    kind: str = "faulted"
    finished: tuple = ()


class Guarded:
    """The scheduler as the rules see it: a public call that raises an injected fault is judged
    (`FaultMachine.judge`) and gives `Faulted()`; anything else it raises goes on."""

    def __init__(self, sched, machine):
        self._sched, self._machine = sched, machine

    def __getattr__(self, name):
        attr = getattr(self._sched, name)
        return self._call(name, attr) if name in PUBLIC else attr

    def _call(self, name, call):
        def called(*args, **kwargs):
            self._machine.faults.arm_next()
            try:
                return call(*args, **kwargs)
            except BaseException as exc:
                if not self._machine.faults.injected(exc) and not isinstance(exc, SchedulerBroken):
                    raise
                self._machine.judge(exc, name)
                return Faulted()

        return called


class FaultMachine(ContinuityMachine):
    """The continuity machine, with faults armed at pool calls (see the module)."""

    refused = False

    @initialize(**_scheduler_draws([2, 1, 3, 4]))
    def setup(self, slots, overlap, budget, chunk, max_running, retract_after, features):
        SchedulerMachine.setup(self, slots, overlap, budget, chunk, max_running, retract_after, features)
        self._fault_the_pool()

    def _fault_the_pool(self):
        self.faults = PoolFaults(self.sched.pool)
        self.faults.plan = getattr(self, "_plan", [])
        self.sched = Guarded(self.sched, self)

    def _has(self, feature: str) -> bool:
        return not self.refused and super()._has(feature)

    @initialize(plan=plans(tuple(c for c in POOL_CALLS if c not in CACHE_CALLS)))
    def plan_faults(self, plan):
        """The example's faults, armed one after another (each once the last struck or gave up)."""
        self._plan = [[first] if again is None else [first, again] for first, again in plan]
        if hasattr(self, "faults"):
            self.faults.plan = self._plan

    def judge(self, exc: BaseException, where: str) -> None:
        """The contract after an injected fault reached the caller (or a refusal): consistent (the
        invariants say), or broken for good, naming the fault and refusing every public call."""
        sched = self.sched._sched
        if self.refused:
            assert isinstance(exc, SchedulerBroken), f"a broken scheduler's {where}() raised {exc!r}"
            return
        if sched.broken is None:
            assert not isinstance(exc, SchedulerBroken), f"{where}() raised {exc!r}, yet the scheduler is not broken"
            return
        self.refused = True
        assert self.faults.injected(sched.broken), f"the scheduler broke without naming the fault: {sched.broken!r}"
        for name, call in refusals(sched):
            try:
                call()
            except SchedulerBroken:
                continue
            raise AssertionError(f"the broken scheduler ({sched.broken}) answered {name}")

    @invariant()
    def every_slot_accounted_for(self):
        """The pool's audit, and every handle against the pool: a request's slot (a waiting
        candidate may keep the slot it took in a faulted step), a session's."""
        if not hasattr(self, "sched") or self.refused:
            return
        sched = self.sched._sched
        audit = sched.pool.audit()
        assert audit.free_list_ok and not audit.problems, audit.problems
        ledger = sched.pool.ledger
        assert all(exclusive(ledger.record(i)) for i in range(1, sched.pool.capacity + 1))
        for r in sched.requests.values():
            held = ledger.held_by(Actor.request(r.rid)).tolist()
            assert held == ([] if r.slot is None else [r.slot]), (
                f"request {r.rid} ({r.phase.name}) handle {r.slot}, pool {held} (faults: {self.faults.log})"
            )
        for s in sched.sessions.values():
            held = ledger.held_by(Actor.session(s.sid)).tolist()
            assert held == ([s.slot] if s.slot is not None else []), f"session {s.sid} handle {s.slot}, pool {held}"

    def check_invariants(self, settings, output, runtimes):
        if not self.refused:  # a broken scheduler promises only its refusals (checked when it broke)
            super().check_invariants(settings, output, runtimes)

    def teardown(self):
        """The rest of the workload with the plan's faults still striking (sessions closed, steps
        until idle), then, fault-free, the continuity machine's drain and the idle audit."""
        if hasattr(self, "faults") and not self.broken:
            if not self.sched.submitted:  # an example that sent nothing sends one request into its faults
                self.sched.submit([1, 2, 3], 2)
            for sid in list(self.sched.sessions):
                if not self.refused:
                    self.sched.close_session(sid)
            for _ in range(DRAIN):
                if self.refused or self.sched.idle or not (self.faults.armed or self.faults.later or self.faults.plan):
                    break
                self.sched.step()
                if not self.refused:
                    self.every_slot_accounted_for()
                    self.continuity()
        if hasattr(self, "faults"):
            self.faults.armed, self.faults.later, self.faults.plan = [], [], []  # what a fault left must come out right
        if self.refused:
            self.broken = True  # checked when it broke: nothing more to drain
        super().teardown()


class CachedFaultMachine(FaultMachine, CachedContinuityMachine):
    """The fault machine with the prefix cache on (its moves faulted too), follow-ups and groups."""

    settings_override = {"prefix_cache": True}

    @initialize(**_scheduler_draws([3, 2, 4, 1], GROUP_FEATURES))
    def setup(self, slots, overlap, budget, chunk, max_running, retract_after, features):
        CachedSchedulerMachine.setup(self, slots, overlap, budget, chunk, max_running, retract_after, features)
        self._fault_the_pool()

    @initialize(plan=plans(POOL_CALLS))
    def plan_faults(self, plan):
        FaultMachine.plan_faults(self, plan)

    @precondition(lambda self: hasattr(self, "sched") and self.bases and not self.refused)
    @rule(data=st.data(), extra=st.integers(0, 63), new=st.integers(1, 4))
    @marks_broken
    def follow_up(self, data, extra, new):
        """`CachedSchedulerMachine.follow_up`, stopping if a fault on the way broke the scheduler."""
        base = data.draw(st.sampled_from(self.bases[::-1]), label="continues")
        for _ in range(12):
            if base.done or self.refused:
                break
            self.sched.step()
        if not self.refused:
            rid = self.sched.submit(list(base.prompt) + list(base.output) + [extra], new)
            self.bases.append(self.sched.requests[rid])


def refusals(sched) -> list:
    """Every public call, as (name, thunk): a broken scheduler refuses each."""
    return [
        ("step", sched.step),
        ("run", sched.run),
        ("open_session", sched.open_session),
        ("submit", lambda: sched.submit([1], 1)),
        ("submit_n", lambda: sched.submit_n([1, 2], 1, 2)),
        ("abort", lambda: sched.abort(0)),
        ("close_session", lambda: sched.close_session(1001)),
        ("flush_cache", sched.flush_cache),
    ]
