"""The bounded model checker: the correct scheduler passes with pinned state counts; the bugs of
the SGLang history, written as one-method Policy substitutions, are caught with the right
property and a shortest trace."""

import pytest

from slotwarden.model.vocabulary import Event
from slotwarden.verification.checker import search as checker_module
from slotwarden.verification.abstract import (
    PROPERTIES,
    STEP_PROPERTIES,
    Bounds,
    Fire,
    Policy,
    initial,
    is_final,
    req_actor,
    ses_actor,
    session_of,
)
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS, TEST_BOUNDS, THOROUGH_BOUNDS
from slotwarden.verification.checker.search import CheckResult, check, check_all
from slotwarden.verification.checker.pins import DEFAULT_COUNTS, THOROUGH_COUNTS, pin_of

# -- the correct scheduler ---------------------------------------------------------------------


@pytest.mark.parametrize("bounds", TEST_BOUNDS, ids=str)
def test_correct_policy_has_no_violation_and_pinned_state_counts(bounds):
    result = check(bounds)
    assert result.violation is None and result.complete and result.ok
    assert (result.states, result.transitions) == pin_of(bounds)  # verification/checker/pins.py: any change shows here
    assert result.max_depth > 0 and result.seconds >= 0


def test_workload_assignment():
    assert Bounds(1, 3, 1).assignment() == (100, 100, None)  # s100 = r0, r1; r2 plain
    assert Bounds(1, 4, 2).assignment() == (100, 100, 101, None)  # s100 = r0, r1; s101 = r2; r3 plain
    assert Bounds(1, 2, 1).assignment() == (100, None)
    world = initial(Bounds(2, 3, 1))
    assert world.pool.free == (1, 2) and not is_final(world)
    assert [(s.id, s.turns) for s in world.sessions] == [(100, (0, 1))]
    # request ids and session ids never share a number
    assert not {r.id for r in world.requests} & {s.id for s in world.sessions}


def test_check_all_and_max_states():
    seen = []
    results = check_all(TEST_BOUNDS[:2], on_result=seen.append)
    assert seen == results and all(isinstance(r, CheckResult) and r.ok for r in results)
    in_two = check_all(TEST_BOUNDS[:2], workers=2)  # two processes: the same results, in the same order
    assert [(r.bounds, r.states, r.transitions, r.rules, r.goals) for r in in_two] == [
        (r.bounds, r.states, r.transitions, r.rules, r.goals) for r in results
    ]
    cut = check(TEST_BOUNDS[1], max_states=100)
    assert cut.states == 100 and cut.violation is None and not cut.complete and not cut.ok
    assert len(DEFAULT_BOUNDS) >= 6 and {b.overlap for b in DEFAULT_BOUNDS} == {False, True}


# -- the mutants: the bug history as Policy substitutions ----------------------------------------


from slotwarden.verification.mutants.history import (  # noqa: E402  the catalogue the verify job uses
    AbstractAbortLeaks as AbortForgetsCandidate,
    AbstractCloseLeaks as CloseLeaks,
    AbstractEarlyFence as EarlyReleaseEpoch,
    AbstractLentRollbackFrees as LentRollbackFrees,
    AbstractSentinelFreed as SentinelFree,
    AbstractStaleHandleAfterPark as StaleHandleAfterPark,
)


class LentRollbackAborts(Policy):
    """PR 21404, released by ABORT instead of FINISH."""

    def rollback_events(self, world, r):
        plan = super().rollback_events(world, r)
        return plan + ((Fire(Event.ABORT, req_actor(r), (r.handle,)),) if r.lent else ())


class LentRollbackClosesSession(Policy):
    """PR 21404 the legal way round: the rollback releases the session's slot on its behalf
    while the session still holds it."""

    def rollback_events(self, world, r):
        plan = super().rollback_events(world, r)
        if r.lent:
            plan += (Fire(Event.CLOSE, ses_actor(session_of(world, r.session)), (r.handle,)),)
        return plan


SESSION = Bounds(slots=1, requests=3, sessions=1, overlap=False)  # s0 = r0, r1; r2 plain
OVERLAP = Bounds(slots=2, requests=3, sessions=1, overlap=True)

