"""`check-trace` reads each move from the compiled declaration (`slotwarden/cli/trace/moves.py`),
and that changes nothing it reports: on random traces (legal moves, illegal ones, raw frees, wrong
actor kinds, missing targets, bad ids) the report equals the one of a replay that asks the model's
`step` and `free_rule` for every move, as the checker did before it read the table."""

from __future__ import annotations

import random

import pytest

from slotwarden.cli.trace import check as check_trace
from slotwarden.cli.trace import moves as trace_moves
from slotwarden.cli.trace import replay as trace_replay
from slotwarden.model.errors import LifecycleError
from slotwarden.model.free import free_rule
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.step import step
from slotwarden.model.vocabulary import FREE_SLOT, NOBODY, Actor, ActorKind, Event
from slotwarden.runtime.trace import FREE, TraceLine

CAPACITY = 4


def _legal(rec, event, actor, target, epoch) -> bool:
    try:
        fired = free_rule(rec, actor).event if event == FREE else event
        step(rec, fired, actor, target, epoch)
    except LifecycleError:
        return False
    return True


def _trace(seed: int, n: int = 400) -> list:
    """A random walk: mostly a legal move of a random slot, sometimes any line at all."""
    rng, slots, out = random.Random(seed), {}, []
    kinds = [LIFECYCLE.event(e).actor for e in Event]
    for lineno in range(1, n + 1):
        epoch = lineno // 3
        for _ in range(40):
            i = rng.randint(1, CAPACITY)
            event = rng.choice([*Event, FREE])
            kind = rng.choice(list(ActorKind)) if event == FREE or rng.random() < 0.05 else kinds[event]
            who = epoch + rng.randint(-1, 1) if kind is ActorKind.SCHEDULER else rng.randint(0, 3)
            target = rng.choice([NOBODY, 0, 1, 2, 3])
            line = TraceLine(epoch, event, (i,), Actor(kind, max(who, 0)), target)
            if _legal(slots.get(i, FREE_SLOT), event, line.actor, target, epoch):
                break
        if rng.random() < 0.1:  # junk ids: two slots, a repeat, the pad slot, past the pool
            line = line._replace(ids=rng.choice([(1, 2), (3, 3), (0,), (CAPACITY + 1,), (2, 1, 4)]))
        out.append((lineno, line))
        if _legal(slots.get(i, FREE_SLOT), line.event, line.actor, line.target, epoch) and line.ids == (i,):
            rec = slots.get(i, FREE_SLOT)
            fired = free_rule(rec, line.actor).event if line.event == FREE else line.event
            slots[i] = step(rec, fired, line.actor, line.target, epoch)
    return out


@pytest.fixture
def model_only(monkeypatch):
    """The replay with every compiled move taken away: each move is the model's own."""

    def switch(on: bool):
        if on:
            none = {e: m._replace(moves=[None] * len(m.moves)) for e, m in trace_replay._MOVES.items()}
            monkeypatch.setattr(trace_replay, "_MOVES", none)
            monkeypatch.setattr(trace_replay, "_FREES", {k: [None] * len(v) for k, v in trace_replay._FREES.items()})
        else:
            monkeypatch.undo()

    return switch


@pytest.mark.parametrize("seed", range(12))
def test_the_compiled_moves_report_what_the_model_reports(seed, model_only):
    lines = _trace(seed)
    fast = check_trace.check(lines, capacity=CAPACITY)
    model_only(True)
    slow = check_trace.check(lines, capacity=CAPACITY)
    model_only(False)
    assert fast == slow
    assert fast.illegal < len(lines) // 2 and len(fast.slots) == CAPACITY  # the walk moved every slot, mostly legally


def test_every_compiled_move_is_the_models_move():
    """Every record of every state with every relation, every event and a raw free: the table's
    move equals `step`'s, and where it has none the model refuses."""
    from slotwarden.runtime.ledger.tables import BITS, _realise
    from slotwarden.model.vocabulary import State

    moves, frees = trace_moves.compiled(), trace_moves.free_events()
    for state in State:
        for bits in range(BITS):
            for event in [*Event, FREE]:
                kinds = list(ActorKind) if event == FREE else [LIFECYCLE.event(event).actor]
                for kind in kinds:
                    rec, actor = _realise(state, bits, LIFECYCLE, kind)
                    k = trace_moves.key(rec, actor.id)
                    fired = frees[kind][k] if event == FREE else event
                    got = trace_moves.move(rec, moves[fired].moves[k], actor.id, 7, 9) if fired is not None else None
                    try:
                        want = step(rec, free_rule(rec, actor).event if event == FREE else event, actor, 7, 9)
                    except LifecycleError:
                        want = None
                    assert got == want, (state, bits, event, kind)
