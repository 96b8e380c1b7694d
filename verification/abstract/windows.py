"""The abstract scheduler's actions on speculative windows (`Bounds.drafts` > 0).

`draft`: a running request that has run takes a window of drafts + 1 slots (ALLOC, then DRAFT);
the launch that follows verifies it (VERIFY, in `actions._launch`), and the step's fence makes it
VERIFIED; the request is then behind (`World.behind`) until a `commit` copies the accepted state
into its committed slot (COMMIT on it) and gives the window back. `reject` gives the window back
at any point (ROLLBACK); so do a retraction and an abort (the policy's events). Each action takes
the transaction class (`txn`) from `actions`, which lists them (`ACTIONS`).
"""

from __future__ import annotations

from slotwarden.model.vocabulary import Event
from slotwarden.verification.abstract.policy import Policy
from slotwarden.verification.abstract.world import RUNNING, World, window_of


def speculating(world: World, rid: int) -> bool:
    """Whether the request holds a window or has verified state not yet committed."""
    return bool(world.windows) and bool(window_of(world, rid)) or rid in world.behind


def draft(world: World, rid: int, policy: Policy, txn):
    r = world.requests[rid]
    if r.phase != RUNNING or not world.drafts or speculating(world, rid) or not policy.can_draft(world, r):
        return None
    t = txn(world, policy)
    ids = t.fire(policy.draft_take(world, r))
    if ids is None:
        return None
    t.fire(policy.draft_events(world, r, ids))
    t.windows = t.windows | frozenset((rid, i) for i in ids)
    return t


def commit(world: World, rid: int, policy: Policy, txn):
    r = world.requests[rid]
    if r.phase != RUNNING or not window_of(world, rid) or not policy.can_commit(world, r):
        return None
    t = txn(world, policy)
    t.fire(policy.commit_events(world, r))
    copied = any(m.event is Event.COMMIT and m.slot_id == r.handle for m in t.moves)
    behind = t.behind
    t.drop_window(rid)
    t.behind = t.behind if copied else behind  # only a copy into the committed slot brings it up to date
    return t


def reject(world: World, rid: int, policy: Policy, txn):
    r = world.requests[rid]
    if r.phase != RUNNING or not window_of(world, rid):
        return None
    t = txn(world, policy)
    t.fire(policy.reject_events(world, r))
    t.drop_window(rid)
    return t


ACTIONS = (("draft", draft), ("commit", commit), ("reject", reject))
