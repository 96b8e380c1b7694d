"""Arbitrary batches of events against a small StatePool, checked after every call against the
pure reference pool (`slotwarden.model.pool`): either the call succeeded and the model agrees
slot by slot and on the free list order, or it raised a typed lifecycle error (the same one the
model raises) and nothing changed at all."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slotwarden.model import pool as M
from slotwarden.model.errors import BadActor, BadInput, BadSlotId, FenceError, IllegalMove, LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.properties import conserved, exclusive, holdings
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, State
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.pool import StatePool
from slotwarden.verification.machines import paths

CAP = 5
CFG = PoolConfig(num_slots=CAP, layers=1, conv_dims=(2,), conv_kernel=2, heads=1, head_dim=1, state_size=2)

actors = st.builds(Actor, st.sampled_from(list(ActorKind)), st.integers(0, 3))
# mostly the actors that can act on what they hold, sometimes anyone
likely_actors = st.one_of(
    st.builds(Actor.request, st.integers(0, 3)),
    st.builds(Actor.session, st.integers(0, 2)),
    st.builds(Actor.cache, st.integers(0, 3)),
    actors,
)
real_ids = st.lists(st.integers(1, CAP), min_size=1, max_size=CAP, unique=True)
any_ids = st.lists(st.integers(-2, CAP + 2), max_size=CAP + 2)  # 0, -1, out of range, duplicates, empty
float_ids = st.lists(st.sampled_from([1.0, 2.0, 0.5, -1.0]), min_size=1, max_size=3)
id_lists = st.one_of(real_ids, real_ids, real_ids, any_ids, float_ids)
forms = st.sampled_from(["list", "tuple", "int64", "int32", "numpy", "bool"])
targets = st.sampled_from([NOBODY, 0, 1, 2, 3])

ops = st.one_of(
    st.tuples(st.just("alloc"), st.integers(-1, CAP + 1), likely_actors),
    st.tuples(st.just("fire"), st.sampled_from(list(Event)), likely_actors, id_lists, forms, targets),
    st.tuples(st.just("fire"), st.sampled_from(list(Event)), likely_actors, id_lists, forms, targets),
    st.tuples(st.just("launch")),
    st.tuples(st.just("fence"), st.one_of(st.none(), st.integers(-1, 6))),
    st.tuples(st.just("close"), likely_actors),
)


def runtime_ids(values: list, form: str):
    """`values` in the form an engine might hand them over."""
    if form == "list":
        return list(values)
    if form == "tuple":
        return tuple(values)
    if form == "bool":
        return torch.tensor([bool(v) for v in values], dtype=torch.bool)
    if all(isinstance(v, int) for v in values) and values:
        if form == "int64":
            return torch.tensor(values, dtype=torch.int64)
        if form == "int32":
            return torch.tensor(values, dtype=torch.int32)
        return np.array(values, dtype=np.int64)
    return torch.tensor(values, dtype=torch.float32) if values else torch.empty(0, dtype=torch.float32)


def model_ids(values: list, form: str) -> list:
    """What the model is told: the same values (a bool tensor is a batch of bools)."""
    return [bool(v) for v in values] if form == "bool" else list(values)


def records(pool: StatePool) -> tuple:
    return tuple(pool.ledger.record(i) for i in range(1, CAP + 1))


def frozen(pool: StatePool):
    return pool.ledger.snapshot(), [t.clone() for t in pool.tensors], pool.ledger.recorder.seq


def assert_unchanged(pool: StatePool, before) -> None:
    snap, tensors, seq = before
    now = pool.ledger.snapshot()
    assert now.keys() == snap.keys()
    for k, v in snap.items():
        assert (v == now[k]) if k == "counters" else torch.equal(v, now[k]), f"ledger {k} changed by a refused call"
    assert all(torch.equal(a, b) for a, b in zip(tensors, pool.tensors)), "state changed by a refused call"
    assert pool.ledger.recorder.seq == seq


def run_model(model: M.Pool, op, launched: int):
    """(new model, result) or (the model, the exception it raised)."""
    kind = op[0]
    try:
        if kind == "alloc":
            _, n, actor = op
            out = M.alloc(model, n, actor)
            return (model, None) if out is None else (out[0], list(out[1]))
        if kind == "fire":
            _, event, actor, values, form, target = op
            ids = model_ids(values, form)
            return M.apply(model, event, ids, actor, target, epoch=launched), list(ids)
        if kind == "launch":
            return model, launched + 1
        if kind == "fence":
            step = launched if op[1] is None else op[1]
            due = [
                i + 1 for i, s in enumerate(model.slots) if s.state.name == "RELEASED" and s.fence <= step
            ]  # freed, not published
            return M.fence(model, step), due
        if kind == "close":
            ids = sorted(holdings(model.slots, op[1]))
            if not ids:
                return model, []
            return M.apply(model, Event.CLOSE, ids, op[1], epoch=launched), ids
    except LifecycleError as e:
        return model, e
    raise AssertionError(op)


def run_runtime(pool: StatePool, op):
    kind = op[0]
    if kind == "alloc":
        out = pool.alloc(op[1], op[2])
        return None if out is None else out.tolist()
    if kind == "fire":
        _, event, actor, values, form, target = op
        return pool.fire(event, runtime_ids(values, form), actor, target).tolist()
    if kind == "launch":
        return pool.launch()
    if kind == "fence":
        return pool.fence(op[1]).tolist()
    if kind == "close":
        return pool.close(op[1]).tolist()
    raise AssertionError(op)


def runtime_only_refusal(op, launched: int, model_result) -> type | None:
    """The refusals the runtime adds to the model's. Before anything else, the validation of
    its arguments: an actor named NOBODY (-1; the model would let such a request take a slot
    nobody could release), a count or a fence step below what it takes. Then an alloc by id
    (the pool chooses the slots) and a fence for a step the device has not finished (every
    launched step finishes at once here), both after the id checks, which the model shares."""
    actor = op[2] if op[0] in ("alloc", "fire") else op[1] if op[0] == "close" else None
    if actor is not None and actor.id == NOBODY:
        return BadActor
    if (op[0] == "alloc" and op[1] < 1) or (op[0] == "fence" and op[1] is not None and op[1] < 0):
        return BadInput
    if isinstance(model_result, BadSlotId):
        return None
    if op[0] == "fire" and op[1] is Event.ALLOC:
        return BadSlotId
    if op[0] == "fire" and op[1] is Event.FENCE and op[2].kind is ActorKind.SCHEDULER and op[2].id > launched:
        return FenceError
    if op[0] == "fence" and op[1] is not None and op[1] > launched:
        return FenceError
    return None


def check_agreement(pool: StatePool, model: M.Pool, props: bool = True) -> None:
    got = records(pool)
    for i, (r, m) in enumerate(zip(got, model.slots), start=1):
        assert r == m, f"slot {i}: runtime {r}, model {m}"
    assert tuple(pool.ledger.free_list().tolist()) == model.free, "free list order differs"
    assert pool.available() == len(model.free)
    if props:  # both count owners: a slot taken by the id NOBODY names none
        assert conserved(got, tuple(pool.ledger.free_list().tolist()))
        assert all(exclusive(s) for s in got)
    audit = pool.audit()
    assert audit.free_list_ok and not audit.problems


def moves(pool: StatePool) -> set:
    """Every (state before, event, state after) the pool's recorder holds."""
    found = set()
    for e in pool.ledger.recorder.entries:
        before = np.broadcast_to(e.before, e.ids.shape)
        found |= {(State(int(b)), e.event, State(int(a))) for b, a in zip(before, e.after)}
    return found


