"""The prefix tree's records: its `Node`, the shapes of its answers, and the checks of its
arguments and of one node's invariants (`check_node`)."""

from __future__ import annotations

from slotwarden.model.errors import shown

from dataclasses import dataclass, field
from numbers import Integral
from typing import NamedTuple

from slotwarden.runtime.radix.errors import BadRequestId, BadTokens, TreeBroken


@dataclass(eq=False, slots=True)
class Node:
    """One node. `end` is the length of its prefix; `locks` counts the read locks and
    `holders` says which requests hold them (one lock per request)."""

    id: int
    edge: tuple[int, ...]
    parent: Node | None
    end: int
    children: dict[int, Node] = field(default_factory=dict)
    slot: int | None = None
    published: bool = False
    locks: int = 0
    holders: set[int] = field(default_factory=set)
    last_access: int = 0


class Match(NamedTuple):
    """The longest published prefix: its node (None: no prefix is cached) and its length."""

    node: int | None
    length: int


class Inserted(NamedTuple):
    """Where `insert` put the prefix. `donated`: the node takes the caller's slot (INSERT it);
    otherwise the node already holds a slot for that prefix and the caller keeps (frees) its own."""

    node: int
    donated: bool


class NodeInfo(NamedTuple):
    id: int
    parent: int | None
    prefix_len: int
    slot: int | None
    published: bool
    locks: int
    holders: frozenset[int]
    last_access: int


class Sizes(NamedTuple):
    nodes: int  # the root included
    slots: int  # nodes holding a slot, published or not
    published: int
    locked: int  # nodes with at least one lock
    tokens: int  # tokens on all edges: the distinct prefixes the tree spells


def check_node(x: Node, max_readers: int | None, clock: int) -> None:
    def bad(what: str):
        raise TreeBroken("check", f"{describe(x)}: {what}", node=x.id)

    if x.parent is not None:
        if x.end != x.parent.end + len(x.edge):
            bad(f"prefix length {x.end}, but its parent's is {x.parent.end} and its edge {len(x.edge)} long")
        if x.slot is None and len(x.children) < 2:
            bad("a node without a slot must have two children or more (pruned or merged otherwise)")
    for first, child in x.children.items():
        if not child.edge or child.edge[0] != first or child.parent is not x:
            bad(f"child {child.id} under token {first} has edge {child.edge[:4]} and parent {child.parent.id}")
    if x.published and x.slot is None:
        bad("published without a slot")
    if x.locks != len(x.holders) or (x.locks and not x.published):
        bad(f"lock count {x.locks} but holders {sorted(x.holders)}")
    if max_readers is not None and x.locks > max_readers:
        bad(f"more locks than the bound {max_readers}")
    if x.last_access > clock:
        bad(f"last access {x.last_access} after the clock {clock}")


def describe(x: Node) -> str:
    slot = "no slot" if x.slot is None else f"slot {x.slot}, {'published' if x.published else 'unpublished'}"
    locks = f", {x.locks} locks held by requests {sorted(x.holders)}" if x.locks or x.holders else ""
    return f"node {x.id} (prefix of {x.end} tokens, {slot}{locks})"


def common(edge: tuple[int, ...], tokens: tuple[int, ...], pos: int) -> int:
    """How many tokens of `edge` `tokens` spells from `pos` on."""
    if tokens[pos : pos + len(edge)] == edge:  # the whole edge, compared at C speed
        return len(edge)
    k, n = 0, min(len(edge), len(tokens) - pos)
    while k < n and edge[k] == tokens[pos + k]:
        k += 1
    return k


def tokens_of(call: str, tokens, allow_empty: bool = False) -> tuple[int, ...]:
    """`tokens` as a tuple of ints (numpy ints taken too), or `BadTokens` naming the first bad one."""
    try:
        out = tuple(tokens)
    except TypeError:
        raise BadTokens(call, f"tokens must be a sequence of ints, not {type(tokens).__name__}") from None
    if set(map(type, out)) == {int} and min(out) >= 0:  # the usual case, checked at C speed
        return out
    for i, t in enumerate(out):
        if isinstance(t, bool) or not isinstance(t, Integral) or t < 0:
            raise BadTokens(call, f"token {i} is {shown(t)}, not a non-negative int")
    if not out and not allow_empty:
        raise BadTokens(call, "no tokens: the empty prefix holds no state")
    return tuple(int(t) for t in out)


def check_rid(call: str, rid, node: int) -> None:
    """`BadRequestId` unless `rid` is a non-negative int."""
    if isinstance(rid, bool) or not isinstance(rid, int) or rid < 0:
        raise BadRequestId(call, f"request id {shown(rid)} is not a non-negative int", node=node)
