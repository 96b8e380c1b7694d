"""`RadixMachine`: a stateful Hypothesis machine that drives a prefix tree (`RadixTree` or a
subclass; `radix_machine_for(cls)` points it at another) and compares it after every step with
a plain reference: a dict from token tuple to (slot, published, lock holders, last touch).
Its moves are the scheduler's: insert (donate), admit (match a prompt, lock what it found),
lock, unlock, publish one node or fence them all, drop an aborted write, evict.

Checked at every call: `match` gives the longest published prefix with room for one more lock;
`insert` donates to a new prefix and not to one already held; `evictable` proposes only
published, unlocked nodes, slot-free below first, least recently used first, as many as asked
for or exist; every refusal raises its typed error and changes nothing. Checked after every
step: the tree's own `check()`, and every held prefix's node, slot, flag, holders and recency
against the reference, its sizes, and its slot index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from slotwarden.runtime.radix.tree import RadixTree
from slotwarden.runtime.radix.errors import BadSlot, LockRefused, WrongNodeState

TOKENS = st.lists(st.integers(0, 2), min_size=1, max_size=4).map(tuple)
RIDS = st.integers(0, 3)
MAX_READERS = 2  # small, so that the bound is reached


@dataclass
class Entry:
    """The reference's record of one held prefix."""

    node: int
    slot: int
    published: bool = False
    holders: set[int] = field(default_factory=set)
    touched: int = 0


