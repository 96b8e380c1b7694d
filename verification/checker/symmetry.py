"""Symmetry reduction and a compact, decodable encoding of the abstract scheduler's worlds.

Request ids and session ids are names: nothing the correct scheduler decides depends on their
numbers (any waiting request may take a slot, in any order). So two worlds that differ only by
a renaming of requests and sessions have the same future up to that renaming, and the checker
needs to visit one of them. The renamings of actors are: any permutation of the plain requests,
times any permutation of the sessions with as many turns, a session moving together with its
turns position by position. A session's turns (submitted in order) and its turn in flight
(kept as a position among its turns) are not names.

Slot ids are names too, with one wrinkle. Every slot id in a world is renamed together: the
pool's records and free list, handles, a copy's source, the slots of a step in flight, the lock
record, and the cache node a slot names. Alloc takes the head of the free list, which the
renaming carries along; the one thing that reads a slot id's number is a fence, which appends
the slots it frees to the free list in id order. Two renamed worlds therefore have futures that
agree up to the renaming except in the order of slots freed by the same fence, and those are
free slots: identical records that nothing else names (a free slot under a step in flight, or
named by a live handle, breaks a state property, and the search stops there). Worlds that
differ only in the order of such slots are themselves renamings of each other (swap the two
free slots), so the quotient is exact for every property that reads no slot number.

The group `G` is the product of the two. A world's key is the exact image of the world under
one element of `G`: the slots are first renamed into a canonical order (`Codec.slot_renaming`:
by what each slot is and who holds it, described without ids; free slots in free-list order),
then the actor blocks are sorted. Two worlds with one key are thus renamings of each other
(sound whatever order is chosen); the better the order, the more renamed worlds meet.

The encoding (`Codec`) packs a world into `bytes` (whose hash Python caches) so that no actor
id appears anywhere but in the order of the actor blocks:

- a header: the epochs, the steps in flight (their epochs and slot sets), each slot's state,
  fence and readers count, the free list: nothing here names an actor;
- one block per request (phase, handle, lent, ran, the cached slot it matched, then three
  masks: the slots it owns, the slots lent to it, the steps in flight that advance it; with the
  prefix cache also the slots it holds a lock on and the slot it copies from in each step in
  flight) and per session (status, handle, its turn in flight as a position, the slots it owns
  and borrows). A slot's owner and borrower are read back from the masks (a cache-owned slot's
  owner is the node its slot names), a step's requests and copies from theirs, the pool's lock
  record from the lock masks, a record's id from its block's place.

`plain_key` lays the blocks out in id order: an exact, decodable image of the world (`world`
decodes it). `key` renames the slots canonically, then sorts the blocks of each class of
interchangeable actors (a session's block carries its turns' blocks along): a renaming of
actors only permutes the blocks of a class. `world(key)` then decodes a representative of the
class, which the checker expands in place of the world it met (for a symmetric policy the
futures agree up to the renaming).

A world outside the compact range (an id that names no actor of the workload, a field out of a
byte, a node not named by its slot: none that the correct scheduler reaches) raises
`OutOfRange` while it is packed and is kept exactly as `(EXACT, world)`; the reduction then
merges nothing for it. Any other error while packing is a bug of the codec and is raised.
"""

from __future__ import annotations

from slotwarden.model.pool import Pool
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import NOBODY, ActorKind, Slot

from slotwarden.verification.abstract.world import Request, Session, Step, World, node_of

_CACHE_OWNED = frozenset(spec.state for spec in LIFECYCLE.states if spec.owner is ActorKind.CACHE)

EXACT = "exact"
"""The tag of a key that holds its world as it is (a world outside the compact range)."""

FIELDS = {  # the fields the codec packs, per record; a field added elsewhere must be classified here
    World: ("pool", "requests", "sessions", "launched", "completed", "steps", "nodes"),
    Request: ("id", "session", "phase", "handle", "lent", "ran", "src"),
    Session: ("id", "status", "handle", "turn", "turns"),
    Step: ("epoch", "slots", "requests", "copies"),
    Slot: ("state", "owner", "borrower", "fence", "readers"),
    Pool: ("slots", "free", "locks"),
}
_NOONE = (-1,)  # the description of nobody holding a slot (`Codec.slot_renaming`)
_KEYS_KEPT = 1 << 17  # how many worlds' keys a codec remembers
_SLOT_BYTES = 3  # a slot in the header: state, fence, readers (owner and borrower: the actors' masks)


