"""A launched step's check on each lane, the words of refusals, and the predicates and
conversions around them, each against what it must say:
- `declare` takes states only as `State` members: plain-int states (initial, rules) are refused;
- an error shows a long bad value in its first 60 characters and its length; an illegal step
  names its row's actor (or "a pad row") and the slot's holder;
- `runtime.launch.check_step`, compiled (where built) and numpy: distinct writes and an empty
  step pass, a slot written twice is refused at the second row, float ids are refused, pad rows
  and ids off the pool warn nothing; a write set of pad rows only refuses every request row;
- more than 256 actor ids are one per slot; a contiguous batch longer than the pool is refused
  by its length, before its actors are read;
- the pool's history of a slot is its ledger's; an illegal copy from a lent slot names the loan;
- the properties on hand-built moves: a lend to another request, an owner handed to a third
  party, a free list naming a held slot, an eviction fenced later than the step in flight.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from slotwarden.model import properties as P
from slotwarden.model.declaration import declare
from slotwarden.model.errors import BadInput, DeclarationError, IllegalCopy, IllegalStep
from slotwarden.model.lifecycle import EVENTS, LIFECYCLE, RULES, STATES
from slotwarden.model.vocabulary import NOBODY, PAD_SLOT, Actor, Event, Slot, State
from slotwarden.model.write_set import Fill, RowKind, RowSpec, declare_write_set
from slotwarden.runtime import launch_compiled as compiled
from slotwarden.runtime.launch import Tables, check_step
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.verification.edges.write_set import running

R1, R2, R7 = Actor.request(1), Actor.request(2), Actor.request(7)
S6 = Actor.session(6)
PAD_ROWS_ONLY = Tables(
    declare_write_set(
        LIFECYCLE, (RowSpec(RowKind.PAD, None, pad_only=True),), PAD_SLOT, (Fill.ZEROED, Fill.COPIED, Fill.WRITTEN)
    ),
    LIFECYCLE,
)


def problems() -> list[str]:
    return _declared_members() + _value_words() + _steps() + _sizes() + _pool_words() + _properties()


# -- the declaration ---------------------------------------------------------------------------
def _declared_members() -> list[str]:
    plain_rules = tuple(r.__class__(int(r.source), r.event, r.by, int(r.dest), r.effect, r.why) for r in RULES)
    cases = (
        ("an initial state given as the plain int 0", STATES, RULES, 0),
        ("rules naming their states by plain ints", STATES, plain_rules, State.FREE),
    )
    out = []
    for what, states, rules, initial in cases:
        try:
            declare("plain ints", states, EVENTS, rules, initial)
        except DeclarationError:
            continue
        out.append(f"a lifecycle with {what} is accepted (declare takes State members only)")
    return out


# -- words ---------------------------------------------------------------------------------------
def _value_words() -> list[str]:
    """A bad value's words: its first 60 characters, then how long it was."""
    value = "x" * 100
    want = "bad count '" + "x" * 59 + "... (100 characters)"
    try:
        SlotLedger(4).alloc(value, R1)
    except BadInput as e:
        if want not in str(e):
            return [f"a count of 100 characters is shown as {str(e)[:120]!r}, not in its first 60 and its length"]
        return []
    return ["an alloc of a 100-character string is not refused as a BadInput"]


@dataclass(frozen=True)
class Step:
    """A step over `running()` and what the check must do: None (pass), or the refusal's type,
    its row, slot and words."""

    what: str
    slots: tuple
    actors: tuple
    want: tuple | None
    tables: Tables | None = None


STEPS = (
    Step("two distinct writes by their holder", (1, 2), (1, 1), None),
    Step("one write and a pad row", (1, 0), (1, NOBODY), None),
    Step("a pad row and a write", (0, 3), (NOBODY, 1), None),
    Step("an empty step", (), (), None),
    Step("a slot written twice", (1, 1), (1, 1), (IllegalStep, 1, 1, ("row 1 (request 1)", "row 0 writes it too"))),
    Step(
        "a write of another request's slot",
        (2,),
        (2,),
        (IllegalStep, 0, 2, ("row 0 (request 2) on slot 2", "held by request 1, state RUNNING")),
    ),
    Step("a pad row off the pad slot", (1, 3), (1, NOBODY), (IllegalStep, 1, 3, ("row 1 (a pad row) on slot 3",))),
    Step("an id before the pool", (-1,), (1,), (IllegalStep, 0, -1, ("row 0 (request 1) on slot -1",))),
    Step("float ids", (1.0,), (1,), (BadInput, None, None, ("a 1-D batch of integers",))),
    Step("pad rows only, on a write set of pad rows", (0, 0), (NOBODY, NOBODY), None, PAD_ROWS_ONLY),
    Step(
        "a request row, on a write set of pad rows",
        (0, 1),
        (NOBODY, 1),
        (IllegalStep, 1, 1, ("no row of kind", "is declared")),
        PAD_ROWS_ONLY,
    ),
    Step(
        "a pad row off the pad slot, on a write set of pad rows",
        (3,),
        (NOBODY,),
        (IllegalStep, 0, 3, ("a pad row",)),
        PAD_ROWS_ONLY,
    ),
)


def _steps() -> list[str]:
    """Each step on the compiled check (where built) and on the numpy one."""
    out = []
    for lane in ("compiled", "numpy") if compiled.AVAILABLE else ("numpy",):
        was = compiled.AVAILABLE
        compiled.AVAILABLE = lane == "compiled"
        try:
            out += [f"{lane}: {p}" for s in STEPS for p in _judge(s)]
        finally:
            compiled.AVAILABLE = was
    return out


