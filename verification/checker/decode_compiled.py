"""The decoding in C (`verification/checker/_decode.c`, built into the `_key` extension), bound
to one codec.

`compiled_world(codec, Codec)` gives a function key -> the World `decoding.Decoding.world`
returns for it (equal, of the same record types), or None for a key it does not decode (an
`(EXACT, world)` key, anything it is unsure of: the codec's Python path then decodes it). The
codec's fixed facts are handed in once: the slots, the cache flag, the record types, its actors
and where each one's block lies (`places`), the node each slot names (`node_of`), the states the
cache owns, the slot sets (`packing.SLOT_SETS`) and the codec's `_slot_back`, read as decoded.
It is None where the extension is not built, where the codec keeps every world exactly, where
its workload does not fit the C tables, or where the codec's class changes any part of the
decoding the C restates (`DECODING`: a variant codec decodes in Python).
"""

from __future__ import annotations

from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import NOBODY, Slot
from slotwarden.verification.abstract.world import Request, Session, Step, World, node_of
from slotwarden.verification.checker.packing import CACHE_OWNED, SLOT_SETS

try:
    from slotwarden.verification.checker._key import Decoder
except ImportError:  # built without a C compiler: keys are decoded in Python
    Decoder = None

RECORDS = (World, Pool, Slot, Request, Session, Step)  # the records the C side builds, in its order
DECODING = ("world", "_request_back", "_session_back", "_pool_of", "_places")  # what the C restates


def compiled_world(codec, base: type):
    """`codec`'s compiled decoding (`Decoder.world`), or None. `base`: the codec class the C restates."""
    if Decoder is None or codec.exact or any(getattr(type(codec), m) is not getattr(base, m) for m in DECODING):
        return None
    try:
        decoder = Decoder(
            codec.slots,
            codec.cache,
            RECORDS,
            tuple(len(record._fields) for record in RECORDS),
            codec.requests,
            codec.sessions,
            codec.places,
            codec.req_block,
            codec.ses_block,
            codec.tail,
            tuple(node_of(i) for i in range(codec.slots + 1)),
            NOBODY,
            CACHE_OWNED,
            SLOT_SETS,
            codec._slot_back,
            (codec.nodes, codec.drafts, frozenset(), frozenset()),  # the world's fields after its steps
        )
    except ValueError:  # a workload beyond the C tables (actors, slots): decoded in Python
        return None
    return decoder.world
