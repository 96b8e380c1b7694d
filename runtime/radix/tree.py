"""`RadixTree`: a radix tree over token ids whose nodes hold recurrent-state slots.

A node's prefix is the edges from the root to it; its slot holds the state after exactly that
prefix. Node ids are never reused; a node's id is the cache's actor id (`Actor.cache(node)`).
The tree answers questions and never touches the pool; its calls follow the cache states:

    insert(tokens, slot)    a finished request donates its slot: unpublished (CACHING)
    publish(node)           at the fence of the step that wrote it: matchable (CACHED)
    drop_unpublished(node)  the write was aborted instead
    match(tokens)           the longest published prefix; lock/unlock it around a copy
    evictable(n), evict     unlocked published nodes, least recently used first

A slotless node with no children is removed (so is each ancestor left so), one with one child
merged into it; `check()` verifies this. Recency: a clock advanced by `match`, `insert`, `lock`.
"""

from __future__ import annotations

from slotwarden.model.errors import shown

import heapq

from slotwarden.runtime.radix.errors import BadCount, BadSlot, LockRefused, TreeBroken, UnknownNode, WrongNodeState
from slotwarden.runtime.radix.node import (
    Inserted,
    Match,
    Node,
    NodeInfo,
    Sizes,
    check_node,
    check_rid,
    common,
    describe,
    tokens_of,
)

ROOT = 0
"""The root's node id: the empty prefix, which never holds a slot."""


