"""A streaming session with extra buffers: the first turn keeps its own track slots until it hands
the record back, so its prompt's checkpoint (a track slot donated to the tree, a fresh one
swapped in) is the turn's own insert; a later turn, only a borrower, may not insert a lent one."""

from __future__ import annotations

import pytest

from slotwarden.adapters.sglang.drill import installed

if installed.skip_reason() is not None:
    pytest.skip(installed.skip_reason(), allow_module_level=True)

from sglang.srt.mem_cache.common import checkpoint_kv_cache  # noqa: E402

from slotwarden.model.errors import IllegalMove  # noqa: E402
from slotwarden.model.free import IllegalFree  # noqa: E402
from slotwarden.model.vocabulary import State  # noqa: E402

from slotwarden.adapters.sglang import who as W  # noqa: E402
from slotwarden.adapters.sglang.drill import census, flow, objects, scenarios  # noqa: E402

PROMPT = list(range(1, 9))


def _clean(fx) -> None:
    audit = fx.pool.mamba_allocator.guarded.audit()
    assert audit.problems == () and audit.free_list_ok, audit
    census.assert_balanced(fx)


def _first_turn(fx, sid: str):
    first = objects.make_req(PROMPT, session=objects.make_session(sid))
    flow.start(fx, first)
    track = [int(v) for v in first.kv.mamba_ping_pong_track_buffer.tolist() if v >= 0]
    flow.run(fx, first, finish=False)  # the forward records the track seqlen
    checkpoint_kv_cache(first, fx.cache)  # the prompt published: a track slot donated to the tree
    return first, track


def test_the_first_turns_prompt_checkpoint_is_its_own_insert(guarded):
    fx = objects.build(extra_buffer=True)
    slots = fx.pool.mamba_allocator
    first, track = _first_turn(fx, "s")
    record = fx.session.slots["s"]
    assert slots.state(int(record.kv.mamba_pool_idx)) is State.LENT_RUNNING  # the state slot: lent
    donated = [s for s in track if s not in record.kv.mamba_ping_pong_track_buffer.tolist()]
    assert len(donated) == 1 and slots.state(donated[0]) in (State.CACHING, State.CACHED)
    flow.run(fx, first)
    flow.finish(fx, first)  # the record goes back whole: every slot of it parked with the session
    assert {slots.state(s) for s in records_ids(record)} == {State.PARKED}
    _clean(fx)
    fx.cache.release_session("s")
    scenarios.evict_all(fx)
    _clean(fx)
    assert fx.mamba_free() == fx.sizes.mamba_slots


def records_ids(record) -> list[int]:
    from slotwarden.adapters.sglang import records

    return records.slot_ids(record.kv)


def _abort_first_turn(fx) -> None:
    first, _ = _first_turn(fx, "a")
    flow.abort(fx, first)  # the session gives its record up; release_kv_cache frees it whole
    assert "a" not in fx.session.slots
    scenarios.evict_all(fx)


def test_an_aborted_first_turn_gives_its_track_slots_to_the_session_which_frees_them(guarded):
    fx = objects.build(extra_buffer=True)
    _abort_first_turn(fx)
    _clean(fx)
    assert fx.mamba_free() == fx.sizes.mamba_slots and fx.pool.mamba_allocator.unattributed == 0


def test_an_abort_that_aborts_the_turns_own_track_slots_is_a_double_free(guarded, monkeypatch):
    """The broken variant the test above rules out: the turn's own slots aborted (RELEASED)
    instead of handed to the session, whose release of the record then frees them again."""
    from slotwarden.adapters.sglang import records

    def aborting(slots, ids, req, event, session):
        if event is None:
            return real(slots, ids, req, event, session)
        for s in ids:
            slots.fire(event, [s], req)

    real = records.give_back
    monkeypatch.setattr(records, "give_back", aborting)
    fx = objects.build(extra_buffer=True)
    with pytest.raises(IllegalFree, match="RELEASED"):
        _abort_first_turn(fx)


def _borrower_publishes(fx):
    """A later turn made to publish as if it were the first (publishes_prompt forced); returns
    (the record, its lent track slots, the tree's Mamba size before)."""
    first, _ = _first_turn(fx, "s")
    flow.run(fx, first)
    flow.finish(fx, first)
    record = fx.session.slots["s"]
    later = objects.make_req(PROMPT + [9, 10, 11, 12], session=first.session)
    flow.start(fx, later)
    flow.run(fx, later, finish=False)
    lent = [s for s in records_ids(record) if s != int(record.kv.mamba_pool_idx)]
    cached = fx.cache.mamba_evictable_size() + fx.cache.mamba_protected_size()
    record.publishes_prompt = True
    return record, later, lent, cached


def test_a_borrowers_insert_of_a_lent_track_slot_is_refused(guarded):
    """The seed bug's class: a later turn runs on the session's record, only borrowing it; its
    donation is refused at the insert, before the tree changes, the slot still the session's."""
    fx = objects.build(extra_buffer=True)
    slots = fx.pool.mamba_allocator
    record, later, lent, cached = _borrower_publishes(fx)
    assert lent and {slots.state(s) for s in lent} == {State.LENT_RUNNING}
    with pytest.raises(IllegalMove, match=r"illegal insert by request \d+ on slot \d+ \(state LENT_RUNNING"):
        checkpoint_kv_cache(later, fx.cache)
    assert fx.cache.mamba_evictable_size() + fx.cache.mamba_protected_size() == cached
    donated = next(s for s in lent if s not in record.kv.mamba_ping_pong_track_buffer.tolist())
    assert slots.state(donated) is State.LENT_RUNNING
    assert slots.ledger.record(donated).owner == W.session(record).id


def test_a_declaration_that_lets_the_borrower_insert_would_let_it_through(guarded):
    """The broken variant the test above rules out: with a rule for the borrower's insert of a
    lent slot (the seed bug's class declared legal), the same donation goes through."""
    from slotwarden.model.declaration import DONATE, Rule
    from slotwarden.model.lifecycle import LIFECYCLE
    from slotwarden.model.vocabulary import Event, Relation

    key = (State.LENT_RUNNING, Event.INSERT, Relation.BORROWER)
    rule = Rule(*key[:2], Relation.BORROWER, State.CACHING, DONATE, "broken: the borrower donates a lent slot")
    rules = LIFECYCLE.rules
    LIFECYCLE._rules[key] = rule
    object.__setattr__(LIFECYCLE, "rules", rules + (rule,))
    try:
        fx = objects.build(extra_buffer=True)
        record, later, lent, cached = _borrower_publishes(fx)
        checkpoint_kv_cache(later, fx.cache)  # not refused
    finally:
        del LIFECYCLE._rules[key]
        object.__setattr__(LIFECYCLE, "rules", rules)
    assert fx.cache.mamba_evictable_size() + fx.cache.mamba_protected_size() > cached
