"""The prefix tree (`runtime/radix/tree.py`): unit tests, its own integrity check shown failing on
corrupted trees, and the shipped stateful machine against the tree and against deliberately
broken trees, each of which it must catch."""

import inspect
import sys

import numpy as np
import pytest
from hypothesis import settings

from slotwarden.runtime.radix.tree import ROOT, RadixTree
from slotwarden.runtime.radix.errors import (
    BadCount,
    BadRequestId,
    BadSlot,
    BadTokens,
    CacheError,
    LockRefused,
    TreeBroken,
    UnknownNode,
    WrongNodeState,
)
from slotwarden.runtime.radix.node import Inserted, Match, Node
from slotwarden.verification.machines.campaign import Budget, run_machine
from slotwarden.verification.machines.radix import RadixMachine, radix_machine_for

RadixMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
TestRadix = RadixMachine.TestCase


def cached(tree: RadixTree, tokens, slot: int) -> int:
    node, donated = tree.insert(tokens, slot)
    assert donated
    tree.publish(node)
    return node


def shape(tree: RadixTree):
    """Everything the tree holds, to show a refused call changed nothing."""
    nodes = sorted((x.id, x.edge, x.slot, x.published, x.locks, tuple(x.holders)) for x in tree._nodes.values())
    return nodes, tree.holding(), tree._clock


# -- insert, match, publish ----------------------------------------------------------------------
def test_a_prefix_matches_only_once_published_and_only_at_a_node_boundary():
    t = RadixTree()
    node, donated = t.insert([1, 2, 3, 4], 5)
    assert donated and t.match([1, 2, 3, 4, 9]) == Match(None, 0)  # unpublished: never matched
    t.publish(node)
    assert t.match([1, 2, 3, 4, 9]) == Match(node, 4)
    assert t.match([1, 2, 3]) == Match(None, 0)  # ends inside the edge: that state is not held
    assert t.match([1, 2, 3, 5]) == Match(None, 0)
    assert t.match([]) == Match(None, 0)
    t.check()


def test_insert_splits_an_edge_and_the_deeper_node_keeps_its_id():
    t = RadixTree()
    deep = cached(t, [1, 2, 3, 4], 5)
    mid = cached(t, [1, 2], 6)
    assert mid != deep and t.prefix(deep) == (1, 2, 3, 4) and t.prefix(mid) == (1, 2)
    assert t.info(deep).parent == mid and t.info(mid).parent == ROOT
    assert t.match([1, 2, 3]) == Match(mid, 2) and t.match([1, 2, 3, 4]) == Match(deep, 4)
    assert t.sizes() == (3, 2, 2, 0, 4)
    t.check()


def test_a_held_prefix_is_not_donated_to_again():
    t = RadixTree()
    node = cached(t, [7, 8], 3)
    assert t.insert((7, 8), 4) == Inserted(node, False)  # the caller frees slot 4 itself
    assert t.holding() == {3: node}


def test_two_branches_share_a_slotless_node_that_goes_when_one_is_evicted():
    t = RadixTree()
    a = cached(t, [1, 2, 3], 10)
    b = cached(t, [1, 2, 4], 11)
    assert t.sizes().nodes == 4  # the root, the branch [1, 2] (no slot), a, b
    branch = t.info(a).parent
    assert t.info(branch).slot is None and t.match([1, 2]) == Match(None, 0)
    assert t.evict(a) == 10
    assert t.sizes() == (2, 1, 1, 0, 3)  # the branch merged into b, which keeps its id
    assert t.prefix(b) == (1, 2, 4) and t.info(b).parent == ROOT
    with pytest.raises(UnknownNode, match=f"no node {branch}"):
        t.info(branch)
    assert t.evict(b) == 11 and t.sizes() == (1, 0, 0, 0, 0)
    t.check()


def test_evicting_an_inner_slot_keeps_the_node_as_a_branch_point():
    t = RadixTree()
    top = cached(t, [1], 1)
    cached(t, [1, 2], 2)
    cached(t, [1, 3], 3)
    assert t.evict(top) == 1
    assert t.info(top).slot is None and t.match([1, 2]).length == 2 and t.match([1]) == Match(None, 0)
    t.check()