class RadixTree:
    """The prefix tree; see the module's docstring for the contract."""

    def __init__(self, max_readers: int | None = None):
        """`max_readers`: the bound of a node's lock count (the model's bound of a cached
        slot's readers); None for no bound."""
        if max_readers is not None and (
            isinstance(max_readers, bool) or not isinstance(max_readers, int) or max_readers < 1
        ):
            raise BadCount("RadixTree", f"max_readers must be None or an int >= 1, not {shown(max_readers)}")
        self.max_readers = max_readers
        self.root = Node(ROOT, (), None, 0)
        self._nodes: dict[int, Node] = {ROOT: self.root}
        self._by_slot: dict[int, int] = {}  # slot -> the node holding it
        self._next_id = ROOT + 1
        self._clock = 0

    # -- questions ---------------------------------------------------------------------------
    def match(self, tokens) -> Match:
        """The longest prefix of `tokens` ending at a node that holds a published slot with
        room for one more lock, and touches that node. Unpublished slots, slots whose lock
        count is at `max_readers` (the caller could not lock them: a shorter prefix, or none,
        matches instead) and prefixes ending inside an edge never match. The match may cover
        all of `tokens`: a caller that must feed at least one token matches `tokens[:-1]`."""
        tokens = tokens_of("match", tokens, allow_empty=True)
        best, node, pos = None, self.root, 0
        while pos < len(tokens):
            child = node.children.get(tokens[pos])
            if child is None or tokens[pos : pos + len(child.edge)] != child.edge:
                break
            node, pos = child, pos + len(child.edge)
            if node.published and (self.max_readers is None or node.locks < self.max_readers):
                best = node
        if best is None:
            return Match(None, 0)
        self._touch(best)
        return Match(best.id, best.end)

    def evictable(self, n: int) -> list[int]:
        """Up to `n` nodes `evict` would take (published, unlocked), in the order to take
        them: nodes with no slot below them first, least recently used first within each
        kind. A node with slots below it is the shared start of longer cached prompts, so it
        goes last; it can still go (its slot is its own), so locks below never pin it."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise BadCount("evictable", f"n must be a non-negative int, not {shown(n)}")
        below = self._slot_below()
        cands = [x for x in self._nodes.values() if x.published and x.locks == 0]
        best = heapq.nsmallest(n, cands, key=lambda x: (below[x.id], x.last_access, x.id))
        return [x.id for x in best]

    def info(self, node: int) -> NodeInfo:
        x = self._node("info", node)
        parent = None if x.parent is None else x.parent.id
        return NodeInfo(x.id, parent, x.end, x.slot, x.published, x.locks, frozenset(x.holders), x.last_access)

    def prefix(self, node: int) -> tuple[int, ...]:
        """The tokens from the root to `node`."""
        x, parts = self._node("prefix", node), []
        while x is not None:
            parts.append(x.edge)
            x = x.parent
        return tuple(t for edge in reversed(parts) for t in edge)

    def holding(self) -> dict[int, int]:
        """Every slot the tree holds, with its node."""
        return dict(self._by_slot)

    def sizes(self) -> Sizes:
        xs = self._nodes.values()
        return Sizes(
            nodes=len(self._nodes),
            slots=len(self._by_slot),
            published=sum(x.published for x in xs),
            locked=sum(x.locks > 0 for x in xs),
            tokens=sum(len(x.edge) for x in xs),
        )

    # -- mutations ---------------------------------------------------------------------------
    def insert(self, tokens, slot: int) -> Inserted:
        """The node whose prefix is `tokens`, made if needed (an edge split where `tokens`
        ends inside it), and touches it. If it has no slot it takes `slot`, unpublished;
        if it has one, nothing else changes and the caller keeps `slot`. Refused, with nothing
        changed, for empty tokens or a slot that is not real or is already in the tree."""
        tokens = tokens_of("insert", tokens)
        if isinstance(slot, bool) or not isinstance(slot, int) or slot < 1:
            raise BadSlot("insert", f"slot {shown(slot)} is not a real slot id (an int >= 1)", slot=slot)
        if slot in self._by_slot:
            owner = self._nodes[self._by_slot[slot]]
            raise BadSlot("insert", f"slot {slot} is already held by {describe(owner)}", node=owner.id, slot=slot)
        node, pos = self.root, 0
        while pos < len(tokens):
            child = node.children.get(tokens[pos])
            if child is None:
                child = self._add(node, tokens[pos:])
            k = common(child.edge, tokens, pos)
            if k < len(child.edge):
                child = self._split(child, k)
            node, pos = child, pos + k
        self._touch(node)
        if node.slot is not None:
            return Inserted(node.id, False)
        node.slot, self._by_slot[slot] = slot, node.id
        return Inserted(node.id, True)

    def publish(self, node: int) -> None:
        """The write of the node's slot is fenced: it becomes matchable."""
        x = self._node("publish", node)
        if x.slot is None or x.published:
            raise WrongNodeState("publish", f"{describe(x)} has no unpublished slot to publish", node=node)
        x.published = True

    def drop_unpublished(self, node: int) -> int:
        """The write of the node's slot was aborted: the node gives the slot back, unread."""
        x = self._node("drop_unpublished", node)
        if x.slot is None or x.published:
            raise WrongNodeState("drop_unpublished", f"{describe(x)} has no unpublished slot to drop", node=node)
        return self._take_slot(x)

    def lock(self, node: int, rid: int) -> None:
        """Request `rid` reads the node's published slot: it cannot be evicted until unlocked."""
        x = self._node("lock", node)
        check_rid("lock", rid, node)
        if not x.published:
            raise WrongNodeState("lock", f"{describe(x)} has no published slot to read", node=node, rid=rid)
        if rid in x.holders:
            raise LockRefused("lock", f"request {rid} already holds a lock on {describe(x)}", node=node, rid=rid)
        if self.max_readers is not None and x.locks >= self.max_readers:
            why = f"{describe(x)} is at the bound of {self.max_readers} locks"
            raise LockRefused("lock", f"request {rid}: {why}", node=node, rid=rid)
        x.locks += 1
        x.holders.add(rid)
        self._touch(x)

    def unlock(self, node: int, rid: int) -> None:
        """Request `rid` is done reading: it gives back the lock it took."""
        x = self._node("unlock", node)
        check_rid("unlock", rid, node)
        if rid not in x.holders:
            raise LockRefused("unlock", f"request {rid} holds no lock on {describe(x)}", node=node, rid=rid)
        x.locks -= 1
        x.holders.discard(rid)

    def evict(self, node: int) -> int:
        """The node gives back its published, unlocked slot (which the caller releases)."""
        x = self._node("evict", node)
        if not x.published or x.locks:
            raise WrongNodeState("evict", f"{describe(x)} is not an unlocked published slot", node=node)
        return self._take_slot(x)

    # -- integrity ---------------------------------------------------------------------------
    def check(self) -> None:
        """Raises `TreeBroken` naming the first node that breaks an invariant of the tree."""
        seen, stack = {}, [self.root]
        if self.root.edge or self.root.parent is not None or self.root.slot is not None or self.root.published:
            raise TreeBroken("check", f"the root must be empty, not {describe(self.root)}", node=ROOT)
        while stack:
            x = stack.pop()
            if x.id in seen or self._nodes.get(x.id) is not x:
                raise TreeBroken("check", f"{describe(x)} is reached twice or not registered", node=x.id)
            seen[x.id] = x
            check_node(x, self.max_readers, self._clock)
            stack.extend(x.children.values())
        if len(seen) != len(self._nodes):
            lost = sorted(set(self._nodes) - set(seen))
            raise TreeBroken("check", f"nodes {lost} are registered but not in the tree", node=lost[0])
        held = {x.slot: x.id for x in seen.values() if x.slot is not None}
        if held != self._by_slot or len(held) != sum(x.slot is not None for x in seen.values()):
            raise TreeBroken("check", f"the slot index {self._by_slot} disagrees with the nodes' slots {held}")

    # -- inside ------------------------------------------------------------------------------
    def _node(self, call: str, node) -> Node:
        x = self._nodes.get(node) if isinstance(node, int) and not isinstance(node, bool) else None
        if x is None:
            raise UnknownNode(call, f"no node {shown(node)} in the tree (never made, or evicted)", node=node)
        return x

    def _touch(self, x: Node) -> None:
        self._clock += 1
        x.last_access = self._clock

    def _add(self, parent: Node, edge: tuple[int, ...]) -> Node:
        x = Node(self._next_id, edge, parent, parent.end + len(edge), last_access=self._clock)
        self._next_id += 1
        self._nodes[x.id] = parent.children[edge[0]] = x
        return x

    def _split(self, child: Node, k: int) -> Node:
        """A new node for the first `k` tokens of `child`'s edge, between it and its parent."""
        mid = self._add(child.parent, child.edge[:k])
        child.edge, child.parent = child.edge[k:], mid
        mid.children[child.edge[0]] = child
        return mid

    def _take_slot(self, x: Node) -> int:
        slot = x.slot
        x.slot, x.published = None, False
        del self._by_slot[slot]
        while x is not self.root and x.slot is None:
            parent = x.parent
            if not x.children:  # a slotless leaf: removed, and its parent looked at in turn
                del parent.children[x.edge[0]], self._nodes[x.id]
                x = parent
                continue
            if len(x.children) == 1:  # a slotless pass-through: merged into its child
                (child,) = x.children.values()
                child.edge, child.parent = x.edge + child.edge, parent
                parent.children[x.edge[0]] = child
                del self._nodes[x.id]
            break
        return slot

    def _slot_below(self) -> dict[int, bool]:
        """For every node, whether some node strictly below it holds a slot."""
        order, stack = [], [self.root]
        while stack:
            x = stack.pop()
            order.append(x)
            stack.extend(x.children.values())
        below = {}
        for x in reversed(order):  # children before parents
            below[x.id] = any(c.slot is not None or below[c.id] for c in x.children.values())
        return below