MUTANTS = [
    # policy, bounds, property, shortest trace length (None: not asserted)
    (LentRollbackFrees, SESSION, "legal", 9),
    (LentRollbackAborts, SESSION, "legal", 9),
    (LentRollbackClosesSession, SESSION, "handles_match", 9),
    (CloseLeaks, SESSION, "no_orphans", 7),
    (StaleHandleAfterPark, SESSION, "handles_match", 6),
    (EarlyReleaseEpoch, OVERLAP, "in_flight_not_free", 4),
    (AbortForgetsCandidate, SESSION, "no_orphans", 2),
    (SentinelFree, SESSION, "legal", 1),
]


@pytest.mark.parametrize("policy, bounds, prop, length", MUTANTS, ids=lambda x: getattr(x, "__name__", None))
def test_mutant_is_caught_with_the_right_property_and_a_short_trace(policy, bounds, prop, length):
    result = check(bounds, policy())
    v = result.violation
    assert v is not None, f"{policy.__name__} escaped: {result}"
    assert v.property == prop and prop in PROPERTIES, str(v)
    assert len(v.trace) == length, str(v)
    assert not result.ok and not result.complete


def test_lent_rollback_trace_is_the_shortest_path_to_a_lent_rollback():
    # a turn can borrow only after the session's first turn ran and parked: submit, take (alloc),
    # admit, launch, complete, finish (park), submit, take (lend), and then the rollback
    v = check(SESSION, LentRollbackFrees()).violation
    assert [line.split(":")[0] for line in v.trace] == [
        "submit(r0)",
        "take(r0)",
        "admit(r0)",
        "launch",
        "complete",
        "finish(r0)",
        "submit(r1)",
        "take(r1)",
        "rollback(r1)",
    ]
    assert "PARK slot 1 by r0 into s100" in v.trace[5] and "LEND slot 1 by s100 to r1" in v.trace[7]
    assert "REFUSED" in v.trace[-1] and "finish is not allowed from PARKED" in v.message


def test_early_release_epoch_is_an_overlap_bug_only():
    # the trace: take, admit, launch, retract; the fence of the last completed step frees the
    # slot the step in flight still uses
    v = check(OVERLAP, EarlyReleaseEpoch()).violation
    assert "RETRACT" in v.trace[-1] and "FENCE" in v.trace[-1] and "launch" in v.trace
    # without overlap nothing is in flight when a slot is released: the same state space, no violation
    quiet = check(TEST_BOUNDS[1], EarlyReleaseEpoch())
    assert quiet.ok and quiet.states == pin_of(TEST_BOUNDS[1])[0]


def test_deadlock_is_reported_with_a_shortest_trace(monkeypatch):
    real = checker_module.successors

    def no_close(world, policy, overlap):  # a scheduler that can never close a session
        return (o for o in real(world, policy, overlap) if o.action.kind != "close")

    monkeypatch.setattr(checker_module, "successors", no_close)
    v = check(Bounds(slots=1, requests=2, sessions=1)).violation
    assert v.property == "deadlock" and len(v.trace) == 2, str(v)  # abort(r0) (a queued turn), abort(r1)
    assert "s100:OPEN" in v.message


def test_violation_reads_as_a_numbered_trace():
    v = check(SESSION, StaleHandleAfterPark()).violation
    text = str(v)
    assert text.startswith("handles_match:") and "r0:[1]" in text and " 6. finish(r0)" in text


# -- rule coverage and `sometimes` goals ---------------------------------------------------------
from slotwarden.model.vocabulary import Relation, State  # noqa: E402
from slotwarden.verification.checker.goals import GOALS, UNREACHABLE, coverage  # noqa: E402