def test_an_aborted_write_is_dropped_unread():
    t = RadixTree()
    node, _ = t.insert([4, 4], 9)
    assert t.drop_unpublished(node) == 9 and t.sizes() == (1, 0, 0, 0, 0)
    with pytest.raises(UnknownNode):
        t.publish(node)
    node = cached(t, [4, 4], 9)
    with pytest.raises(WrongNodeState, match="no unpublished slot to drop"):
        t.drop_unpublished(node)


# -- locks and eviction --------------------------------------------------------------------------
def test_locked_and_unpublished_nodes_are_never_evictable():
    t = RadixTree()
    a, b = cached(t, [1], 1), cached(t, [2], 2)
    c, _ = t.insert([3], 3)
    t.lock(a, rid=7)
    assert t.evictable(5) == [b]
    with pytest.raises(WrongNodeState, match=f"node {a} .*1 locks held by requests \\[7\\]"):
        t.evict(a)
    with pytest.raises(WrongNodeState, match="unpublished"):
        t.evict(c)
    t.unlock(a, rid=7)
    assert sorted(t.evictable(5)) == [a, b]


def test_evictable_takes_slot_leaves_first_then_least_recently_used():
    t = RadixTree()
    top = cached(t, [1], 1)
    leaf = cached(t, [1, 2], 2)
    other = cached(t, [5], 3)
    t.match([1, 2])  # leaf used last
    assert t.evictable(3) == [other, leaf, top]  # top is older than leaf but has a slot below it
    assert t.evictable(1) == [other] and t.evictable(0) == []
    t.match([5])
    assert t.evictable(2) == [leaf, other]
    t.lock(leaf, 0)  # a lock below does not pin the node above: its slot is its own
    assert t.evictable(3) == [other, top]


def test_a_chain_deeper_than_the_recursion_limit():
    t = RadixTree()
    for depth in range(1, 401):
        cached(t, [0] * depth, depth)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 100)  # nothing may recurse down the chain
    try:
        t.check()
        assert t.evictable(1) == [t.match([0] * 400).node] and t.match([0] * 500).length == 400
        assert len(t.prefix(t.match([0] * 400).node)) == 400
    finally:
        sys.setrecursionlimit(limit)


def test_locks_are_counted_per_request_and_bounded():
    t = RadixTree(max_readers=2)
    node = cached(t, [1, 2], 4)
    t.lock(node, 1)
    t.lock(node, 2)
    assert t.info(node).locks == 2 and t.info(node).holders == {1, 2} and t.sizes().locked == 1
    with pytest.raises(LockRefused, match="bound of 2 locks") as err:
        t.lock(node, 3)
    assert (err.value.node, err.value.rid, err.value.call) == (node, 3, "lock")
    with pytest.raises(LockRefused, match="request 1 already holds a lock"):
        t.lock(node, 1)
    t.unlock(node, 1)
    with pytest.raises(LockRefused, match=f"request 1 holds no lock on node {node}"):
        t.unlock(node, 1)  # SGLang #27147: an unlock with no lock to undo
    t.check()


def test_unpublished_state_cannot_be_locked():
    t = RadixTree()
    node, _ = t.insert([1], 1)
    with pytest.raises(WrongNodeState, match="no published slot to read"):
        t.lock(node, 0)


