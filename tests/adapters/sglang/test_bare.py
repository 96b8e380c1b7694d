"""The scenarios and bug replays, bare: SGLang's own end state, with no slotwarden anywhere.

Each test checks what SGLang itself shows on the way (counts, indices, records) and at the end
(every slot, token and row back, its checker's pool equation balanced), so a scenario that
stops making its calls fails here.
"""

import pytest

from slotwarden.adapters.sglang.drill import installed

if installed.skip_reason() is not None:
    pytest.skip(installed.skip_reason(), allow_module_level=True)

from slotwarden.adapters.sglang.drill import census, objects, replays, scenarios  # noqa: E402

SIZE = objects.Sizes().mamba_slots


@pytest.fixture(params=[False, True], ids=["no_buffer", "extra_buffer"])
def fx(request):
    return objects.build(extra_buffer=request.param)


def slots_per_request(fx) -> int:
    return 1 + (fx.pool.mamba_initial_tracking_slots if fx.extra_buffer else 0)


def ends_clean(fx):
    census.assert_balanced(fx)
    assert census.all_free(fx), (fx.mamba_free(), fx.kv_free(), fx.pool.available_size())


def test_plain(fx):
    seen = scenarios.plain(fx)
    assert seen["held"] == SIZE - slots_per_request(fx)
    assert seen["after"] == SIZE and not seen["holds_mamba"]
    ends_clean(fx)


def test_radix(fx):
    seen = scenarios.radix(fx)
    assert seen["cached_after_insert"] == 1
    assert seen["prefix_len"] == len(scenarios.PROMPT)
    assert seen["cow_slot"] != seen["cow_src"]
    assert seen["protected_while_locked"] == 1
    assert seen["cached_after_second"] == 2
    assert (seen["protected_by_lock"], seen["protected_after_unlock"]) == (1, 0)
    assert seen["freed_by_evict_for_alloc"] == 1 and seen["evicted"] == 1
    ends_clean(fx)


def test_session(fx):
    seen = scenarios.session(fx)
    assert seen["first_borrows"] and not seen["first_holds_after"]
    assert seen["later_borrows"] and seen["later_allocated"] == 0
    assert not seen["slot_after_abort"]
    assert seen["session_held"] and not seen["slot_after_release"]
    assert seen["evicted"] >= 1  # the first turn published its prompt
    ends_clean(fx)


def test_alloc_group(fx):
    seen = scenarios.alloc_group(fx)
    assert seen["prefetched"] == 3
    assert seen["cow"] == [True, True, False]
    assert seen["taken_in_group"] == 2  # two copy-on-write matches; the third slot went back
    assert seen["evicted"] >= 3  # the seed's state and what the three requests inserted
    ends_clean(fx)


def test_flush(fx):
    seen = scenarios.flush(fx)
    assert seen["held_before"] > 0 and seen["sessions_before"] == 1
    assert seen["flushed"] and seen["frees"] == []  # no slot freed one by one: the pool is cleared
    assert seen["sessions_after"] == 0
    ends_clean(fx)


def test_prefill_rollback(fx):
    seen = scenarios.rollback(fx)
    fits, too_long = seen["admitted"], seen["waiting"]
    assert len(fits) == 1 and len(too_long) == 1 and fits != too_long
    assert not seen["rolled_back_holds"] and seen["batch_is_full"]
    assert [caller for caller, _ in seen["frees"]] == ["_get_new_batch_prefill_raw"]
    assert len(seen["frees"][0][1]) == 1
    ends_clean(fx)


def test_lent_slot_rollback_frees_a_slot_the_session_holds(fx):
    seen = replays.lent_slot_rollback(fx)
    assert seen["in_free_list"] and seen["session_still_holds"]
    assert seen["copies_in_free_list"] == 2
    assert seen["free_after_release"] == SIZE + 1  # more free slots than the pool has


def test_sentinel_free_puts_minus_one_on_the_free_list():
    fx = objects.build(extra_buffer=True)
    seen = replays.sentinel_free(fx)
    assert seen["minus_one_in_free_list"]
    assert seen["free"] == SIZE  # the count looks whole, one of its entries is no slot


def test_double_free_lists_a_slot_twice(fx):
    seen = replays.double_free(fx)
    assert seen["copies_in_free_list"] == 2
