"""Symmetry reduction and a compact, decodable encoding of the abstract scheduler's worlds.

Request, session and slot ids are names: nothing the correct scheduler decides depends on their
numbers, so two worlds that differ only by a renaming have the same future up to it and the
checker visits one of them. A world's key (`key`) is the exact image of the world under one
renaming: the slots first put in a canonical order (`slot_order`), then the blocks of each class
of interchangeable actors sorted (plain requests; sessions with as many turns, each carrying its
turns along). Two worlds with one key are renamings of each other, so the key is sound whatever
order is chosen. `plain_key` packs the world as it is; `Codec.world` decodes either
(`decoding`; in C where built, `decode_compiled`). The encoding (`packing`) names no actor id
but by the order of the actor blocks. A world outside the compact range raises `OutOfRange`
while packed and is kept exactly as `(EXACT, world)`; any other error while packing is a bug of
the codec and is raised.
"""

from __future__ import annotations

from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import NOBODY, Slot
from slotwarden.verification.abstract.world import Request, Session, Step, World, node_of
from slotwarden.verification.checker.decode_compiled import compiled_world
from slotwarden.verification.checker.decoding import Decoding
from slotwarden.verification.checker.key_compiled import compiled_key
from slotwarden.verification.checker.packing import (
    CACHE_OWNED,
    EXACT,
    SLOT_BYTES,
    OutOfRange,
    epoch_byte,
    small,
)
from slotwarden.verification.checker.slot_order import SlotOrder

FIELDS = {  # the fields the codec packs, per record; a field added elsewhere must be classified here
    World: ("pool", "requests", "sessions", "launched", "completed", "steps", "nodes", "drafts", "windows", "behind"),
    Request: ("id", "session", "phase", "handle", "lent", "ran", "src"),
    Session: ("id", "status", "handle", "turn", "turns"),
    Step: ("epoch", "slots", "requests", "copies"),
    Slot: ("state", "owner", "borrower", "fence", "readers"),
    Pool: ("slots", "free", "locks"),
}
_KEYS_KEPT = 1 << 17  # how many worlds' keys a codec remembers, in each of its two generations


def _check_fields() -> None:
    for record, fields in FIELDS.items():
        if record._fields != fields:
            raise TypeError(
                f"{record.__name__} has fields {record._fields}, the symmetry codec packs {fields}: classify the "
                "new field in verification/checker/symmetry.py (an actor id must be renamed, a plain value packed)"
            )


_check_fields()