# -- bad input: typed, named, nothing changed ----------------------------------------------------
BAD_CALLS = {
    "empty tokens": (BadTokens, lambda t, n: t.insert([], 9)),
    "negative token": (BadTokens, lambda t, n: t.insert([1, -1], 9)),
    "bool token": (BadTokens, lambda t, n: t.match([True])),
    "not a sequence": (BadTokens, lambda t, n: t.match(5)),
    "pad slot": (BadSlot, lambda t, n: t.insert([3], 0)),
    "sentinel slot": (BadSlot, lambda t, n: t.insert([3], -1)),
    "bool slot": (BadSlot, lambda t, n: t.insert([3], True)),
    "slot held": (BadSlot, lambda t, n: t.insert([3], 1)),
    "unknown node": (UnknownNode, lambda t, n: t.evict(99)),
    "bool node": (UnknownNode, lambda t, n: t.lock(True, 0)),
    "bad rid": (BadRequestId, lambda t, n: t.lock(n, -1)),
    "bad n": (BadCount, lambda t, n: t.evictable(-1)),
    "publish twice": (WrongNodeState, lambda t, n: t.publish(n)),
    "unlock unheld": (LockRefused, lambda t, n: t.unlock(n, 5)),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_calls_raise_typed_errors_and_change_nothing(case):
    error, call = BAD_CALLS[case]
    t = RadixTree()
    node = cached(t, [1, 2], 1)
    t.lock(node, 4)
    before = shape(t)
    with pytest.raises(error) as err:
        call(t, node)
    assert isinstance(err.value, CacheError) and str(err.value).startswith(f"{err.value.call} refused: ")
    assert shape(t) == before


def test_the_held_slot_error_names_its_node():
    t = RadixTree()
    node = cached(t, [1], 6)
    with pytest.raises(BadSlot, match=f"slot 6 is already held by node {node}") as err:
        t.insert([2], 6)
    assert err.value.node == node and err.value.slot == 6


@pytest.mark.parametrize("bound", [0, -1, True, 2.0])
def test_a_bad_lock_bound_is_refused(bound):
    with pytest.raises(BadCount, match="max_readers"):
        RadixTree(max_readers=bound)


def test_numpy_tokens_are_taken_as_ints():
    t = RadixTree()
    node = cached(t, np.array([3, 1, 4]), 2)
    assert t.match(np.array([3, 1, 4, 1])) == Match(node, 3) and t.prefix(node) == (3, 1, 4)


# -- check() can fail ----------------------------------------------------------------------------
def _corrupt_locks(t, ids):
    t._nodes[ids["a"]].locks += 1


def _corrupt_publish(t, ids):
    x = t._nodes[ids["branch"]]
    x.published = True


def _unprune(t, ids):
    x = t._nodes[ids["b"]]
    del t._by_slot[x.slot]
    x.slot, x.published = None, False  # a slotless leaf left in the tree


def _rekey(t, ids):
    branch = t._nodes[ids["branch"]]
    child = branch.children.pop(3)
    branch.children[7] = child


def _lose(t, ids):
    t._nodes[99] = Node(99, (5,), t.root, 1)  # registered, but no parent has it as a child


def _overlock(t, ids):
    x = t._nodes[ids["b"]]
    x.locks, x.holders = 3, {1, 2, 3}


CORRUPTIONS = {
    "lock count without holder": (_corrupt_locks, "lock count 2 but holders \\[1\\]"),
    "published without a slot": (_corrupt_publish, "published without a slot"),
    "an unpruned slotless node": (_unprune, "two children or more"),
    "child under the wrong token": (_rekey, "under token"),
    "prefix length": (lambda t, ids: setattr(t._nodes[ids["a"]], "end", 9), "prefix length 9"),
    "slot index": (lambda t, ids: t._by_slot.pop(1), "slot index"),
    "unregistered node": (lambda t, ids: t._nodes.pop(ids["b"]), "reached twice or not registered"),
    "lost node": (_lose, "registered but not in the tree"),
    "above the bound": (_overlock, "more locks than the bound"),
    "empty edge": (lambda t, ids: setattr(t._nodes[ids["b"]], "edge", ()), "has edge \\(\\)"),
    "recency from the future": (lambda t, ids: setattr(t._nodes[ids["a"]], "last_access", 99), "after the clock"),
    "a slot at the root": (lambda t, ids: setattr(t.root, "slot", 7), "root must be empty"),
}


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_check_catches_each_corruption(case):
    corrupt, message = CORRUPTIONS[case]
    t = RadixTree(max_readers=2)
    ids = {"a": cached(t, [1, 2, 3], 1), "b": cached(t, [1, 2, 4], 2)}
    ids["branch"] = t.info(ids["a"]).parent
    t.lock(ids["a"], 1)
    t.check()
    corrupt(t, ids)
    with pytest.raises(TreeBroken, match=message):
        t.check()


# -- the machine catches broken trees ------------------------------------------------------------
class IgnoresLocks(RadixTree):
    """Proposes locked nodes for eviction (the shape of SGLang #27038 / LMDeploy #4700)."""

    def evictable(self, n):
        saved = {x: x.locks for x in self._nodes.values()}
        try:
            for x in saved:
                x.locks = 0
            return super().evictable(n)
        finally:
            for x, locks in saved.items():
                x.locks = locks


class MatchesUnpublished(RadixTree):
    """Matches state whose write is not fenced yet (vLLM #56525)."""

    def match(self, tokens):
        saved = {x: x.published for x in self._nodes.values()}
        try:
            for x in saved:
                x.published = x.slot is not None
            return super().match(tokens)
        finally:
            for x, published in saved.items():
                x.published = published


class UnlocksForAnyone(RadixTree):
    """An unlock by a request that holds no lock releases someone else's (SGLang #27147)."""

    def unlock(self, node, rid):
        x = self._nodes[node]
        if rid not in x.holders and x.holders:
            rid = min(x.holders)
        super().unlock(node, rid)


class EvictsLocked(RadixTree):
    """Evicts a node whatever its locks."""

    def evict(self, node):
        x = self._nodes[node]
        x.locks, x.holders = 0, set()
        return super().evict(node)


class OverwritesHeld(RadixTree):
    """Insert over a held prefix takes the new slot (the old one leaks)."""

    def insert(self, tokens, slot):
        got = super().insert(tokens, slot)
        if got.donated:
            return got
        x = self._nodes[got.node]
        del self._by_slot[x.slot]
        x.slot, x.published, self._by_slot[slot] = slot, False, x.id
        return Inserted(got.node, True)


class NeverPrunes(RadixTree):
    """Leaves slotless leaves and pass-through nodes behind."""

    def _take_slot(self, x):
        slot = x.slot
        x.slot, x.published = None, False
        del self._by_slot[slot]
        return slot


class OldestIdFirst(RadixTree):
    """Evicts by node id, not by recency."""

    def evictable(self, n):
        return sorted(super().evictable(len(self._nodes)))[:n]


class RefusalTicks(RadixTree):
    """A refused publish still advances the recency clock."""

    def publish(self, node):
        x = self._nodes.get(node)
        if x is not None and x.published:
            self._clock += 1
        super().publish(node)


BROKEN = {
    IgnoresLocks: "evictable proposed",
    MatchesUnpublished: "match",
    UnlocksForAnyone: "unlock",
    EvictsLocked: "evict",
    OverwritesHeld: "insert over held",
    NeverPrunes: "two children or more",
    OldestIdFirst: "least recently used first",
    RefusalTicks: "changed the tree",
}


@pytest.mark.parametrize("broken", BROKEN, ids=lambda c: c.__name__)
def test_the_machine_catches_a_broken_tree(broken):
    r = run_machine(broken.__name__, radix_machine_for(broken), Budget(200, 30), seed=0, shrink=False)
    assert not r.passed and BROKEN[broken] in r.error, r.error


def test_a_node_at_its_lock_bound_does_not_match_a_shorter_prefix_does():
    """Old code matched the full node, whose lock the caller could not take."""
    tree = RadixTree(max_readers=2)
    short, long = tree.insert([1, 2], 1).node, tree.insert([1, 2, 3], 2).node
    tree.publish(short)
    tree.publish(long)
    tree.lock(long, 10)
    assert tree.match([1, 2, 3, 4]).node == long
    tree.lock(long, 11)
    assert tree.match([1, 2, 3, 4]) == (short, 2)
    tree.lock(short, 12)
    tree.lock(short, 13)
    assert tree.match([1, 2, 3, 4]).node is None
    tree.unlock(long, 10)
    assert tree.match([1, 2, 3, 4]).node == long
