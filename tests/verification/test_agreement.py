"""The runtime's own code path (compiled per-event tables, `look_up`/`write` on real ledger
columns) agrees with `step()` on every move, with check strict and off."""

import numpy as np

from slotwarden.runtime.ledger import compiled
from slotwarden.runtime.ledger.transition import BITS, BOR, as_lists
from slotwarden.model.vocabulary import Event, State
from slotwarden.runtime.ledger.ledger import SlotLedger
from slotwarden.verification.agreement import judge_runtime, runtime_cases


def test_every_move_on_real_ledger_columns_agrees_with_step():
    verdicts = judge_runtime()
    assert len(verdicts) == 4 * len(list(runtime_cases())) > 1800
    assert {v.path for v in verdicts} == {"slot", "compiled", "vector", "python"}
    assert {v.check for v in verdicts} == {"strict", "off"} and {v.free_list for v in verdicts} == {True, False}
    assert [f"{v.case} [{v.check}]: {v.problem}" for v in verdicts if not v.agrees] == []
    assert sum(v.model is not None for v in verdicts) >= 60  # legal moves are compared, not only refusals


class LentRollbackFrees(SlotLedger):
    """A ledger whose compiled ROLLBACK table sends a lent slot to FREE (one entry changed),
    in the table every path reads (`lists=True`) or in the batch paths' only (the compiled
    move's and the numpy kernel's)."""

    lists = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rollback = self.tables[Event.ROLLBACK]
        next_state = np.array(rollback.next_state)
        next_state[int(State.LENT) * BITS + BOR] = int(State.FREE)
        self.tables = {**self.tables, Event.ROLLBACK: rollback._replace(next_state=next_state)}
        if self.lists:
            self._lists = {e: as_lists(t) for e, t in self.tables.items()}
        if self.mover is not None:  # the compiled move reads the changed table too
            self.mover = compiled.mover(self.cols, self._stamp, self.tables)


class VectorOnlyLentRollbackFrees(LentRollbackFrees):
    lists = False


def test_a_changed_table_entry_is_caught_strict_and_off():
    bad = [v for v in judge_runtime(make=LentRollbackFrees) if not v.agrees]
    assert {(v.case.slot.state, v.case.event) for v in bad} == {(State.LENT, Event.ROLLBACK)}
    assert {v.check for v in bad} == {"strict", "off"}
    assert {v.path for v in bad} == {"slot", "compiled", "vector", "python"}
    assert all("runtime" in v.problem for v in bad)


def test_a_fault_in_the_vectorised_path_alone_is_caught():
    bad = [v for v in judge_runtime(make=VectorOnlyLentRollbackFrees) if not v.agrees]
    assert {(v.case.slot.state, v.case.event, v.path) for v in bad} == {
        (State.LENT, Event.ROLLBACK, "compiled"),
        (State.LENT, Event.ROLLBACK, "vector"),
        (State.LENT, Event.ROLLBACK, "python"),  # a subclass keeps to its Python on every path
    }


class RefusalThatWrites(SlotLedger):
    """A ledger that stamps the slot's last event before it refuses a move."""

    def _check_batch(self, batch, event, actor, target, first=None):
        self.cols.last_event[batch.ids] = int(event)
        super()._check_batch(batch, event, actor, target, first)


def test_a_refusal_that_changes_the_ledger_is_caught():
    bad = [v for v in judge_runtime(make=RefusalThatWrites) if not v.agrees]
    assert bad and all("refused move changed" in v.problem for v in bad)