class RadixMachine(RuleBasedStateMachine):
    tree_class: type = RadixTree

    def __init__(self):
        super().__init__()
        self.tree = self.tree_class(max_readers=MAX_READERS)
        self.ref: dict[tuple[int, ...], Entry] = {}
        self.clock = 0
        self.next_slot = 1

    # -- the reference -----------------------------------------------------------------------
    def touch(self, key) -> None:
        self.clock += 1
        self.ref[key].touched = self.clock

    def pick(self, data, locked: bool = False) -> tuple[int, ...]:
        """A held prefix; with `locked`, a locked one half the time there is one."""
        keys = sorted(k for k, e in self.ref.items() if e.holders) if locked else []
        if not keys or data.draw(st.booleans()):
            keys = sorted(self.ref)
        return data.draw(st.sampled_from(keys))

    def snapshot(self):
        t = self.tree
        nodes = sorted(
            (
                x.id,
                x.parent and x.parent.id,
                x.edge,
                x.slot,
                x.published,
                x.locks,
                tuple(sorted(x.holders)),
                x.last_access,
            )
            for x in t._nodes.values()
        )
        return nodes, dict(t._by_slot), t._clock

    def refused(self, error: type, call, *args) -> None:
        """`call(*args)` must raise `error` and leave the tree as it was."""
        before = self.snapshot()
        try:
            call(*args)
        except error:
            pass
        else:
            raise AssertionError(f"{call.__name__}{args} was accepted; the reference refuses it ({error.__name__})")
        assert self.snapshot() == before, f"the refused {call.__name__}{args} changed the tree"

    def expected_evictable(self) -> list[tuple[int, ...]]:
        def below(key):
            return any(k != key and k[: len(key)] == key for k in self.ref)

        cands = [k for k, e in self.ref.items() if e.published and not e.holders]
        return sorted(cands, key=lambda k: (below(k), self.ref[k].touched, self.ref[k].node))

    # -- rules -------------------------------------------------------------------------------
    @initialize(prefixes=st.lists(TOKENS, max_size=4), fence=st.booleans())
    def start(self, prefixes, fence):
        """A tree with a few prefixes in it, published or not (a tree left empty tests little)."""
        for tokens in prefixes:
            self.insert_new(tokens)
        if fence:
            self.fence()

    @rule(tokens=TOKENS, data=st.data())
    def insert(self, tokens, data):
        """A running request donates its slot for `tokens`; now and then a slot the tree holds."""
        if self.ref and data.draw(st.integers(0, 3)) == 0:
            return self.refused(BadSlot, self.tree.insert, tokens, self.ref[self.pick(data)].slot)
        self.insert_new(tokens)

    def insert_new(self, tokens):
        slot, self.next_slot = self.next_slot, self.next_slot + 1
        got = self.tree.insert(tokens, slot)
        if tokens in self.ref:
            assert got == (self.ref[tokens].node, False), f"insert over held {tokens}: {got}"
        else:
            assert got.donated, f"insert of a new prefix {tokens} did not take the slot: {got}"
            assert all(e.node != got.node for e in self.ref.values()), f"insert reused a held node: {got}"
            self.ref[tokens] = Entry(got.node, slot)
        self.touch(tokens)

    @rule(data=st.data(), extra=st.lists(st.integers(0, 2), max_size=3).map(tuple), lock=st.booleans(), rid=RIDS)
    def admit(self, data, extra, lock, rid):
        """What admission does: match a prompt (often one extending a held prefix), and lock
        what it found to copy from it."""
        base = self.pick(data) if self.ref and data.draw(st.booleans()) else ()
        key = self.matched(base + extra)
        if key is not None and lock:
            self.lock_key(key, rid)

    def matched(self, tokens):
        """Matches `tokens` against the reference; the key found, or None."""
        held = [
            k for k, e in self.ref.items() if e.published and len(e.holders) < MAX_READERS and tokens[: len(k)] == k
        ]
        got = self.tree.match(tokens)
        if not held:
            assert got == (None, 0), f"match {tokens} found {got}; nothing published with room for a lock is a prefix"
            return None
        key = max(held, key=len)
        why = "the longest published with room for a lock"
        assert got == (self.ref[key].node, len(key)), f"match {tokens} gave {got}, {why} is {key}"
        self.touch(key)
        return key

    @precondition(lambda self: self.ref)
    @rule(data=st.data(), rid=RIDS)
    def lock(self, data, rid):
        self.lock_key(self.pick(data), rid)

    def lock_key(self, key, rid):
        e = self.ref[key]
        if not e.published:
            return self.refused(WrongNodeState, self.tree.lock, e.node, rid)
        if rid in e.holders or len(e.holders) >= MAX_READERS:
            return self.refused(LockRefused, self.tree.lock, e.node, rid)
        self.tree.lock(e.node, rid)
        e.holders.add(rid)
        self.touch(key)

    @precondition(lambda self: self.ref)
    @rule(data=st.data())
    def unlock(self, data):
        """By a holder, or by a request that holds no lock (refused), often on a locked node."""
        key = self.pick(data, locked=True)
        e = self.ref[key]
        rid = data.draw(st.sampled_from(sorted(e.holders)) if e.holders and data.draw(st.booleans()) else RIDS)
        if rid not in e.holders:
            return self.refused(LockRefused, self.tree.unlock, e.node, rid)
        self.tree.unlock(e.node, rid)
        e.holders.discard(rid)

    @precondition(lambda self: self.ref)
    @rule(data=st.data())
    def publish(self, data):
        e = self.ref[self.pick(data)]
        if e.published:
            return self.refused(WrongNodeState, self.tree.publish, e.node)
        self.tree.publish(e.node)
        e.published = True

    @rule()
    def fence(self):
        """The step that wrote every unpublished slot is fenced: all are published."""
        for e in self.ref.values():
            if not e.published:
                self.tree.publish(e.node)
                e.published = True

    @precondition(lambda self: self.ref)
    @rule(data=st.data())
    def drop_unpublished(self, data):
        key = self.pick(data)
        e = self.ref[key]
        if e.published:
            return self.refused(WrongNodeState, self.tree.drop_unpublished, e.node)
        assert self.tree.drop_unpublished(e.node) == e.slot
        del self.ref[key]

    @rule(n=st.integers(0, 3))
    def evict_lru(self, n):
        got = self.tree.evictable(n)
        by_node = {e.node: k for k, e in self.ref.items()}
        for node in got:
            e = self.ref.get(by_node.get(node))
            assert e is not None and e.published and not e.holders, f"evictable proposed {node}: {e}"
        want = [self.ref[k].node for k in self.expected_evictable()[:n]]
        assert got == want, f"evictable({n}) gave {got}, least recently used first is {want}"
        if got:
            key = by_node[got[0]]
            assert self.tree.evict(got[0]) == self.ref.pop(key).slot

    @precondition(lambda self: self.ref)
    @rule(data=st.data())
    def evict_any(self, data):
        """Any node, often a locked one: only an unlocked published node is evicted."""
        key = self.pick(data, locked=True)
        e = self.ref[key]
        if not e.published or e.holders:
            return self.refused(WrongNodeState, self.tree.evict, e.node)
        assert self.tree.evict(e.node) == e.slot
        del self.ref[key]

    # -- after every step --------------------------------------------------------------------
    @invariant()
    def agrees_with_the_reference(self):
        t = self.tree
        t.check()
        for key, e in self.ref.items():
            info = t.info(e.node)
            assert t.prefix(e.node) == key, f"node {e.node} spells {t.prefix(e.node)}, held for {key}"
            have = (info.slot, info.published, set(info.holders), info.locks, info.last_access)
            want = (e.slot, e.published, e.holders, len(e.holders), e.touched)
            assert have == want, f"node {e.node} for {key}: (slot, published, holders, locks, touched) {have} != {want}"
        assert t.holding() == {e.slot: e.node for e in self.ref.values()}, "the slot index disagrees"
        prefixes = {k[:i] for k in self.ref for i in range(1, len(k) + 1)}
        sizes = t.sizes()
        want = (len(self.ref), sum(e.published for e in self.ref.values()), len(prefixes))
        assert (sizes.slots, sizes.published, sizes.tokens) == want, (
            f"sizes {sizes}, want (slots, published, tokens) {want}"
        )
        assert sizes.locked == sum(bool(e.holders) for e in self.ref.values()), f"sizes {sizes}: locked"


def radix_machine_for(tree_class: type) -> type:
    """The machine driving `tree_class` (a `RadixTree` subclass, e.g. a deliberately broken one)."""
    return type(f"RadixMachine_{tree_class.__name__}", (RadixMachine,), {"tree_class": tree_class})
