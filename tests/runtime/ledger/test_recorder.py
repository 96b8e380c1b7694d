"""The flight recorder reads every kept batch back in one form, whatever path kept it: a list, an
array or the bytes of one; states before shared or per slot; and no reader can rewrite it."""

from __future__ import annotations

import numpy as np
import pytest

from slotwarden.model.vocabulary import Actor, Event, State
from slotwarden.runtime.ledger.recorder import FlightRecorder

R1 = Actor.request(1)
RUNNING, FREE = int(State.RUNNING), int(State.FREE)


@pytest.mark.parametrize(
    "ids, before",
    [
        ([2, 5], [RUNNING, RUNNING]),  # the per-slot path's lists
        (np.array([2, 5]), np.array([RUNNING, RUNNING], dtype=np.uint8)),
        (np.array([2, 5], dtype=np.int64).tobytes(), RUNNING),  # the compiled lane's bytes, one state
    ],
    ids=["lists", "arrays", "bytes and one state"],
)
def test_a_batch_reads_back_in_one_form(ids, before):
    recorder = FlightRecorder(4)
    recorder.record(Event.FINISH, R1, -1, 1, ids, before, FREE)
    e = recorder.entries[-1]
    assert e.ids.tolist() == [2, 5] and e.after.tolist() == [FREE, FREE]
    assert type(e.before) is int and e.before == RUNNING
    for array in (e.ids, e.after):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 9
    assert recorder.entries[-1].ids.tolist() == [2, 5]


def test_states_before_that_differ_stay_one_per_slot_and_read_only():
    recorder = FlightRecorder(4)
    recorder.record(Event.FINISH, R1, -1, 1, [2, 5], [RUNNING, int(State.TAKEN)], [FREE, FREE])
    before = recorder.entries[-1].before
    assert before.tolist() == [RUNNING, int(State.TAKEN)] and not before.flags.writeable
    assert [m.before for m in recorder.history(5)] == [State.TAKEN]