def test_the_test_bounds_fire_every_reachable_rule_and_reach_every_goal():
    cover = coverage(check(b) for b in TEST_BOUNDS)
    assert cover.ok, str(cover)
    assert cover.fired == cover.declared - len(UNREACHABLE) and all(UNREACHABLE.values())
    assert {g.name for g in GOALS} >= {
        "lent_rolled_back",
        "lent_retracted",
        "release_waits_for_fence",
        "close_deferred",
    }
    assert {g.name for g in GOALS} >= {
        "two_readers",
        "evicted_under_pressure",
        "published_at_fence",
        "copy_source_locked",
        "aborted_write_dropped",
    }
    # every declared rule is fired by some action, a lent turn's RETRACT and the prefix cache's
    # included, but an unlock at the lock bound (255 readers of one slot)
    assert set(UNREACHABLE) == {(State.CACHED, Event.UNLOCK, Relation.FULL)}


class NeverRollsBack(Policy):
    """A scheduler whose candidates always fit: no rollback is ever explored."""

    def can_rollback(self, world, r):
        return False


def test_coverage_fails_when_a_rule_is_made_unreachable():
    results = [check(b, NeverRollsBack()) for b in TEST_BOUNDS]
    assert all(r.ok for r in results)  # every safety property still holds: only coverage notices
    cover = coverage(results)
    assert not cover.ok
    assert set(cover.missed_rules) == {"TAKEN --ROLLBACK [OWNER]", "LENT --ROLLBACK [BORROWER]"}
    assert cover.missed_goals == ("lent_rolled_back",) and "never fired" in str(cover)


class RetractsOnlyPlainRequests(Policy):
    """A scheduler that never retracts a session turn: the lent turn's RETRACT is never fired."""

    def can_retract(self, world, r):
        return r.session is None


def test_coverage_fails_when_no_session_turn_is_retracted():
    results = [check(b, RetractsOnlyPlainRequests()) for b in TEST_BOUNDS]
    assert all(r.ok for r in results)
    cover = coverage(results)
    assert cover.missed_rules == ("LENT_RUNNING --RETRACT [BORROWER]",) and cover.missed_goals == ("lent_retracted",)
    assert not cover.ok


class NeverMatches(Policy):
    """A scheduler whose requests never match a cached prefix: nothing locks a cached slot."""

    def can_match(self, world, r, slot):
        return False


class KeepsUnpublishedWrites(Policy):
    """A cache that never drops a write before its fence: it evicts published nodes only."""

    def can_evict(self, world, slot):
        return world.pool.slots[slot - 1].state is State.CACHED and super().can_evict(world, slot)


class NeverDonates(Policy):
    """A scheduler whose requests never donate: the cache stays empty."""

    def can_donate(self, world, r):
        return False


def test_coverage_fails_without_matches_or_without_dropped_writes():
    cache = [b for b in TEST_BOUNDS if b.nodes]
    cover = coverage(check(b, NeverDonates()) for b in cache)
    assert (
        set(cover.missed_goals)
        >= {  # (and the sessions' goals: these bounds have none)
            "two_readers",
            "evicted_under_pressure",
            "published_at_fence",
            "copy_source_locked",
            "aborted_write_dropped",
        }
        and "RUNNING --INSERT [OWNER]" in cover.missed_rules
    )
    cover = coverage(check(b, NeverMatches()) for b in cache)
    assert {"CACHED --LOCK [NONE]", "CACHED --LOCK [READER]", "CACHED --UNLOCK [READER]"} <= set(cover.missed_rules)
    assert {"two_readers", "copy_source_locked"} <= set(cover.missed_goals)
    results = [check(b, KeepsUnpublishedWrites()) for b in cache]
    assert all(r.ok for r in results)  # a cache that evicts less is safe: only coverage notices
    cover = coverage(results)
    assert "CACHING --EVICT [OWNER]" in cover.missed_rules and "aborted_write_dropped" in cover.missed_goals
    assert "evicted_under_pressure" not in cover.missed_goals


def test_coverage_fails_when_a_rule_listed_unreachable_fires():
    wrong = {**UNREACHABLE, (State.LENT, Event.ROLLBACK, Relation.BORROWER): "claimed unreachable, but it fires"}
    cover = coverage([check(b) for b in TEST_BOUNDS], unreachable=wrong)
    assert cover.stale_unreachable == ("LENT --ROLLBACK [BORROWER]",)
    assert not cover.missed_rules and not cover.ok