RULE_MOVES = {(r.source, r.event, r.dest) for r in LIFECYCLE.rules}


@st.composite
def op_for(draw, model: M.Pool):
    """Mostly a batch aimed at what the pool holds: slots sharing one record, an event the
    lifecycle has a rule for from their state (mostly), fired by their owner or borrower
    (mostly), now and then with a stray id mixed in. Otherwise a blind op from `ops`."""
    if draw(st.sampled_from(["aimed"] * 3 + ["blind"])) == "blind":
        return draw(ops)
    held = [j for j in range(1, CAP + 1) if model.slots[j - 1].state is not State.FREE]
    if not held or draw(st.sampled_from(["held"] * 5 + ["alloc"])) == "alloc":
        return ("alloc", draw(st.integers(1, 3)), Actor.request(draw(st.integers(0, 3))))
    if draw(st.sampled_from(["one record"] * 4 + ["all it holds"])) == "all it holds":
        # what an engine does for a request or a session: one event on every slot it has a claim on
        rec = model.slots[draw(st.sampled_from(held)) - 1]
        owner_kind = LIFECYCLE.spec(rec.state).owner or ActorKind.REQUEST
        actor = Actor(owner_kind, rec.owner)
        if rec.borrower != NOBODY and draw(st.booleans()):
            actor = Actor.request(rec.borrower)
        ids = draw(st.permutations(sorted(holdings(model.slots, actor)) or [1]))
        event = draw(st.sampled_from(list(Event)))
        return ("fire", event, actor, ids, draw(forms), draw(st.sampled_from([0, 1, 2, 3, NOBODY])))
    # a state first, then a slot in it: the rarer, deeper states get their share of batches
    state = draw(st.sampled_from(sorted({model.slots[j - 1].state for j in held})))
    i = draw(st.sampled_from([j for j in held if model.slots[j - 1].state is state]))
    rec = model.slots[i - 1]
    same = [j for j in range(1, CAP + 1) if model.slots[j - 1] == rec and j != i]
    ids = [i] + (draw(st.lists(st.sampled_from(same), unique=True)) if same else [])
    ids = draw(st.permutations(ids))
    if draw(st.sampled_from([False] * 9 + [True])):
        ids.insert(draw(st.integers(0, len(ids))), draw(st.integers(-1, CAP + 1)))
    ruled = sorted({r.event for r in LIFECYCLE.rules_from(rec.state)})
    rnd = draw(st.randoms(use_true_random=False))  # uniform: sampled_from favours the first rule
    event = rnd.choice(ruled) if draw(st.sampled_from([True] * 4 + [False])) else draw(st.sampled_from(list(Event)))
    kind = LIFECYCLE.event(event).actor
    spec = LIFECYCLE.spec(rec.state)
    claims = [Actor(kind, rec.owner)] if spec.owner is not None else []
    claims += [Actor.request(rec.borrower)] if spec.lent else []
    claims += [Actor.fence(rec.fence + d) for d in (-1, 0, 1)] if spec.fenced else []
    aim = draw(st.sampled_from(["claim"] * 3 + ["any"])) == "claim" and claims
    actor = draw(st.sampled_from(claims) if aim else likely_actors)
    target = draw(st.sampled_from([0, 1, 2, 3, NOBODY]))
    return ("fire", event, actor, ids, draw(forms), target)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_runtime_agrees_with_the_model_or_changes_nothing(data):
    pool, model, launched = StatePool(CFG), M.new_pool(CAP, locks=True), 0
    paths.use(pool.ledger, data.draw(st.sampled_from(paths.PATHS[1:]), label="batch path"))
    pool.ledger.small = data.draw(st.integers(0, CAP + 1), label="small")  # per-slot path up to this size
    pool.ledger.run_min = data.draw(st.integers(2, CAP + 1), label="run_min")  # the numpy run lane from this size
    for _ in range(data.draw(st.integers(5, 60), label="length")):
        model, launched = check_op(pool, model, launched, data.draw(op_for(model), label="op"))


