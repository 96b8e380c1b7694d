"""The scheduler's fault contract, and the guard every public call of it runs in.

After any exception (`BaseException` included) raised anywhere in a call, the scheduler is:
- consistent, nothing lost: the work left is held as data (results to process, requests to
  release, sessions to close) and the next `step()` does it first, so outputs equal a fault-free
  run's; after a pool call moved a slot, the scheduler takes the pool's word (`recorded`);
- or the forward pass raised once the model was called: its requests end ("step N failed"),
  an `Exception` raised as `StepFailed`, a `BaseException` as itself; the others go on exactly;
- or broken (the pool moved but the scheduler could not record it): the fault propagates
  once, then every call raises `SchedulerBroken` naming it.
It never continues with tokens different from a fault-free run (docs/contracts.md).
"""

from __future__ import annotations

import functools

from slotwarden.runtime.scheduler.errors import (
    BadRequest,
    NoSessionState,
    SchedulerBroken,
    SessionBusy,
    SessionClosed,
    UnknownRequest,
    UnknownSession,
)


# raised before anything changes
REFUSALS = (BadRequest, SessionClosed, UnknownRequest, UnknownSession, SessionBusy, NoSessionState)


def guarded(call):
    """A public call: refused once the scheduler is broken, and from a thread other than its
    pool's (`WrongThread`, before anything changes: the scheduler stays usable from its own
    thread); a fault inside it is judged by the contract (consistent, or broken from now on)
    before it propagates."""

    @functools.wraps(call)
    def run_guarded(sched, *args, **kwargs):
        if sched._broken is not None:
            raise sched._broken
        sched.pool.ledger.check_thread()  # the pool's thread check: a refusal, never judged
        try:
            return call(sched, *args, **kwargs)
        except BaseException as exc:
            judge(sched, exc, call.__name__)
            raise

    return run_guarded


def judge(sched, exc: BaseException, where: str) -> None:
    """The scheduler stays usable only if nothing critical was under way and every handle
    agrees with the pool; otherwise it is broken for good (`SchedulerBroken`, caused by `exc`)."""
    if isinstance(exc, (SchedulerBroken, *REFUSALS)) or sched._broken is not None:
        return
    problems = [f"it struck while {sched._critical}"] if sched._critical else []
    sched._critical = None
    try:
        problems += list(sched.pool.audit().problems) + handle_problems(sched)
    except BaseException as again:  # noqa: BLE001 - the check itself failed: trust nothing
        problems.append(f"checking the pool raised {again!r}")
    if problems:
        broken = SchedulerBroken(
            f"the scheduler is broken: {exc!r} in {where}() left it out of step with the pool "
            f"({'; '.join(problems)}); it refuses every further call"
        )
        broken.__cause__ = exc
        sched._broken = broken


def handle_problems(sched) -> list:
    """Where a live request's or session's handle disagrees with what the pool says it holds."""
    from slotwarden.model.vocabulary import Actor

    problems = sched.prefix.problems(sched.requests) if sched.prefix is not None else []
    for s in sched.sessions.values():
        held = set(sched.pool.held_by(Actor.session(s.sid)).tolist())
        if held != ({s.slot} if s.slot is not None else set()):
            problems.append(f"session {s.sid} thinks it holds {s.slot}, the pool says {sorted(held)}")
    for r in sched.requests.values():
        held = set(sched.pool.held_by(Actor.request(r.rid)).tolist())
        if held != ({r.slot} if r.slot is not None else set()):
            problems.append(f"request {r.rid} thinks it holds {r.slot}, the pool says {sorted(held)}")
    return problems


def recorded(call, moved, record) -> None:
    """A pool call, then the scheduler's record of its move. If the call raises, the pool's
    word is taken: `record()` runs when `moved()` says the pool moved before the fault struck
    (it refuses all or nothing), and the fault goes on."""
    try:
        call()  # the pool moves first: if it refuses, nothing here changed
    except BaseException:
        if moved():
            record()  # the pool moved before the fault struck: record it
        raise
    record()


def audit_failure(audit, problems: list) -> str:
    """The idle audit's failure in words (empty if it passed): the pool's problems and the
    handles' (`problems`), then each leaked slot with its state, owner, last event and history."""
    leaks = [
        f"slot {leak.slot}: {leak.state.name}, owner {leak.owner}, "
        f"left there by {leak.last_event.name.lower()}\n{leak.history}"
        for leak in audit.leaks
    ]
    lines = list(audit.problems) + problems + leaks
    return "idle audit failed:\n" + "\n".join(lines) if lines else ""
