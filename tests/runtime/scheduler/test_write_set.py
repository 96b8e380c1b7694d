"""Every step the scheduler launches has its write set checked: a row mapped to a slot its
request does not hold (a stale row mapping, state bound to the row) is refused before launch."""

import pytest

from slotwarden.model.errors import IllegalStep

from scheduling import make_scheduler


@pytest.mark.parametrize("overlap", [False, True])
def test_every_launch_checks_the_rows_against_the_ledger(overlap, monkeypatch):
    sched = make_scheduler(slots=3, overlap=overlap)
    seen = []
    launch = sched.pool.launch

    def spy(done=None, **rows):
        seen.append(rows)
        return launch(done, **rows)

    monkeypatch.setattr(sched.pool, "launch", spy)
    a, b = sched.submit([1, 2, 3], 3), sched.submit([4, 5], 3)
    results = sched.run(100)
    assert results[a].reason == results[b].reason == "length"
    assert seen and all(len(r["slots"]) == len(r["actors"]) > 0 for r in seen)


def test_a_row_on_another_requests_slot_is_refused_before_launch():
    """A broken variant: one running request's row names its neighbour's slot (vLLM #55951's
    stale rows, tenstorrent/vllm #454's row-bound state). The step is refused; nothing launched."""
    sched = make_scheduler(slots=3)
    sched.submit([1, 2, 3], 5)
    sched.submit([4, 5], 5)
    sched.step()
    first, second = sched.running[:2]
    launched = sched.pool.ledger.launched
    second.slot = first.slot
    with pytest.raises(IllegalStep, match="RUNNING slot with no claim on it") as refused:
        sched.step()
    assert (refused.value.row, refused.value.slot_id, refused.value.actor.id) == (1, first.slot, second.rid)
    assert sched.pool.ledger.launched == launched
