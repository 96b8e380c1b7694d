"""Shared harness for the ledger's side-by-side path tests: hypothesis strategies of ledger calls
(`ops`, blind; `aimed_ops`, at what the ledger holds), `call` (one call's outcome as data), `state`
(every column, counter, the free list and the recorder), `variants` (one ledger per batch path)
and `first_difference` (where the per-slot ledger and the batch paths first disagree)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from slotwarden.model.errors import LifecycleError
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, State
from slotwarden.runtime.ledger import ledger_lane
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.verification.machines import paths

CAP = 8
SMALL = 3  # the switch-over size the switch-over and run-lane tests set
actors = st.builds(Actor, st.sampled_from(list(ActorKind)), st.integers(0, 3))
ids = st.lists(st.integers(-1, CAP + 1), min_size=0, max_size=CAP + 1)
ops = st.one_of(
    st.tuples(st.just("alloc"), st.integers(1, CAP), actors),
    st.tuples(
        st.just("apply"),
        st.sampled_from([e for e in Event if e is not Event.ALLOC]),
        actors,
        ids,
        st.sampled_from([NOBODY, 0, 1, 2]),
    ),
    st.tuples(
        st.just("apply"),
        st.sampled_from([e for e in Event if e is not Event.ALLOC]),
        actors,
        ids,
        st.sampled_from([NOBODY, 0, 1, 2]),
    ),
    st.tuples(
        st.just("each"),
        st.sampled_from([Event.ADMIT, Event.ROLLBACK, Event.FINISH, Event.RETRACT, Event.ABORT, Event.CLOSE]),
        ids,
        st.lists(st.integers(0, 3), min_size=0, max_size=CAP + 1),
    ),
    st.tuples(st.just("launch")),
    st.tuples(st.just("fence")),
)


def call(ledger: SlotLedger, op):
    """Run `op`; the outcome as comparable data."""
    try:
        if op[0] == "alloc":
            got = ledger.alloc(op[1], op[2])
        elif op[0] == "apply":
            ids = ledger.held_by(op[2]) if op[3] is None else np.array(op[3], dtype=np.int64)
            got = ledger.apply(op[1], ids, op[2], op[4])
        elif op[0] == "each" and op[2] is None:  # every slot requests 0 and 1 hold, each by its holder (or not)
            held = [(int(s), r ^ op[3]) for r in (0, 1) for s in ledger.held_by(Actor.request(r))]
            ids = np.array([s for s, _ in held] or [1], dtype=np.int64)
            got = ledger.apply_each(op[1], ids, np.array([r for _, r in held] or [0], dtype=np.int64))
        elif op[0] == "each":  # one actor per slot (ids and actors cut to one length)
            ids = np.array(op[2], dtype=np.int64)
            got = ledger.apply_each(
                op[1], ids, np.array(op[3][: ids.size] + [0] * (ids.size - len(op[3])), dtype=np.int64)
            )
        elif op[0] == "launch":
            got = ledger.launch()
        else:
            c, step = ledger.cols, ledger.finished_steps()
            scan = np.flatnonzero((c.state == int(State.RELEASED)) & (c.fence <= step))  # what a fence must free
            got = ledger.fence()
            assert got.tolist() == scan.tolist(), f"the fence freed {got.tolist()}, a scan finds {scan.tolist()}"
    except LifecycleError as err:
        return ("raised", type(err).__name__, str(err))
    return ("ok", None if got is None else np.asarray(got).tolist())


def state(ledger: SlotLedger):
    snap = ledger.snapshot()
    recorded = [
        (
            e.seq,
            e.event,
            e.actor,
            e.target,
            e.epoch,
            e.ids.tolist(),
            np.broadcast_to(e.before, e.ids.shape).tolist(),
            e.after.tolist(),
        )
        for e in ledger.recorder.entries
    ]
    columns = {k: v.tolist() for k, v in snap.items() if k != "counters"}
    return columns, snap["counters"], ledger.free_list().tolist(), recorded


def variants(small: int = 0, run_min: int = 2) -> list[SlotLedger]:
    """One ledger per path (`small`: where each switches to its batch path; `run_min`: where
    the numpy run lane starts): the compiled move with its run loops, the compiled move a slot
    at a time, the numpy path with its run lane, the numpy path with gathers only."""
    ledgers = [SlotLedger(CAP) for _ in range(4)]
    for ledger, path in zip(ledgers, ("compiled", "compiled slot by slot", "numpy", "numpy")):
        paths.use(ledger, path)
        ledger.small = small
    ledgers[2].run_min, ledgers[3].run_min = run_min, CAP + 1  # the run lane for every run, or never
    return ledgers


def first_difference(program, breaks=None) -> str | None:
    """Where a per-slot ledger and one of each batch path (`variants`: compiled, compiled a slot
    at a time, numpy with the run lane, numpy with gathers) first disagree on `program` (None:
    never). `breaks(slots, vectors)`, if given, breaks the per-slot or the numpy-run one first
    (to show that this can fail)."""
    slots = SlotLedger(CAP)
    ledger_lane.unbind(slots)  # the Python, a slot at a time
    slots.small = CAP + 1
    ledgers = [slots, *variants()]
    if breaks is not None:
        breaks(slots, ledgers[3])
    names = ("per-slot", "compiled", "compiled a slot at a time", "numpy run lane", "numpy gathers")
    for i, op in enumerate(program):
        got = [call(ledger, op) for ledger in ledgers]
        if any(g != got[0] for g in got):
            return f"op {i} {op}: " + ", ".join(f"{n} {g}" for n, g in zip(names, got))
        states = [state(ledger) for ledger in ledgers]
        if any(st_ != states[0] for st_ in states):
            return f"op {i} {op}: the ledgers differ after it"
    return None


# ops aimed at what the ledger holds: `None` ids mean every slot the actor holds when the op runs
requests, sessions = st.builds(Actor.request, st.integers(0, 1)), st.builds(Actor.session, st.integers(0, 1))
allocs = st.tuples(st.just("alloc"), st.integers(1, 3), requests)
aimed_ops = st.one_of(
    allocs,
    allocs,
    allocs,
    st.tuples(
        st.just("apply"),
        st.sampled_from([Event.ADMIT, Event.ROLLBACK, Event.FINISH, Event.RETRACT, Event.ABORT]),
        requests,
        st.none(),
        st.just(NOBODY),
    ),
    st.tuples(st.just("apply"), st.just(Event.PARK), requests, st.none(), st.integers(0, 1)),
    st.tuples(st.just("apply"), st.just(Event.LEND), sessions, st.none(), st.integers(0, 1)),
    st.tuples(st.just("apply"), st.just(Event.CLOSE), sessions, st.none(), st.just(NOBODY)),
    st.tuples(
        st.just("each"),
        st.sampled_from([Event.ADMIT, Event.ROLLBACK, Event.FINISH, Event.RETRACT, Event.ABORT]),
        st.none(),
        st.sampled_from([0, 0, 1]),  # 1: each slot named with the other request (to be refused)
    ),
    st.tuples(st.just("launch")),
    st.tuples(st.just("fence")),
)