class OutOfRange(ValueError):
    """A world the compact encoding cannot hold (kept as `(EXACT, world)` instead)."""


def _check_fields() -> None:
    for record, fields in FIELDS.items():
        if record._fields != fields:
            raise TypeError(
                f"{record.__name__} has fields {record._fields}, the symmetry codec packs {fields}: classify the "
                "new field in verification/checker/symmetry.py (an actor id must be renamed, a plain value packed)"
            )


_check_fields()


def _small(v) -> int:
    """A plain value (None, a bool, a small int) as one byte: None -> 0, v -> v + 3."""
    if v is None:
        return 0
    if not -3 < v < 253:
        raise OutOfRange(v)
    return int(v) + 3


def _epoch(v: int) -> int:
    """An epoch (relative to the last completed step) as one byte: v -> v + 8."""
    if not -8 <= v < 248:
        raise OutOfRange(v)
    return v + 8


def _value(b: int):
    return None if b == 0 else b - 3


class Codec:
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
        self.exact = self.slots > 8  # a slot mask is one byte: larger pools are kept exactly
        self._req: dict = {}  # Request -> its block's plain part
        self._ses: dict = {}
        self._pools: dict = {}  # Pool -> (its header part, the tails of the actors' blocks)
        self._step_codes: dict = {}  # steps in flight -> (their header part, the requests' step masks)
        self._req_back: dict = {}  # (request index, plain part) -> Request
        self._ses_back: dict = {}
        self._slot_back: dict = {}  # (state, fence, readers) as packed -> the values
        self._pool_back: dict = {}  # (header part, owners, borrowers) -> Pool
        self._keys: dict = {}  # World -> its canonical key, for the worlds met lately
        self.places = self._places()
        self.identity = tuple(range(self.slots + 1))  # the slot renaming that renames nothing
        # a request's class among the actors: 0 plain, else (its session's turns, its position)
        self.req_class = tuple(
            0
            if sid is None
            else 16 * len(self.sessions[self.ses_index[sid]][1]) + 1 + self.sessions[self.ses_index[sid]][1].index(rid)
            for rid, sid in self.requests
        )

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
        head = bytes((_epoch(world.launched), _epoch(world.completed), len(steps))) + pool_code
        req_codes, ses_codes = self._req, self._ses
        if len(world.requests) != len(tails[0]) or len(world.sessions) != len(tails[1]):
            raise OutOfRange("not a world of this workload")
        try:
            reqs = [req_codes[r, new] + t for r, t in zip(world.requests, tails[0])]
        except KeyError:
            for k, r in enumerate(world.requests):
                if (r, new) not in req_codes:
                    req_codes[r, new] = self._req_code(k, r, new)
            reqs = [req_codes[r, new] + t for r, t in zip(world.requests, tails[0])]
        if steps:
            head += self._steps(steps, reqs, new)
        try:
            sess = [ses_codes[x, new] + t for x, t in zip(world.sessions, tails[1])]
        except KeyError:
            for k, x in enumerate(world.sessions):
                if (x, new) not in ses_codes:
                    ses_codes[x, new] = self._ses_code(k, x, new)
            sess = [ses_codes[x, new] + t for x, t in zip(world.sessions, tails[1])]
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
            out += (_epoch(st.epoch), mask)
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
        head = [0] * (_SLOT_BYTES * self.slots)
        for k, s in enumerate(pool.slots):
            code = (int(s.state), _small(s.fence), _small(s.readers))
            self._slot_back[code] = s.state, s.fence, s.readers
            at = new[k + 1] - 1
            head[_SLOT_BYTES * at : _SLOT_BYTES * at + _SLOT_BYTES] = code
            if s.state in _CACHE_OWNED:  # its owner is the node named by its slot: no actor's mask
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
        return _small(v)

    def _req_code(self, k: int, r: Request, new: tuple) -> bytes:
        if (r.id, r.session) != self.requests[k]:
            raise OutOfRange(r)
        return bytes(
            (
                _small(r.phase),
                self._slot_value(r.handle, new),
                _small(r.lent),
                _small(r.ran),
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
        return bytes((_small(s.status), self._slot_value(s.handle, new), turn))

    # -- the slots' canonical order ------------------------------------------------------------
    def slot_renaming(self, world: World) -> tuple:
        """The renaming of slot ids (old id -> new id, index 0 unused) that puts the slots in
        a canonical order: sorted by what each slot is (state, fence, readers, the steps in
        flight using it) and by who holds it, described without ids (an actor's kind, class
        and position, its phase or status, and whether its handle names the slot); the free
        slots last among equals, in free-list order; remaining ties by id. Any order gives an
        exact renaming (the key stays sound); this one makes renamed worlds meet."""
        slots = world.pool.slots
        n = self.slots
        if len(slots) != n:
            raise OutOfRange(world.pool)
        used = [0] * (n + 1)
        for b, st in enumerate(world.steps):
            for i in st.slots:
                if type(i) is int and 0 < i <= n:
                    used[i] |= 1 << b
        place = {i: p for p, i in enumerate(world.pool.free)}
        # a slot's description starts with what it is; who holds it is described only when two
        # slots are alike and one of them is held (else nobody's description is the same order)
        held: dict = {}  # what a slot is -> whether a slot so described is held
        tied = False
        for k, s in enumerate(slots):
            what = (s.state, s.fence, s.readers, used[k + 1])
            mine = s.owner != NOBODY or s.borrower != NOBODY
            if what in held:
                if mine or held[what]:
                    tied = True
                    break
                continue
            held[what] = mine
        if not tied:
            sig = [
                (int(s.state), s.fence, s.readers, used[k + 1], place.get(k + 1, -1), k) for k, s in enumerate(slots)
            ]
        else:
            found: dict = {}  # session index -> its description (`_session_part`)
            describe = self._holder
            sig = []
            for k, s in enumerate(slots):
                owner = _NOONE if s.owner == NOBODY else describe(world, s.owner, k + 1, found)
                borrower = _NOONE if s.borrower == NOBODY else describe(world, s.borrower, k + 1, found)
                sig.append((int(s.state), s.fence, s.readers, used[k + 1], owner, borrower, place.get(k + 1, -1), k))
        sig.sort()
        new = [0] * (n + 1)
        for at, t in enumerate(sig):
            new[t[-1] + 1] = at + 1
        return tuple(new)

    def _holder(self, world: World, actor: int, slot: int, found: dict) -> tuple:
        """Who holds a slot, with no id: (0,) not a request or a session (the cache); a
        request's class, phase and flags, whether its handle and source name the slot, and (a
        turn) its session as `_session_part` says; a session as `_session_part` says, and
        whether its handle names the slot."""
        r = self.req_index.get(actor)
        if r is not None:
            rec = world.requests[r]
            sid = rec.session
            unit = (
                ()
                if sid is None or sid not in self.ses_index
                else self._session_part(world, self.ses_index[sid], found)
            )
            src = 0 if rec.src is None else 1 + (rec.src == slot)
            return (1, self.req_class[r], rec.phase, rec.lent, rec.ran, rec.handle == slot, src, unit)
        j = self.ses_index.get(actor)
        if j is None:
            return (0,)
        return (2, world.sessions[j].handle == slot, self._session_part(world, j, found))

    def _session_part(self, world: World, j: int, found: dict) -> tuple:
        """A session with no id: its turns' count, its status, its turn in flight as a position,
        and each turn's phase and flags."""
        try:
            return found[j]
        except KeyError:
            pass
        rec = world.sessions[j]
        turn = 0 if rec.turn is None else 1 + rec.turns.index(rec.turn) if rec.turn in rec.turns else -1
        reqs = world.requests
        turns = tuple((reqs[i].phase, reqs[i].lent, reqs[i].ran) for i in self.req_turns[j])
        out = found[j] = (len(rec.turns), rec.status, turn, turns)
        return out

    def plain_key(self, world: World):
        """The world packed as it is: the blocks in id order."""
        return self._layout(world, False)

    def key(self, world: World):
        """The world renamed canonically, packed: one key per class of renamed worlds."""
        keys = self._keys
        try:
            return keys[world]
        except KeyError:
            pass
        if len(keys) >= _KEYS_KEPT:  # a search meets the same worlds again soon, rarely later
            keys.clear()
        found = keys[world] = self._layout(world, True)
        return found

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

    # -- decoding ----------------------------------------------------------------------------
    def world(self, key) -> World:
        """The world a `plain_key` packed; for a `key`, the representative of its class (ids
        given to the sorted blocks in order)."""
        if isinstance(key, tuple):
            return key[1]
        n_steps = key[2]
        end_pool = 3 + _SLOT_BYTES * self.slots
        end_pool += 1 + key[end_pool]
        at = end_pool + 2 * n_steps  # the first actor block
        n_slots, rb, sb = self.slots, self.req_block, self.ses_block
        owner = [NOBODY] * n_slots
        borrower = [NOBODY] * n_slots
        requests: list = [None] * len(self.requests)
        sessions: list = [None] * len(self.sessions)
        members: list = [[] for _ in range(n_steps)]
        copies: list = [[] for _ in range(n_steps)]
        locks: list = []
        tail = self.tail
        for is_request, index, actor, offset in self.places:
            b = at + offset
            if is_request:
                plain = key[b : b + rb - tail]
                rec = self._req_back.get((index, plain)) or self._request_back(index, plain)
                requests[index] = rec
                owns, borrows, steps = key[b + rb - tail], key[b + rb - tail + 1], key[b + rb - 1]
                if self.cache:
                    locks += [(actor, k + 1) for k in _BITS[key[b + rb - 4]]]
                    for n in range(n_steps):
                        if key[b + rb - 3 + n]:
                            copies[n].append((actor, key[b + rb - 3 + n]))
                for n in _BITS[steps]:
                    members[n].append(actor)
            else:
                plain = key[b : b + sb - 2]
                rec = self._ses_back.get((index, plain)) or self._session_back(index, plain)
                sessions[index] = rec
                owns, borrows = key[b + sb - 2], key[b + sb - 1]
            for k in _BITS[owns]:
                owner[k] = actor
            for k in _BITS[borrows]:
                borrower[k] = actor
        pool_key = (key[3:end_pool], tuple(owner), tuple(borrower), tuple(sorted(locks)) if self.cache else None)
        pool = self._pool_back.get(pool_key) or self._pool_of(pool_key)
        steps = tuple(
            Step(
                key[end_pool + 2 * n] - 8,
                _SLOT_SETS[key[end_pool + 2 * n + 1]],
                frozenset(members[n]),
                frozenset(copies[n]),
            )
            for n in range(n_steps)
        )
        return World(pool, tuple(requests), tuple(sessions), key[0] - 8, key[1] - 8, steps, self.nodes)

    def _request_back(self, index: int, plain: bytes) -> Request:
        rid, sid = self.requests[index]
        fields = [_value(b) for b in plain]
        fields[2], fields[3] = bool(fields[2]), bool(fields[3])  # lent, ran
        found = self._req_back[(index, plain)] = Request(rid, sid, *fields)
        return found

    def _session_back(self, index: int, plain: bytes) -> Session:
        sid, turns = self.sessions[index]
        turn = None if plain[2] == 0 else turns[plain[2] - 1]
        found = self._ses_back[(index, plain)] = Session(sid, _value(plain[0]), _value(plain[1]), turn, turns)
        return found

    def _pool_of(self, pool_key: tuple) -> Pool:
        head, owner, borrower, locks = pool_key
        slots = []
        for k in range(self.slots):
            at = _SLOT_BYTES * k
            state, fence, readers = self._slot_back[(head[at], head[at + 1], head[at + 2])]
            who = node_of(k + 1) if state in _CACHE_OWNED else owner[k]
            slots.append(Slot(state, who, borrower[k], fence, readers))
        found = self._pool_back[pool_key] = Pool(tuple(slots), tuple(head[_SLOT_BYTES * self.slots + 1 :]), locks)
        return found


_BITS = tuple(tuple(k for k in range(8) if m >> k & 1) for m in range(256))  # mask -> its bits
_SLOT_SETS = tuple(frozenset(k + 1 for k in bits) for bits in _BITS)  # mask -> the slot ids it names


_CODECS: dict = {}


def codec(world: World) -> Codec:
    """The codec of the workload `world` belongs to (its actors, sessions and turns, its pool's
    size), built once per workload."""
    shape = (
        tuple((r.id, r.session) for r in world.requests),
        tuple((s.id, s.turns) for s in world.sessions),
        len(world.pool.slots),
        world.nodes,
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
