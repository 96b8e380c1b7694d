"""An action of the abstract scheduler never writes into the world it starts from, however that
world holds its records (tuples, or lists a caller built): every enabled action of every world
of a small bounds leaves the world as it was. A transaction that writes into a caller's list of
sessions is caught."""

from slotwarden.verification.abstract import Bounds, Policy, successors
from slotwarden.verification.abstract import actions
from worlds import reachable

BOUNDS = Bounds(slots=2, requests=3, sessions=1, overlap=True)


def _written(worlds) -> int:
    """How many (world, action) pairs changed a world whose records are lists."""
    count = 0
    for world in worlds:
        mine = world._replace(requests=list(world.requests), sessions=list(world.sessions), steps=list(world.steps))
        before = (list(mine.requests), list(mine.sessions), list(mine.steps))
        for _ in successors(mine, Policy(), BOUNDS.overlap):
            count += (list(mine.requests), list(mine.sessions), list(mine.steps)) != before
            before = (list(mine.requests), list(mine.sessions), list(mine.steps))
    return count


def test_no_action_writes_into_the_world_it_starts_from():
    worlds = reachable(BOUNDS, limit=10**6)
    assert len(worlds) > 100 and _written(worlds) == 0


def test_a_transaction_that_writes_into_the_callers_sessions_is_caught(monkeypatch):
    # the broken variant: the sessions are copied only when they are a tuple
    def set_session(self, sid, **changes):
        if type(self.sessions) is tuple:
            self.sessions = list(self.sessions)
        self.sessions[sid - actions.SESSION_BASE] = s = actions._renewed(
            self.sessions[sid - actions.SESSION_BASE], changes
        )
        return s

    monkeypatch.setattr(actions._Txn, "set_session", set_session)
    assert _written(reachable(BOUNDS, limit=10**6)) > 0
