"""The scheduler's fault contract, and the guard every public call of it runs in.

After any exception (`BaseException` included) raised anywhere in a call, the scheduler is:
- consistent: a fault raised by a call below (the pool, a hook) leaves the work as data (results
  to process, requests to release, sessions to close) and the next `step()` does it first;
  after a pool call moved a slot, the scheduler takes the pool's word (`recorded`);
- or the forward pass raised once the model was called: its requests end ("step N failed");
- or broken, the fault propagating once, then `SchedulerBroken` naming it for every call: the
  pool and the handles disagree (the audit, which also finds a batch half-written), or the
  fault struck between two statements of the scheduler's own bookkeeping (`bookkeeping_line`).
Interrupts by design: a real SIGINT is deferred to the call's boundary (`signals.py`), so a
Ctrl-C never lands mid-bookkeeping; an interrupter with a Python frame registers itself.
Never tokens different from a fault-free run (docs/contracts.md; tests/runtime/scheduler/).
"""

from __future__ import annotations

import functools
import os

from slotwarden.model.errors import SlotwardenError

from slotwarden.runtime.scheduler.errors import (
    BadRequest,
    NoSessionState,
    SchedulerBroken,
    SessionBusy,
    SessionClosed,
    UnknownRequest,
    UnknownSession,
)


_NOTHING = object()  # no value returned yet

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
        sigint = sched._sigint
        depth, out = sigint.depth, _NOTHING
        try:  # one try from the call to its return: no line between them can lose what it returned
            sigint.enter()
            out = call(sched, *args, **kwargs)
            sigint.leave(deliver=True)  # a SIGINT noted meanwhile is raised here, at the boundary
            return out
        except BaseException as exc:
            if sigint.depth > depth:  # entered and not yet left
                sigint.leave(deliver=False)
            if out is not _NOTHING:
                sched.outbox[:0] = returned(out)  # what the call returned goes back to the outbox
            judge(sched, exc, call.__name__)
            raise

    return run_guarded


def returned(out) -> list:
    """The Results a call returned (`step()`'s report, `run()`'s dict), to keep them."""
    if isinstance(out, dict):
        return list(out.values())
    return list(getattr(out, "finished", ()))


def judge(sched, exc: BaseException, where: str) -> None:
    """The scheduler stays usable only if nothing critical was under way and every handle
    agrees with the pool; otherwise it is broken for good (`SchedulerBroken`, caused by `exc`)."""
    if isinstance(exc, (SchedulerBroken, *REFUSALS)) or sched._broken is not None:
        return
    if getattr(exc, "at_boundary", False):  # a deferred SIGINT, raised between two steps
        return
    problems = [f"it struck while {sched._critical}"] if sched._critical else []
    line = bookkeeping_line(exc)
    if line:
        problems.append(f"it struck at {line}, between two statements of the scheduler's own bookkeeping")
    sched._critical = None
    try:
        problems += owner_problems(sched) + handle_problems(sched)
    except BaseException as again:  # noqa: BLE001 - the check itself failed: trust nothing
        problems.append(f"checking the pool raised {again!r}")
    if problems:
        broken = SchedulerBroken(
            f"the scheduler is broken: {exc!r} in {where}() left it out of step with the pool "
            f"({'; '.join(problems)}); it refuses every further call"
        )
        broken.__cause__ = exc
        sched._broken = broken


BOOKKEEPING = tuple(
    os.path.join(os.path.dirname(os.path.dirname(__file__)), d) + os.sep for d in ("scheduler", "radix")
)
OWN = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), d) + os.sep
    for d in ("model", "runtime", "kernels")
)
FROM_BELOW = (os.path.join(os.path.dirname(__file__), "forward.py"),)  # the forward pass: `_launch` judges it


def bookkeeping_line(exc: BaseException) -> str:
    """Where `exc` struck ("file:line"), if between two statements of the scheduler's (or its
    prefix cache's) own bookkeeping: the last of slotwarden's frames in its traceback is one of
    theirs, and nothing was called from it but a trace function or a signal handler (a fault
    raised by a call below, to the pool or a hook, is one the recovery is written for). Empty
    for a fault raised on purpose (a `SlotwardenError`; a `StepFailed` is judged by its cause)."""
    if isinstance(exc, SlotwardenError):
        exc = exc.__cause__ if isinstance(exc.__cause__, BaseException) else exc
        if isinstance(exc, SlotwardenError):
            return ""
    tb, last = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(OWN):
            last = tb
        tb = tb.tb_next
    if last is None or not last.tb_frame.f_code.co_filename.startswith(BOOKKEEPING):
        return ""
    if last.tb_frame.f_code.co_filename in FROM_BELOW:
        return ""
    if last.tb_next is not None and last.tb_next.tb_frame.f_code not in _interrupters(last.tb_frame):
        return ""  # raised by a call below
    return f"{os.path.basename(last.tb_frame.f_code.co_filename)}:{last.tb_lineno}"


def _interrupters(frame) -> set:
    """The code of what raises into a frame without being called by it: the trace functions and
    Python signal handlers registered with `interrupter` (Python's own SIGINT handler has no
    frame: the interrupted statement is then the innermost frame)."""
    return INTERRUPTERS


INTERRUPTERS: set = set()


def interrupter(fn):
    """Register `fn` (a trace function, a signal handler) as one that raises into the frame it
    interrupts: a fault it raises at a bookkeeping line breaks the scheduler. Returns `fn`."""
    INTERRUPTERS.add(getattr(fn, "__func__", fn).__code__)
    return fn


def owner_problems(sched) -> list:
    """The pool's integrity problems, and each held slot whose owner is not live (a batch write
    interrupted between two slots' columns leaves one); a release not yet fenced is no problem."""
    live_requests = {r.rid for r in sched.requests.values() if r.slot is not None}
    live_nodes = set(sched.prefix.tree.holding().values()) if sched.prefix is not None else None
    audit = sched.pool.audit(live_requests, set(sched.sessions), live_nodes)
    spec = sched.pool.ledger.lifecycle.spec
    lost = [f"slot {k.slot}: {k.state.name}, owner {k.owner}" for k in audit.leaks if not spec(k.state).fenced]
    return list(audit.problems) + lost


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