# The key's layout: a header (the epochs, the steps in flight as epoch and slot mask, each
# slot's state, fence and readers, the free list: nothing here names an actor), then one block
# per session (status, handle, its turn in flight as a position, the slots it owns and borrows)
# followed by its turns' blocks, then the plain requests' blocks (phase, handle, lent, ran, the
# cached slot it matched, and masks: the slots it owns, is lent, holds a lock on, copies from in
# each step in flight, and the steps that advance it). A slot's owner and borrower are read back
# from the masks (a cache-owned slot's owner is the node its slot names).
class Codec(SlotOrder, Decoding):
    """The encoding of the worlds of one workload (the actors of `root`, with their sessions and
    turns; those never change). `key`, `plain_key`: a world to bytes; `world`: back."""

    def __init__(self, root: World):
        self.requests = tuple((r.id, r.session) for r in root.requests)
        self.sessions = tuple((s.id, s.turns) for s in root.sessions)
        self.slots = len(root.pool.slots)
        self.req_index = {r.id: i for i, r in enumerate(root.requests)}
        self.ses_index = {s.id: i for i, s in enumerate(root.sessions)}
        self.plain = tuple(i for i, r in enumerate(root.requests) if r.session is None)
        classes: dict = {}
        for j, s in enumerate(root.sessions):
            classes.setdefault(len(s.turns), []).append(j)
        self.classes = tuple(tuple(c) for c in classes.values())
        self.req_turns = tuple(tuple(self.req_index[i] for i in s.turns) for s in root.sessions)
        self.units = tuple(tuple((j, self.req_turns[j]) for j in c) for c in self.classes)
        self.nodes = root.nodes  # the prefix cache's bound: fixed for the workload
        self.cache = root.pool.locks is not None  # the prefix cache runs: locks and copies are packed
        # a request's tail: owns, borrows, (the slots it holds a lock on,) then its step part:
        # (the slot it copies from in each step in flight, up to two,) the steps that advance it
        self.step_bytes = 3 if self.cache else 1
        self.tail = 2 + self.cache + self.step_bytes
        self.req_block = len(FIELDS[Request]) - 2 + self.tail  # plain fields, then the tail
        self.ses_block = 2 + len(FIELDS[Session]) - 2  # plain fields (turn as a position), then owns, borrows
        self.drafts = root.drafts  # speculative windows: fixed for the workload
        # a slot mask is one byte: larger pools are kept exactly; so are the worlds of speculative
        # decoding, whose windows (request, slot) and requests behind the packing does not hold
        self.exact = self.slots > 8 or self.drafts > 0
        self._req: dict = {}  # slot renaming -> Request -> its block's plain part
        self._ses: dict = {}  # slot renaming -> Session -> its block's plain part
        self._pools: dict = {}  # Pool -> (its header part, the tails of the actors' blocks)
        self._step_codes: dict = {}  # steps in flight -> (their header part, the requests' step masks)
        self._req_back: dict = {}  # (request index, plain part) -> Request
        self._ses_back: dict = {}
        self._slot_back: dict = {}  # (state, fence, readers) as packed -> the values
        self._pool_back: dict = {}  # (header part, owners, borrowers) -> Pool
        self._keys: dict = {}  # World -> its canonical key, for the worlds met lately
        self._older: dict = {}  # the ones met before those
        self._renamings: dict = {}  # (slots, free list, steps' slots) -> the slot renaming, or TIED
        self.places = self._places()
        self.identity = tuple(range(self.slots + 1))  # the slot renaming that renames nothing
        # a request's class among the actors: 0 plain, else (its session's turns, its position)
        self.req_class = tuple(
            0
            if sid is None
            else 16 * len(self.sessions[self.ses_index[sid]][1]) + 1 + self.sessions[self.ses_index[sid]][1].index(rid)
            for rid, sid in self.requests
        )
        self._compiled = compiled_key(self, Codec)  # the key in C (world -> bytes, or None), or None
        self._decoder = compiled_world(self, Codec)  # the decoding in C (key -> World, or None), or None

    def _places(self) -> tuple:
        """Where each actor's block lies in `_layout`'s order, from the first block: (is a
        request, its index, its id, the offset)."""
        places, at = [], 0
        for members in self.classes:
            for j in members:
                places.append((False, j, self.sessions[j][0], at))
                at += self.ses_block
                for i in self.req_turns[j]:
                    places.append((True, i, self.requests[i][0], at))
                    at += self.req_block
        for i in self.plain:
            places.append((True, i, self.requests[i][0], at))
            at += self.req_block
        return tuple(places)

    # -- encoding ----------------------------------------------------------------------------
    def _parts(self, world: World, new: tuple) -> tuple:
        """The header, the request blocks and the session blocks, in id order, of `world` with
        its slots renamed by `new` (old slot id -> new slot id; `self.identity`: as they are)."""
        pool_key = (world.pool, new)
        try:
            pool_code, tails = self._pools[pool_key]
        except KeyError:
            pool_code, tails = self._pools[pool_key] = self._pool_code(world.pool, new)
        steps = world.steps
        head = bytes((epoch_byte(world.launched), epoch_byte(world.completed), len(steps))) + pool_code
        try:
            req_codes, ses_codes = self._req[new], self._ses[new]
        except KeyError:
            req_codes, ses_codes = self._req.setdefault(new, {}), self._ses.setdefault(new, {})
        if len(world.requests) != len(tails[0]) or len(world.sessions) != len(tails[1]):
            raise OutOfRange("not a world of this workload")
        try:
            reqs = [req_codes[r] + t for r, t in zip(world.requests, tails[0])]
        except KeyError:
            for k, r in enumerate(world.requests):
                if r not in req_codes:
                    req_codes[r] = self._req_code(k, r, new)
            reqs = [req_codes[r] + t for r, t in zip(world.requests, tails[0])]
        if steps:
            head += self._steps(steps, reqs, new)
        try:
            sess = [ses_codes[x] + t for x, t in zip(world.sessions, tails[1])]
        except KeyError:
            for k, x in enumerate(world.sessions):
                if x not in ses_codes:
                    ses_codes[x] = self._ses_code(k, x, new)
            sess = [ses_codes[x] + t for x, t in zip(world.sessions, tails[1])]
        return head, reqs, sess

    def _steps(self, steps: tuple, reqs: list, new: tuple) -> bytes:
        """The steps in flight (epoch, slot mask); the requests each one advances get its bit
        in the step mask that ends their blocks."""
        try:
            code, masks = self._step_codes[steps, new]
        except KeyError:
            code, masks = self._step_codes[steps, new] = self._step_code(steps, new)
        for k, m in masks:
            reqs[k] = reqs[k][: -self.step_bytes] + m
        return code

    def _step_code(self, steps: tuple, new: tuple) -> tuple:
        out = []
        masks = [0] * len(self.requests)
        copies = [[0, 0] for _ in self.requests]
        index = self.req_index
        if self.cache and len(steps) > 2:
            raise OutOfRange(steps)
        for n, st in enumerate(steps):
            mask = 0
            for i in st.slots:
                if not 1 <= i <= self.slots:
                    raise OutOfRange(st)
                mask |= 1 << (new[i] - 1)
            out += (epoch_byte(st.epoch), mask)
            for rid in st.requests:
                if rid not in index:
                    raise OutOfRange(st)
                masks[index[rid]] |= 1 << n
            for rid, i in st.copies:
                if rid not in index or not self.cache or copies[index[rid]][n] or not 1 <= i <= self.slots:
                    raise OutOfRange(st)
                copies[index[rid]][n] = new[i]
        parts = tuple(
            (k, bytes((*copies[k], m)) if self.cache else bytes((m,)))
            for k, m in enumerate(masks)
            if m or copies[k] != [0, 0]
        )
        return bytes(out), parts

    def _pool_code(self, pool: Pool, new: tuple) -> tuple:
        """The pool's part of the header (each slot's state, fence and readers, in the order of
        the new ids; the free list, renamed) and, per request and per session, the tail of its
        block: the slots it owns and borrows, and (a request's) a zero step mask that `_steps`
        fills in."""
        n = len(self.requests)
        index = {**self.req_index, **{sid: n + j for sid, j in self.ses_index.items()}}
        owns = [0] * len(index)
        borrows = [0] * len(index)
        if (pool.locks is not None) != self.cache or len(pool.slots) != self.slots:
            raise OutOfRange(pool)
        locks = [0] * n
        for rid, i in pool.locks or ():  # the lock record: per request, the slots it holds a lock on
            if rid not in self.req_index or not 1 <= i <= self.slots:
                raise OutOfRange(pool)
            locks[self.req_index[rid]] |= 1 << (new[i] - 1)
        head = [0] * (SLOT_BYTES * self.slots)
        for k, s in enumerate(pool.slots):
            code = (int(s.state), small(s.fence), small(s.readers))
            self._slot_back[code] = s.state, s.fence, s.readers
            at = new[k + 1] - 1
            head[SLOT_BYTES * at : SLOT_BYTES * at + SLOT_BYTES] = code
            if s.state in CACHE_OWNED:  # its owner is the node named by its slot: no actor's mask
                if s.owner != node_of(k + 1):
                    raise OutOfRange(s)
            elif s.owner != NOBODY:
                if s.owner not in index:
                    raise OutOfRange(s)
                owns[index[s.owner]] |= 1 << at
            if s.borrower != NOBODY:
                if s.borrower not in index:
                    raise OutOfRange(s)
                borrows[index[s.borrower]] |= 1 << at
        head.append(len(pool.free))
        for i in pool.free:
            if not 1 <= i <= self.slots:
                raise OutOfRange(pool)
            head.append(new[i])
        tails = (
            tuple(
                bytes((owns[k], borrows[k], locks[k], 0, 0, 0) if self.cache else (owns[k], borrows[k], 0))
                for k in range(n)
            ),
            tuple(bytes((owns[k], borrows[k])) for k in range(n, len(index))),
        )
        return bytes(head), tails

    def _slot_value(self, v, new: tuple) -> int:
        """A field that names a slot (a handle, a copy's source), renamed, as one byte."""
        if type(v) is int and 1 <= v <= self.slots:
            v = new[v]
        return small(v)

    def _req_code(self, k: int, r: Request, new: tuple) -> bytes:
        if (r.id, r.session) != self.requests[k]:
            raise OutOfRange(r)
        return bytes(
            (
                small(r.phase),
                self._slot_value(r.handle, new),
                small(r.lent),
                small(r.ran),
                self._slot_value(r.src, new),
            )
        )

    def _ses_code(self, k: int, s: Session, new: tuple) -> bytes:
        if (s.id, s.turns) != self.sessions[k]:
            raise OutOfRange(s)
        if s.turn is None:
            turn = 0
        elif s.turn in s.turns:
            turn = 1 + s.turns.index(s.turn)
        else:
            raise OutOfRange(s)
        return bytes((small(s.status), self._slot_value(s.handle, new), turn))

    def plain_key(self, world: World):
        """The world packed as it is: the blocks in id order."""
        return self._layout(world, False)

    def key(self, world: World):
        """The world renamed canonically, packed: one key per class of renamed worlds (in C
        where built, `key_compiled`: the same bytes)."""
        if self._compiled is not None:  # in C: no memo (it costs more than the key, hashing the world)
            found = self._compiled(world)
            if found is not None:
                return found
        keys = self._keys
        found = keys.get(world)
        if found is None:
            found = self._older.get(world)
            if found is None:
                found = self._layout(world, True)
            if len(keys) >= _KEYS_KEPT:  # a search meets the same worlds again soon, rarely later:
                self._older, self._keys = keys, {}  # the older half goes at the next turn over
                keys = self._keys
            keys[world] = found
        return found

    def world(self, key) -> World:
        """`Decoding.world`: in C where built (`decode_compiled`: the same world), else in Python."""
        if self._decoder is not None:
            found = self._decoder(key)
            if found is not None:
                return found
        return Decoding.world(self, key)

    def _layout(self, world: World, canonical: bool):
        """The header, then each class of sessions (a session's block followed by its turns'
        blocks; sorted when `canonical`), then the plain requests (sorted when `canonical`)."""
        if self.exact:
            return (EXACT, world)
        try:
            new = self.slot_renaming(world) if canonical else self.identity
            head, reqs, sess = self._parts(world, new)
        except OutOfRange:
            return (EXACT, world)
        out = [head]
        for members in self.units:
            if len(members) == 1:  # a session alone in its class: nothing to sort
                j, turns = members[0]
                out.append(sess[j])
                out += [reqs[i] for i in turns]
            else:
                groups = [sess[j] + b"".join([reqs[i] for i in turns]) for j, turns in members]
                if canonical:
                    groups.sort()
                out += groups
        if self.plain:
            plain = [reqs[i] for i in self.plain]
            if canonical:
                plain.sort()
            out += plain
        return b"".join(out)


_CODECS: dict = {}


def codec(world: World) -> Codec:
    """The codec of the workload `world` belongs to (its actors, sessions and turns, its pool's
    size), built once per workload."""
    shape = (
        tuple((r.id, r.session) for r in world.requests),
        tuple((s.id, s.turns) for s in world.sessions),
        len(world.pool.slots),
        world.nodes,
        world.drafts,
        world.pool.locks is not None,
    )
    found = _CODECS.get(shape)
    if found is None:
        found = _CODECS[shape] = Codec(world)
    return found


def key(world: World):
    """`Codec.key` with the codec of `world`'s workload."""
    return codec(world).key(world)


def plain_key(world: World):
    """`Codec.plain_key` with the codec of `world`'s workload."""
    return codec(world).plain_key(world)
