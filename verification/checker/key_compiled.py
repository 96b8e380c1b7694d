"""The canonical key in C (`verification/checker/_key.c`), bound to one codec.

`compiled_key(codec, Codec)` gives a function world -> the bytes of `codec._layout(world, True)`, or
None for a world it does not pack (out of the compact range, or a value of an unexpected type:
the codec's Python path then packs it or keeps it exactly). The codec's fixed facts are handed
in once: its actors and their classes, the slots, the cache flag, the states the cache owns
(`packing.CACHE_OWNED`), the node each slot names (`node_of`), where each field read lies in its
record. It is None where the extension is not built, where the codec keeps every world exactly,
where its workload does not fit the C tables, or where the codec's class changes any part of the
packing the C restates (`PACKING`: a variant codec packs in Python).
"""

from __future__ import annotations

from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import NOBODY, Slot, State
from slotwarden.verification.abstract.world import Request, Session, Step, World, node_of
from slotwarden.verification.checker.packing import CACHE_OWNED

try:
    from slotwarden.verification.checker._key import Key
except ImportError:  # built without a C compiler: the key is packed in Python
    Key = None

READS = (  # the fields the C side reads, per record, in its order
    (World, ("pool", "requests", "sessions", "launched", "completed", "steps")),
    (Pool, ("slots", "free", "locks")),
    (Slot, ("state", "owner", "borrower", "fence", "readers")),
    (Request, ("id", "session", "phase", "handle", "lent", "ran", "src")),
    (Session, ("id", "status", "handle", "turn", "turns")),
    (Step, ("epoch", "slots", "requests", "copies")),
)
PACKING = (  # the methods of `symmetry.Codec` (and `SlotOrder`) whose result the C restates
    "_layout", "_parts", "_steps", "_step_code", "_pool_code", "_slot_value", "_req_code", "_ses_code",
    "slot_renaming", "_holder", "_session_part",
)  # fmt: skip


def compiled_key(codec, base: type):
    """`codec`'s compiled key (`Key.key`), or None. `base`: the codec class the C restates."""
    if Key is None or codec.exact or any(getattr(type(codec), m) is not getattr(base, m) for m in PACKING):
        return None
    reads = tuple((len(record._fields), *(record._fields.index(f) for f in names)) for record, names in READS)
    try:
        key = Key(
            codec.slots,
            codec.cache,
            reads,
            codec.requests,
            codec.sessions,
            codec.req_index,
            codec.ses_index,
            codec.req_class,
            codec.req_turns,
            codec.classes,
            codec.plain,
            tuple(node_of(i) for i in range(codec.slots + 1)),
            NOBODY,
            tuple(int(s) for s in CACHE_OWNED),
            State,
            codec._slot_back,
            codec.req_block,
            codec.ses_block,
        )
    except ValueError:  # a workload beyond the C tables (ids, turns, actors): packed in Python
        return None
    return key.key