nobody = st.builds(Actor, st.sampled_from([ActorKind.REQUEST, ActorKind.SESSION]), st.sampled_from([NOBODY, 0, 1]))
nobody_ops = st.one_of(
    st.tuples(st.just("alloc"), st.integers(1, 2), nobody),
    st.tuples(st.just("fire"), st.sampled_from(list(Event)), nobody, real_ids, st.just("list"), targets),
    st.tuples(st.just("close"), nobody),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_an_actor_id_of_nobody_is_judged_as_the_model_judges_it(data):
    """NOBODY (-1) fills every unowned owner/borrower field: an actor with that id must not
    match it (the model's `relation_of` never makes NOBODY an owner). The model still lets a
    request with id -1 allocate; the runtime refuses every call by it (`BadActor`, see
    test_ledger), so `exclusive` and `conserved` (which count owners) are not checked here
    for the model's sake."""
    pool, model, launched = StatePool(CFG), M.new_pool(CAP, locks=True), 0
    paths.use(pool.ledger, data.draw(st.sampled_from(paths.PATHS[1:]), label="batch path"))
    pool.ledger.small = data.draw(st.integers(0, CAP + 1), label="small")
    pool.ledger.run_min = data.draw(st.integers(2, CAP + 1), label="run_min")
    for _ in range(data.draw(st.integers(5, 40), label="length")):
        op = data.draw(st.one_of(nobody_ops, op_for(model)), label="op")
        model, launched = check_op(pool, model, launched, op, props=False)


def run(program) -> StatePool:
    pool, model, launched = StatePool(CFG), M.new_pool(CAP, locks=True), 0
    for op in program:
        model, launched = check_op(pool, model, launched, op)
    return pool


def check_op(pool: StatePool, model: M.Pool, launched: int, op, props: bool = True) -> tuple[M.Pool, int]:
    """Run `op` on the model and the runtime and check they agree; the new model and epoch."""
    new_model, expected = run_model(model, op, launched)
    extra = runtime_only_refusal(op, launched, expected)
    before = frozen(pool)
    try:
        got = run_runtime(pool, op)
    except LifecycleError as err:
        assert_unchanged(pool, before)
        if extra is not None:
            assert isinstance(err, extra), f"{op}: expected {extra.__name__}, got {err!r}"
        else:
            assert isinstance(expected, LifecycleError), f"{op}: runtime refused ({err!r}), the model allowed it"
            assert type(err) is type(expected), f"{op}: runtime {err!r}, model {expected!r}"
            if isinstance(err, IllegalMove):
                assert err.slot_id == expected.slot_id and err.slot == expected.slot
                assert (err.event, err.actor) == (expected.event, expected.actor)
                assert f"slot {err.slot_id} (state {err.slot.state.name}" in str(err)
        check_agreement(pool, model, props)
        return model, launched
    assert extra is None, f"{op}: runtime allowed what it must refuse ({extra.__name__})"
    assert not isinstance(expected, LifecycleError), f"{op}: runtime allowed it, the model raised {expected!r}"
    if op[0] == "launch":
        launched = expected
        assert got == launched == pool.ledger.launched
    else:
        assert got == expected, f"{op}: runtime returned {got}, model {expected}"
    check_agreement(pool, new_model, props)
    assert pool.ledger.launched == launched
    return new_model, launched


def test_the_strategies_reach_every_legal_move():
    """A guard on the test itself: a fixed program walks every rule of the lifecycle through
    the same harness (so the random test is not vacuous if the strategies drift)."""
    r1, r2, s1 = Actor.request(1), Actor.request(2), Actor.session(1)
    program = [
        ("alloc", 3, r1),
        ("fire", Event.ROLLBACK, r1, [3], "list", NOBODY),
        ("fire", Event.ABORT, r1, [2], "int64", NOBODY),
        ("fire", Event.ADMIT, r1, [1], "int32", NOBODY),
        ("fire", Event.PARK, r1, [1], "numpy", 1),
        ("fire", Event.LEND, s1, [1], "tuple", 2),
        ("fire", Event.ROLLBACK, r2, [1], "list", NOBODY),
        ("fire", Event.LEND, s1, [1], "list", 2),
        ("fire", Event.ABORT, r2, [1], "list", NOBODY),
        ("fire", Event.LEND, s1, [1], "list", 2),
        ("fire", Event.ADMIT, r2, [1], "list", NOBODY),
        ("fire", Event.RETRACT, r2, [1], "list", NOBODY),
        ("fire", Event.LEND, s1, [1], "list", 2),
        ("fire", Event.ADMIT, r2, [1], "list", NOBODY),
        ("fire", Event.ABORT, r2, [1], "list", NOBODY),
        ("fire", Event.LEND, s1, [1], "list", 2),
        ("fire", Event.ADMIT, r2, [1], "list", NOBODY),
        ("fire", Event.FINISH, r2, [1], "list", NOBODY),
        ("alloc", 3, r2),
        ("fire", Event.ADMIT, r2, [4, 5, 3], "list", NOBODY),
        ("launch",),
        ("fire", Event.FINISH, r2, [5], "list", NOBODY),
        ("fire", Event.RETRACT, r2, [4], "list", NOBODY),
        ("fire", Event.ABORT, r2, [3], "list", NOBODY),
        ("close", s1),
        ("fire", Event.FENCE, Actor.fence(0), [1], "list", NOBODY),  # early: waits for step 1
        ("fence", 2),  # not launched
        ("fence", 0),
        ("fire", Event.FENCE, Actor.fence(1), [4], "list", NOBODY),
        ("fence", None),
        # the prefix cache: donate, drop an aborted write, publish at the fence, lock, unlock, evict
        ("alloc", 2, r1),
        ("fire", Event.ADMIT, r1, [2, 4], "list", NOBODY),
        ("launch",),
        ("fire", Event.INSERT, r1, [2, 4], "list", 7),
        ("fire", Event.EVICT, Actor.cache(7), [4], "list", NOBODY),
        ("fire", Event.LOCK, r2, [2], "list", NOBODY),  # unpublished: refused
        ("fence", None),
        ("fire", Event.LOCK, r2, [2], "list", NOBODY),
        ("fire", Event.EVICT, Actor.cache(7), [2], "list", NOBODY),  # locked: refused
        ("fire", Event.UNLOCK, r2, [2], "list", NOBODY),
        ("fire", Event.UNLOCK, r2, [2], "list", NOBODY),  # no lock held: refused
        ("fire", Event.EVICT, Actor.cache(7), [2], "list", NOBODY),
        ("fence", None),
        # speculative windows: drafted, given back, verified, rolled back in flight, committed
        ("alloc", 4, r1),
        ("fire", Event.ADMIT, r1, [1], "list", NOBODY),
        ("fire", Event.DRAFT, r1, [3, 5, 4], "list", NOBODY),
        ("fire", Event.ROLLBACK, r1, [4], "list", NOBODY),
        ("fire", Event.VERIFY, r1, [3, 5], "list", NOBODY),
        ("launch",),
        ("fire", Event.COMMIT, r1, [1, 3], "list", NOBODY),  # before the fence: refused
        ("fire", Event.ROLLBACK, r1, [5], "list", NOBODY),
        ("fence", None),
        ("fire", Event.COMMIT, r1, [1, 3], "list", NOBODY),
        ("alloc", 1, r1),  # slot 2, the head of the free list
        ("fire", Event.DRAFT, r1, [2], "list", NOBODY),
        ("fire", Event.VERIFY, r1, [2], "list", NOBODY),
        ("launch",),
        ("fence", None),
        ("fire", Event.ROLLBACK, r1, [2], "list", NOBODY),
        ("fire", Event.PARK, r1, [1], "list", 1),
        ("fire", Event.LEND, s1, [1], "list", 2),
        ("fire", Event.ADMIT, r2, [1], "list", NOBODY),
        ("fire", Event.COMMIT, r2, [1], "list", NOBODY),
        ("fire", Event.FINISH, r2, [1], "list", NOBODY),
        ("close", s1),
        ("launch",),
        ("fence", None),
    ]
    pool = run(program)
    assert moves(pool) == RULE_MOVES
    assert pool.ledger.free_list().tolist() == [4, 5, 3, 2, 1]  # each slot once, in the order they went back
    assert pool.audit(set(), set()).clean
