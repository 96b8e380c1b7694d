"""The prefix tree's typed errors. Each is raised before the tree changes, and names the call,
the node (with its slot, whether it is published, its locks and who holds them) and the
request where there is one."""

from __future__ import annotations

from slotwarden.model.errors import SlotwardenError


class CacheError(SlotwardenError):
    """Base of the prefix tree's errors. `call` is the tree method refused; `node`, `rid` and
    `slot` are the node id, request id and slot id involved (None where there is none)."""

    def __init__(self, call: str, what: str, *, node: int | None = None, rid: int | None = None, slot=None):
        self.call, self.what, self.node, self.rid, self.slot = call, what, node, rid, slot
        super().__init__(f"{call} refused: {what}")

    def __reduce__(self):  # keyword-only arguments: pickle's default would call it with the text alone
        return (_rebuild, (type(self), self.call, self.what, self.node, self.rid, self.slot))


def _rebuild(cls, call, what, node, rid, slot):
    return cls(call, what, node=node, rid=rid, slot=slot)


class BadTokens(CacheError, ValueError):
    """Tokens that are not a non-empty sequence of non-negative ints."""


class BadSlot(CacheError, ValueError):
    """A slot id that is not a real slot (an int >= 1: never the pad slot 0 or a sentinel), or
    one that a node of the tree already holds (`node` names that node)."""


class BadRequestId(CacheError, ValueError):
    """A request id that is not a non-negative int."""


class BadCount(CacheError, ValueError):
    """A count that is not a non-negative int: `evictable`'s n, or a lock bound below 1."""


class UnknownNode(CacheError, LookupError):
    """A node id the tree never handed out, or whose node has since been evicted or pruned."""


class WrongNodeState(CacheError, ValueError):
    """The node's slot is not in the state the call needs: publishing a node with no slot or
    one already published, dropping a published slot, locking unpublished state, evicting a
    locked or unpublished node."""


class LockRefused(CacheError, ValueError):
    """A lock by a request that already holds one on the node, a lock at the bound of the
    lock count, or an unlock by a request that holds no lock on the node (SGLang #27147)."""


class TreeBroken(CacheError, RuntimeError):
    """`check()` found the tree breaking one of its own invariants (a bug in the tree, or
    something that edited its nodes from outside)."""