def test_goals_need_their_bounds():
    # without overlap no release ever waits under a step in flight; the overlapped bounds reach it
    assert "release_waits_for_fence" not in check(TEST_BOUNDS[1]).goals
    assert "release_waits_for_fence" in check(TEST_BOUNDS[2]).goals


# -- symmetry reduction and the compact encoding -----------------------------------------------
from slotwarden.verification.checker import symmetry  # noqa: E402
from slotwarden.verification.abstract import successors  # noqa: E402

PLAIN_PAIR = Bounds(slots=2, requests=3, sessions=1, overlap=False, turns=1)  # s100 = r0; r1, r2 plain


def test_renamed_worlds_share_a_key_and_different_ones_do_not():
    world = initial(PLAIN_PAIR)
    after = {o.action: o.world for o in successors(world, Policy(), False)}
    one, two = after[("take", 1, None)], after[("take", 2, None)]  # r1 or r2 takes slot 1: the same world, renamed
    assert one != two and symmetry.key(one) == symmetry.key(two)
    assert symmetry.plain_key(one) != symmetry.plain_key(two)
    assert symmetry.key(one) != symmetry.key(after[("submit", 0, None)]) and isinstance(symmetry.key(one), bytes)


def test_symmetry_reduction_visits_fewer_worlds_with_the_same_verdicts():
    reduced, full = check(PLAIN_PAIR), check(PLAIN_PAIR, symmetry=False)
    assert reduced.ok and full.ok and (reduced.states, full.states) == (231, 810)
    assert reduced.rules == full.rules and reduced.goals == full.goals
    bug = Bounds(slots=1, requests=3, sessions=1, overlap=False, turns=1)
    for policy in (StaleHandleAfterPark(), AbortForgetsCandidate()):
        a, b = check(bug, policy).violation, check(bug, policy, symmetry=False).violation
        assert a.property == b.property and len(a.trace) == len(b.trace), (a, b)


def test_worlds_that_differ_only_by_slot_ids_share_a_key():
    from slotwarden.verification.abstract.actions import perform
    from slotwarden.verification.checker.symmetry import Codec

    root = initial(Bounds(slots=3, requests=2, sessions=0, overlap=True))
    codec = Codec(root)
    other = root._replace(pool=root.pool._replace(free=(3, 1, 2)))  # the same pool, its free list in another order
    assert codec.key(root) == codec.key(other) and codec.plain_key(root) != codec.plain_key(other)
    one, three = (perform(w, Policy(), "take", 0).world for w in (root, other))  # r0 takes slot 1, or slot 3
    assert one.requests[0].handle == 1 and three.requests[0].handle == 3
    assert codec.key(one) == codec.key(three)
    admitted = perform(one, Policy(), "admit", 0).world  # a different world stays apart
    assert codec.key(admitted) != codec.key(one)
    rep = codec.world(codec.key(three))  # the representative: free slots first, in free-list order
    assert (
        codec.key(rep) == codec.key(one)
        and rep.pool.free == (1, 2)
        and rep.requests[rep.pool.slots[2].owner].handle == 3
    )


class SymmetryBlindFault(Policy):
    """Breaks a property only in a world that a renaming relates to a harmless one: r2 may
    not hold slot 1 (r1 may). A reduction that merged worlds it should not would miss it;
    the checker replays the trace in the names of the world it really reached."""

    symmetric = False

    def take_events(self, world, r):
        if r.id == 2 and world.pool.free[:1] == (1,):
            return (Fire(Event.ADMIT, req_actor(r), (1,)),)
        return super().take_events(world, r)


def test_a_policy_that_reads_ids_is_checked_without_the_reduction():
    v = check(PLAIN_PAIR, SymmetryBlindFault()).violation
    assert v is not None and v.property == "legal" and v.trace[-1].startswith("take(r2)")


FIVE = Bounds(slots=1, requests=5, sessions=2, overlap=False, turns=1)  # s100 = r0; s101 = r1; r2..r4 plain


def test_renaming_sessions_and_plain_requests_divides_the_space():
    reduced, full = check(FIVE), check(FIVE, symmetry=False)
    assert (reduced.states, reduced.transitions, full.states) == (505, 2415, 2580)
    assert reduced.ok and full.ok and reduced.rules == full.rules


