"""Finished requests give their slots back in one multi-actor pool call (`fire_each`), not one
call each: the same outcome as one call per request, slot by slot; and a scheduler whose
`release_finished` is replaced (a mutant, a fault injector) still gets it called per request."""

import pytest

from slotwarden.model.vocabulary import Event
from slotwarden.runtime.scheduler import admission
from slotwarden.runtime.scheduler.scheduler import AuditFailed, Scheduler

from scheduling import make_scheduler

CONFIG = dict(slots=8, max_running=8, token_budget=64, chunk_size=8)


def workload(sched):
    """Six plain requests that finish in the same step, and a session whose second turn (on its
    lent slot) finishes beside them; its first turn parks a fresh slot."""
    sid = sched.open_session()
    first = sched.submit([3, 4], 1, session=sid)
    sched.run(50)
    rids = [sched.submit([1 + i, 2], 3) for i in range(6)] + [sched.submit([5], 3, session=sid)]
    return [first] + rids


class Counting:
    """Counts the pool's release calls by event, as the scheduler makes them."""

    def __init__(self, sched):
        self.calls = []
        pool = sched.pool
        fire, fire_each = pool.fire, pool.fire_each
        pool.fire = lambda event, ids, *a: self.calls.append((event, len(ids))) or fire(event, ids, *a)
        pool.fire_each = lambda event, ids, who: (
            self.calls.append((event, len(ids), "each")) or fire_each(event, ids, who)
        )

    def of(self, event):
        return [c for c in self.calls if c[0] is event]


def outcome(sched, rids):
    results = sched.run(200)
    ledger = sched.pool.ledger
    columns = {k: v.tolist() for k, v in ledger.snapshot().items() if k != "counters"}
    return [results[r].output for r in rids if r in results], columns, ledger.free_list().tolist()


def test_finishes_of_one_step_are_one_pool_call_with_the_same_outcome():
    grouped, apart = make_scheduler(**CONFIG), make_scheduler(**CONFIG)
    stock = apart.release_finished
    apart.release_finished = lambda req: stock(req)  # replaced: called once per request
    count = Counting(grouped), Counting(apart)
    a, b = workload(grouped), workload(apart)
    assert outcome(grouped, a) == outcome(apart, b)
    finishes = [c for c in count[0].of(Event.FINISH)]
    assert finishes == [(Event.FINISH, 7, "each")]  # six plain requests and the lent turn, one call
    assert len(count[1].of(Event.FINISH)) == 7 and all(c[1] == 1 for c in count[1].of(Event.FINISH))
    assert [c[1] for c in count[0].of(Event.PARK)] == [1]  # the fresh turn parks alone
    assert grouped.check_audit().clean


class DropsTheLast(Scheduler):
    """Broken variant: the group release forgets its last request's slot."""

    def release_finished_each(self, reqs):
        super().release_finished_each(reqs[:-1])


def test_a_group_release_that_forgets_a_slot_is_caught():
    sched = make_scheduler(cls=DropsTheLast, **CONFIG)
    workload(sched)
    with pytest.raises(AuditFailed, match="leak|slot"):
        sched.run(200)


def test_candidates_that_fit_are_admitted_in_one_pool_call():
    sched = make_scheduler(**CONFIG)
    count = Counting(sched)
    rids = [sched.submit([1 + i, 2], 2) for i in range(5)]
    sched.step()
    assert count.of(Event.ADMIT) == [(Event.ADMIT, 5, "each")]
    assert all(sched.requests[r].phase.name == "RUNNING" for r in rids)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_fault_at_the_group_admit_keeps_the_contract(when):
    """A fault as the group admit is made (before the pool moves, or after): the step raises;
    the candidates are waiting with their slots, or running; the next steps finish every
    request with the fault-free tokens, and the idle audit is clean."""
    prompts = [([1 + i, 2], 3) for i in range(5)]
    clean = make_scheduler(**CONFIG)
    want = [clean.submit(p, n) for p, n in prompts]
    want = {r: res.output for r, res in clean.run(100).items() if r in want}
    sched = make_scheduler(**CONFIG)
    fire_each, fired = sched.pool.fire_each, []

    def faulty(event, ids, who):
        if event is Event.ADMIT and not fired:
            fired.append(event)
            if when == "after":
                fire_each(event, ids, who)
            raise RuntimeError(f"injected {when} the group admit")
        return fire_each(event, ids, who)

    sched.pool.fire_each = faulty
    rids = [sched.submit(p, n) for p, n in prompts]
    with pytest.raises(RuntimeError, match="injected"):
        sched.step()
    phases = {sched.requests[r].phase.name for r in rids}
    assert phases == ({"WAITING"} if when == "before" else {"RUNNING"})
    assert all(sched.requests[r].slot is not None for r in rids)
    got = sched.run(100)
    assert {r: got[r].output for r in rids} == want
    assert sched.check_audit().clean


def ledger_calls(sched) -> list:
    """The names of the ledger's public calls made from now on, in order."""
    ledger, names = sched.pool.ledger, []
    for name in ("alloc", "alloc_each", "apply", "apply_each", "launch", "fence"):
        real = getattr(ledger, name)
        setattr(ledger, name, lambda *a, _real=real, _name=name, **k: names.append(_name) or _real(*a, **k))
    return names


def test_the_candidates_fresh_slots_are_one_ledger_call_with_the_same_outcome(monkeypatch):
    """Five candidates take their fresh slots in one multi-actor alloc, and a step of admissions
    makes the same few ledger calls however many are admitted: the same outcome, slot by slot,
    as one alloc per candidate (the plan switched off; that variant is what the count rejects)."""
    outcomes, counts = [], []
    for grouped in (True, False):
        if not grouped:
            monkeypatch.setattr(admission.BatchBuilder, "take_fresh_slots", lambda builder, budget: None)
        sched = make_scheduler(**CONFIG)
        rids = [sched.submit([1 + i, 2], 2) for i in range(5)]
        calls = ledger_calls(sched)
        sched.step()
        counts.append(sorted(calls))
        outcomes.append(outcome(sched, rids))
    assert outcomes[0] == outcomes[1]
    assert counts[0] == ["alloc_each", "apply_each", "fence", "launch"]  # one call of each kind
    assert counts[1].count("alloc") == 5  # what the check above rejects


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_fault_at_the_group_alloc_keeps_the_contract(when):
    """A fault as the group alloc is made: the step raises with every candidate waiting and
    holding nothing (taken slots are given back); the next steps finish every request with the
    fault-free tokens, and the idle audit is clean."""
    prompts = [([1 + i, 2], 3) for i in range(5)]
    clean = make_scheduler(**CONFIG)
    want = [clean.submit(p, n) for p, n in prompts]
    want = {r: res.output for r, res in clean.run(100).items() if r in want}
    sched = make_scheduler(**CONFIG)
    alloc_each, fired = sched.pool.alloc_each, []

    def faulty(request_ids):
        if not fired:
            fired.append(True)
            if when == "after":
                alloc_each(request_ids)
            raise RuntimeError(f"injected {when} the group alloc")
        return alloc_each(request_ids)

    sched.pool.alloc_each = faulty
    rids = [sched.submit(p, n) for p, n in prompts]
    with pytest.raises(RuntimeError, match="injected"):
        sched.step()
    assert {sched.requests[r].phase.name for r in rids} == {"WAITING"}
    assert all(sched.requests[r].slot is None for r in rids) and sched.pool.available() == CONFIG["slots"]
    got = sched.run(100)
    assert {r: got[r].output for r in rids} == want
    assert sched.check_audit().clean
