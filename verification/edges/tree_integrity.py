"""The prefix tree's own integrity check, judged both ways.

A tree built by its operations (inserts that split edges, publishes, locks, an unlock, an
eviction, a dropped write) passes `check()`; each entry of `BREAKS` edits one field of that
tree the way a bug would, and `check()` must then raise `TreeBroken` naming the node and the
invariant broken. Its refusals (`REFUSALS`) raise their typed error naming the call, and every
error pickles with its type and text.
"""

from __future__ import annotations

import copy
import pickle
from typing import Callable

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
from slotwarden.runtime.radix.tree import RadixTree


def built() -> tuple[RadixTree, dict]:
    """A tree of prompts sharing prefixes, in every node state; its nodes by name."""
    tree = RadixTree(max_readers=2)
    n = {}
    n["long"] = tree.insert((1, 2, 3, 4), 1).node
    n["split"] = tree.insert((1, 2), 2).node  # splits the edge (1, 2, 3, 4)
    n["other"] = tree.insert((1, 5), 3).node  # a sibling under (1,): an inner node without a slot
    n["gone"] = tree.insert((7,), 4).node
    n["dropped"] = tree.insert((8, 8), 5).node
    for name in ("long", "split", "other", "gone"):
        tree.publish(n[name])
    tree.lock(n["long"], 10)
    tree.lock(n["long"], 11)
    tree.unlock(n["long"], 11)
    tree.lock(n["split"], 12)
    tree.evict(n["gone"])
    tree.drop_unpublished(n["dropped"])
    n["inner"] = tree.info(n["other"]).parent
    return tree, n


def _node(tree: RadixTree, node: int):
    return tree._nodes[node]


BREAKS: dict[str, tuple[Callable, str]] = {  # the edit, the words of check()'s refusal
    "a prefix length off by one": (lambda t, n: setattr(_node(t, n["long"]), "end", 5), "prefix length 5"),
    "an inner node left with one child": (
        lambda t, n: _node(t, n["inner"]).children.pop(5),
        "must have two children or more",
    ),
    "a child under the wrong token": (
        lambda t, n: setattr(_node(t, n["other"]), "edge", (6,)),
        "under token 5 has edge (6,)",
    ),
    "published without a slot": (lambda t, n: setattr(_node(t, n["inner"]), "published", True), "published without"),
    "a lock count without its holder": (lambda t, n: setattr(_node(t, n["long"]), "locks", 2), "lock count 2"),
    "a lock on unpublished state": (lambda t, n: setattr(_node(t, n["long"]), "published", False), "lock count 1"),
    "more locks than the bound": (
        lambda t, n: _node(t, n["long"]).holders.update({20, 21}) or setattr(_node(t, n["long"]), "locks", 3),
        "more locks than the bound 2",
    ),
    "a touch after the clock": (lambda t, n: setattr(_node(t, n["split"]), "last_access", 10**6), "after the clock"),
    "a root with an edge": (lambda t, n: setattr(t.root, "edge", (9,)), "the root must be empty"),
    "a child that is a copy of its node": (
        lambda t, n: _node(t, n["inner"]).children.__setitem__(5, copy.copy(_node(t, n["other"]))),
        "is reached twice or not registered",
    ),
    "a registered node outside the tree": (
        lambda t, n: t._nodes.__setitem__(99, type(t.root)(99, (3,), None, 1)),
        "nodes [99] are registered but not in the tree",
    ),
    "a slot index that disagrees": (lambda t, n: t._by_slot.__setitem__(9, n["long"]), "the slot index"),
}

REFUSALS: dict[str, tuple[Callable, type, str]] = {
    "a lock bound of 0": (lambda t, n: RadixTree(max_readers=0), BadCount, "max_readers must be None or an int >= 1"),
    "evictable(-1)": (lambda t, n: t.evictable(-1), BadCount, "n must be a non-negative int"),
    "tokens that are not a sequence": (lambda t, n: t.insert(5, 6), BadTokens, "not int"),
    "a negative token": (lambda t, n: t.insert((1, -2), 6), BadTokens, "token 1 is -2"),
    "no tokens": (lambda t, n: t.insert((), 6), BadTokens, "the empty prefix holds no state"),
    "the pad slot": (lambda t, n: t.insert((3,), 0), BadSlot, "slot 0 is not a real slot id"),
    "a slot held twice": (lambda t, n: t.insert((3,), 1), BadSlot, "slot 1 is already held by node"),
    "a second publish": (lambda t, n: t.publish(n["long"]), WrongNodeState, "no unpublished slot to publish"),
    "a drop of published state": (lambda t, n: t.drop_unpublished(n["long"]), WrongNodeState, "no unpublished slot"),
    "a lock of an inner node": (lambda t, n: t.lock(n["inner"], 1), WrongNodeState, "no published slot to read"),
    "a second lock by one request": (lambda t, n: t.lock(n["long"], 10), LockRefused, "already holds a lock"),
    "a lock past the bound": (
        lambda t, n: (t.lock(n["long"], 13), t.lock(n["long"], 14)),
        LockRefused,
        "at the bound of 2 locks",
    ),
    "an unlock by a stranger": (lambda t, n: t.unlock(n["long"], 30), LockRefused, "request 30 holds no lock"),
    "a request id of -1": (lambda t, n: t.lock(n["long"], -1), BadRequestId, "request id -1"),
    "an evict of locked state": (lambda t, n: t.evict(n["long"]), WrongNodeState, "not an unlocked published slot"),
    "an evicted node": (lambda t, n: t.info(n["gone"]), UnknownNode, "never made, or evicted"),
    "a node id that is a bool": (lambda t, n: t.prefix(True), UnknownNode, "no node True"),
}


def problems() -> list[str]:
    out = []
    tree, n = built()
    try:
        tree.check()
    except TreeBroken as e:
        return [f"the tree its own operations built fails its check: {e}"]
    if tree.prefix(n["long"]) != (1, 2, 3, 4) or tree.sizes().slots != 3 or tree.evictable(5) != [n["other"]]:
        out.append(f"the built tree: prefix {tree.prefix(n['long'])}, {tree.sizes()}, evictable {tree.evictable(5)}")
    for what, (edit, words) in BREAKS.items():
        tree, n = built()
        edit(tree, n)
        try:
            tree.check()
            out.append(f"{what}: check() passes")
        except TreeBroken as e:
            if words not in str(e) or not str(e).startswith("check refused: "):
                out.append(f"{what}: check() says {str(e)[:150]!r}, not {words!r}")
            out += _pickled(e)
    for what, (call, kind, words) in REFUSALS.items():
        tree, n = built()
        try:
            call(tree, n)
            out.append(f"{what}: accepted")
        except CacheError as e:
            if type(e) is not kind or words not in str(e):
                out.append(f"{what}: {type(e).__name__} {str(e)[:150]!r}; want {kind.__name__} saying {words!r}")
            out += _pickled(e)
    return out


def _pickled(e: CacheError) -> list[str]:
    back = pickle.loads(pickle.dumps(e))
    same = type(back) is type(e) and str(back) == str(e) and (back.call, back.node) == (e.call, e.node)
    return [] if same else [f"{type(e).__name__} after pickling: {type(back).__name__} {back}"]