def _judge(s: Step) -> list[str]:
    pool = running()
    extra = {} if s.tables is None else {"tables": s.tables}
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        try:
            check_step(pool, list(s.slots), list(s.actors), PAD_SLOT, **extra)
            got = None
        except Exception as e:  # noqa: BLE001 (a refusal of the wrong type is a problem, named below)
            got = e
    out = [f"{s.what}: the check warns {str(w.message)!r}" for w in caught[:1]]
    if s.want is None:
        return out + ([] if got is None else [f"{s.what} is refused ({type(got).__name__}): {str(got)[:150]}"])
    kind, row, slot, words = s.want
    if not isinstance(got, kind):
        return out + [f"{s.what} is not refused as {kind.__name__} ({'passed' if got is None else type(got).__name__})"]
    if kind is IllegalStep and (got.row, got.slot_id) != (row, slot):
        out.append(f"{s.what} is refused at row {got.row}, slot {got.slot_id}, not row {row}, slot {slot}")
    missing = [w for w in words if w not in str(got)]
    if missing:
        out.append(f"{s.what} is refused without the words {missing}: {str(got)[:150]}")
    if kind is IllegalStep and got.slot is not None and s.tables is None:
        holder = R1 if got.slot.owner == 1 else None
        if got.holder != holder:
            out.append(f"{s.what}: the refusal names holder {got.holder}, not {holder}")
    return out


# -- sizes ---------------------------------------------------------------------------------------
def _sizes() -> list[str]:
    out = []
    ledger = SlotLedger(300)
    try:
        ids = ledger.alloc_each(np.arange(1, 301))
    except BadInput as e:
        ids, out = None, [f"alloc_each of 300 requests (an array) on 300 free slots is refused: {str(e)[:120]}"]
    if not out and (ids is None or len(set(ids.tolist())) != 300):
        out.append("alloc_each of 300 requests (an array) on 300 free slots does not hand out 300 slots")
    ledger = SlotLedger(4)
    ledger.alloc(4, R1)
    try:  # the ids' length is read first: their actors are read only for a batch that fits
        ledger.apply_each(Event.ADMIT, np.arange(1, 6), [1])
        out.append("an admit_each of 5 ids (an int64 array) on a pool of 4 is accepted")
    except BadInput as e:
        if "a batch of 5 ids, more than the 4 slots" not in str(e):
            out.append(f"an admit_each of 5 ids (an int64 array) on a pool of 4 is not refused by its length: {e}")
    return out


# -- the pool's words ------------------------------------------------------------------------
def _pool_words() -> list[str]:
    """Slot 5 of `running()` is session 6's, lent to request 7; slot 6 cached, locked by request 1."""
    pool, out = running(), []
    for _ in range(5):
        pool.lock([6], R2)
        pool.unlock([6], R2)
    mine, ledgers = pool.history(6), pool.ledger.recorder.history(6)
    if mine != ledgers:
        out.append(f"the pool's history of slot 6 has {len(mine)} moves, its ledger's {len(ledgers)}")
    try:
        pool.fork(5, Actor.request(9))
        out.append("a fork of slot 5 (lent to request 7) by request 9 is accepted")
    except IllegalCopy as e:
        if "(held by session 6, lent to request 7)" not in str(e):
            out.append(f"a fork of a lent slot by another request does not name the loan: {str(e)[:150]}")
    return out


# -- the properties --------------------------------------------------------------------------
@dataclass(frozen=True)
class Judged:
    """A property on hand-built records, and what it must say."""

    what: str
    holds: Callable[[], bool]
    want: bool


PARKED, LEND = Slot(State.PARKED, 6), Event.LEND
CACHED = Slot(State.CACHED, 3)
JUDGED = (
    Judged("authority: a lend to request 7", lambda: P.authority(PARKED, LEND, S6, 7, Slot(State.LENT, 6, 7)), True),
    Judged(
        "authority: a lend to request 7 that leaves the slot lent to request 9",
        lambda: P.authority(PARKED, LEND, S6, 7, Slot(State.LENT, 6, 9)),
        False,
    ),
    Judged(
        "handles_follow: a lend that keeps the owner",
        lambda: P.handles_follow(PARKED, LEND, S6, 7, Slot(State.LENT, 6, 7)),
        True,
    ),
    Judged(
        "handles_follow: a lend that hands the slot to session 9",
        lambda: P.handles_follow(PARKED, LEND, S6, 7, Slot(State.LENT, 9, 7)),
        False,
    ),
    Judged("conserved: a free list of the free slots", lambda: P.conserved((Slot(State.FREE),) * 2, (1, 2)), True),
    Judged(
        "conserved: a free list naming a taken slot too",
        lambda: P.conserved((Slot(State.FREE), Slot(State.TAKEN)), (1, 2)),
        False,
    ),
    Judged(
        "evict_unlocked: an eviction fenced at the step in flight",
        lambda: P.evict_unlocked(CACHED, Slot(State.RELEASED, fence=3), 3),
        True,
    ),
    Judged(
        "evict_unlocked: an eviction fenced after the step in flight",
        lambda: P.evict_unlocked(CACHED, Slot(State.RELEASED, fence=5), 3),
        True,
    ),
    Judged(
        "evict_unlocked: an eviction fenced before the step in flight",
        lambda: P.evict_unlocked(CACHED, Slot(State.RELEASED, fence=2), 3),
        False,
    ),
)


def _properties() -> list[str]:
    return [f"{j.what} is judged {not j.want}" for j in JUDGED if j.holds() is not j.want]
