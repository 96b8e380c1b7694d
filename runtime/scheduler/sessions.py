"""A streaming session between turns, as functions of the session: what its state has consumed
(the transcript), what its next turn feeds, and the state it gives out.

A turn runs on its session's slot (lent) or, for a session with none yet, on a fresh slot it
parks when it finishes. A turn that ended mid-way (aborted, retracted, failed) leaves the
session *stale*: its partial state is never a checkpoint, and the next turn zeroes the slot and
feeds the whole transcript again before its own tokens.
"""

from __future__ import annotations

from slotwarden.runtime.scheduler.errors import NoSessionState, SessionBusy, SessionClosed
from slotwarden.runtime.scheduler.request import SessionState, SessionStatus


def turn_finished(s, req) -> None:
    """Session `s`'s turn `req` finished: a fresh slot is parked (the session's now), and the
    transcript gains what the turn fed and made; its last token is pending (not yet fed)."""
    if not req.lent:
        s.slot = req.slot
    s.transcript = s.transcript + s.pending + req.prompt + req.output[:-1]
    s.pending = req.output[-1:]
    s.stale = False


def turn_input(s, req, tokens: list) -> None:
    """What turn `req` of session `s` feeds: what the session's state lacks, then `tokens`. A
    state lost or untrustworthy (stale) is fed again from zero: the whole transcript first."""
    req.refeeds = s.stale or s.slot is None
    req.input = (s.transcript if req.refeeds else []) + s.pending + tokens


def state_between_turns(pool, sid: int, s) -> SessionState:
    """Session `s` (id `sid`, None if it is not in the tables)'s conv and SSM state, as copies.
    Refuses, changing nothing: a session closed or closing (`SessionClosed`), one whose slot is
    lent to its turn (`SessionBusy`: the turn writes it in place), one with no state to give
    (`NoSessionState`: no turn has finished yet, or the last one ended mid-way)."""
    if s is None or s.status is not SessionStatus.OPEN:
        raise SessionClosed(f"session {sid} is {'closing' if s else 'closed'}: its slot is released")
    if s.slot is None:
        raise NoSessionState(f"session {sid} has no state yet: none of its turns has finished")
    state = pool.state_of([s.slot])[0]
    if pool.ledger.lifecycle.spec(state).lent:
        borrower = pool.ledger.record(s.slot).borrower
        raise SessionBusy(f"session {sid}'s slot {s.slot} is {state.name}: lent to its turn, request {borrower}")
    if s.stale:
        raise NoSessionState(f"session {sid}'s state is stale: its last turn ended mid-way, the next one rebuilds it")
    conv, ssm = pool.conv[0][:, s.slot].clone(), pool.ssm[:, s.slot].clone()  # copies, no sync
    return SessionState(conv, ssm, tuple(s.transcript))


def parked_words(waiting, sessions: dict, capacity: int, timeout) -> str:
    """For `run()`'s error: requests waiting while sessions park slots between turns."""
    parked = sorted((s.sid, s.slot) for s in sessions.values() if s.slot is not None and s.turn is None)
    if not waiting or not parked:
        return ""
    sids, slots = [sid for sid, _ in parked], [slot for _, slot in parked]
    return (
        f": requests {[r.rid for r in waiting][:8]} wait while sessions {sids} park slots {slots} "
        f"between turns ({len(slots)} of {capacity}); closing them (close_session) frees their "
        "slots, and so does SchedulerConfig(session_timeout=N), which closes a session idle for N steps"
        + (f" (now {timeout})" if timeout is not None else " (now None: never)")
    )


def due_to_close(sessions: dict, timeout) -> list:
    """The sessions to close now: each whose close a fault interrupted (CLOSING), and each open
    one idle past `timeout` steps (None: never); an idle open session counts one more step."""
    due = []
    for s in list(sessions.values()):
        if s.turn is not None or s.turns:
            continue
        if s.status is SessionStatus.CLOSING:
            due.append(s)
        elif s.status is SessionStatus.OPEN:
            s.idle_steps += 1
            if timeout is not None and s.idle_steps > timeout:
                due.append(s)
    return due