def test_thorough_adds_larger_bounds_to_the_default_ones():
    assert THOROUGH_BOUNDS[: len(DEFAULT_BOUNDS)] == DEFAULT_BOUNDS
    extra = [str(b) for b in THOROUGH_BOUNDS[len(DEFAULT_BOUNDS) :]]
    assert set(THOROUGH_COUNTS) <= set(extra) and not set(extra) & set(DEFAULT_COUNTS)


def test_default_bounds_are_pinned():
    """The cheap ones are re-checked here; `verify` compares every bounds with its pin."""
    assert [str(b) for b in DEFAULT_BOUNDS] == list(DEFAULT_COUNTS)
    assert all(pin_of(b) is not None for b in TEST_BOUNDS)
    for b in DEFAULT_BOUNDS:
        if DEFAULT_COUNTS[str(b)][0] < 2000:
            r = check(b)
            assert (r.states, r.transitions) == DEFAULT_COUNTS[str(b)] and r.ok


def test_every_mutant_gets_the_same_verdict_with_and_without_the_reduction():
    from slotwarden.verification.mutants.history import MUTANTS as CATALOGUE

    # two sessions of two turns each: renamable (the cache's mutants: the next test); a
    # write-set mutant on its own bounds (four rows in flight need four running requests)
    for m in [m for m in CATALOGUE if m.policy is not None and not m.bounds.nodes]:
        rows_only = set(m.checker_catch) <= set(STEP_PROPERTIES)
        bounds = m.bounds if rows_only else m.bounds._replace(requests=5, sessions=2)
        a, b = check(bounds, m.policy()).violation, check(bounds, m.policy(), symmetry=False).violation
        assert a is not None and (a.property, len(a.trace)) == (b.property, len(b.trace)), m.name


CACHED_PAIR = Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2)  # three plain requests, a cache


def test_the_reduction_renames_requests_holding_locks_and_copies():
    reduced, full = check(CACHED_PAIR), check(CACHED_PAIR, symmetry=False)
    assert reduced.ok and full.ok and reduced.states < full.states
    assert reduced.rules == full.rules and reduced.goals == full.goals
    from slotwarden.verification.mutants.history import MUTANTS as CATALOGUE

    for m in [m for m in CATALOGUE if m.bounds.nodes]:  # each cache mutant: the same verdict either way
        a, b = check(CACHED_PAIR, m.policy()).violation, check(CACHED_PAIR, m.policy(), symmetry=False).violation
        assert a is not None and (a.property, len(a.trace)) == (b.property, len(b.trace)), m.name


def test_a_lock_or_a_copy_is_part_of_the_key():
    # two worlds that differ only in who holds the lock on the cached slot are told apart
    from slotwarden.verification.abstract.actions import perform

    w = initial(CACHED_PAIR)
    for kind, who in (("take", 0), ("admit", 0), ("launch", None), ("complete", None), ("donate", 0)):
        w = perform(w, Policy(), kind, who).world
    locked = perform(w, Policy(), "match", 1, slot=1).world
    plain = perform(w, Policy(), "take", 1).world
    assert locked.pool.slots[0].readers == 1 and plain.pool.slots[0].readers == 0
    assert symmetry.key(locked) != symmetry.key(plain)
    assert symmetry.key(locked) == symmetry.key(perform(w, Policy(), "match", 2, slot=1).world)


def test_a_request_retracted_under_its_copy_keeps_the_lock_until_the_fence():
    # found by the checker: re-matching the node before the copy's fence would be a second lock
    # by the same request (the model refuses it), so the twin offers no match until then
    from slotwarden.verification.abstract.actions import perform

    bounds = Bounds(slots=3, requests=3, sessions=0, overlap=True, nodes=1)
    w = initial(bounds)
    for kind, who in (("take", 0), ("admit", 0), ("launch", None), ("complete", None), ("donate", 0)):
        w = perform(w, Policy(), kind, who).world
    w = perform(w, Policy(), "match", 1, slot=1).world
    for kind, who in (("admit", 1), ("launch", None), ("retract", 1)):
        w = perform(w, Policy(), kind, who).world
    assert w.pool.locks == ((1, 1),) and w.steps[0].copies == frozenset({(1, 1)})
    assert perform(w, Policy(), "match", 1, slot=1) is None  # not offered while the copy is in flight

    class Rematches(Policy):
        def can_match(self, world, r, slot):
            return world.pool.slots[slot - 1].state.name == "CACHED"

    refused = perform(w, Rematches(), "match", 1, slot=1)
    assert refused.error is not None and "already holds a lock" in str(refused.error)
    w = perform(w, Policy(), "complete").world  # the copy's fence lets go of the lock
    assert w.pool.locks == () and perform(w, Policy(), "match", 1, slot=1).world is not None


def test_the_checker_judges_every_cache_move():
    # a declaration where a lock makes the reader the slot's owner: the twin's match goes
    # through it, and the checker names the move property it breaks
    import dataclasses

    from slotwarden.model.declaration import Source, declare
    from slotwarden.model.lifecycle import EVENTS, RULES, STATES
    from slotwarden.verification.mutants.search_checks import checker_check

    grabs = tuple(
        dataclasses.replace(r, effect=r.effect._replace(owner=Source.ACTOR))
        if (r.source, r.event, r.by) == (State.CACHED, Event.LOCK, Relation.NONE)
        else r
        for r in RULES
    )
    wrong = declare("a lock takes the slot", STATES, EVENTS, grabs)
    found = checker_check(wrong, (Bounds(slots=2, requests=2, sessions=0, nodes=1),))
    assert found.startswith("cache_read_only"), found


def test_the_codec_packs_the_cache_exactly():
    # every world of a cache workload decodes from its plain key as it was (the lock record,
    # the copies in flight, the nodes' slots), and renamed worlds share a canonical key
    from slotwarden.verification.abstract.actions import perform
    from slotwarden.verification.checker.symmetry import EXACT, Codec

    bounds = Bounds(slots=3, requests=3, sessions=0, overlap=True, nodes=2)
    root = initial(bounds)
    codec = Codec(root)
    w = root
    for kind, who, slot in (("take", 0, None), ("admit", 0, None), ("launch", None, None), ("complete", None, None),
                            ("donate", 0, None), ("match", 1, 1), ("admit", 1, None),
                            ("launch", None, None)):  # fmt: skip
        w = perform(w, Policy(), kind, who, slot=slot).world
        key = codec.plain_key(w)
        assert not (isinstance(key, tuple) and key[0] == EXACT) and codec.world(key) == w, w
    assert w.pool.locks == ((1, 1),) and w.steps[0].copies == frozenset({(1, 1)})
    donated = perform(
        perform(perform(root, Policy(), "take", 0).world, Policy(), "admit", 0).world, Policy(), "launch"
    ).world
    donated = perform(perform(donated, Policy(), "complete").world, Policy(), "donate", 0).world
    one, two = (perform(donated, Policy(), "match", r, slot=1).world for r in (1, 2))  # r1 or r2 locks slot 1
    assert codec.key(one) == codec.key(two) and codec.plain_key(one) != codec.plain_key(two)
    assert codec.key(one) != codec.key(perform(one, Policy(), "match", 2, slot=1).world)  # a second reader


def test_a_codec_that_forgets_the_lock_record_does_not_decode(monkeypatch):
    from slotwarden.verification.abstract.actions import perform
    from slotwarden.verification.checker.symmetry import Codec

    root = initial(Bounds(slots=3, requests=3, sessions=0, overlap=True, nodes=2))
    w = root
    for kind, who in (("take", 0), ("admit", 0), ("launch", None), ("complete", None), ("donate", 0)):
        w = perform(w, Policy(), kind, who).world
    w = perform(w, Policy(), "match", 1, slot=1).world
    pool_code = Codec._pool_code
    monkeypatch.setattr(Codec, "_pool_code", lambda self, pool, new: pool_code(self, pool._replace(locks=()), new))
    codec = Codec(root)
    assert codec.world(codec.plain_key(w)) != w
