"""Symmetry reduction and a compact encoding of the abstract scheduler's worlds.

Request ids and session ids are names: nothing the correct scheduler decides depends on their
numbers (any waiting request may take a slot, in any order). So two worlds that differ only by
a renaming of requests and sessions have the same future up to that renaming, and the checker
needs to visit one of them. What is *not* a name stays as it is: slot ids (the free list's
order decides which slot an alloc takes, and a fence frees slots in id order), a session's
turns (submitted in order: a renaming moves a session together with its turns, position by
position), and a session's turn in flight (kept as a position among its turns).

`key(world)` renames every request and session canonically, then packs the renamed world into
`bytes` (whose hash Python caches): worlds related by a renaming get the same key, and worlds
that are not get different keys, because the renamed world is the world itself under a
renaming. The canonical order sorts each actor by a signature that holds everything about it
except its number (its record, and the slots and steps that name it), so two actors with equal
signatures can swap names without changing the world, and the order of ties does not matter.

`plain_key(world)` packs the world without renaming: for a policy that is not symmetric.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY

from .abstract_world import SESSION_BASE, World

_NONE = 0  # a missing handle or turn, packed


def _masks(world: World) -> tuple[dict, dict, dict]:
    """Per actor id: the slots it owns and the slots lent to it (bit i: slot id i + 1), and,
    per request id, the steps in flight that advance it (bit k: the k-th oldest)."""
    owns: dict = {}
    borrows: dict = {}
    for i, s in enumerate(world.pool.slots):
        if s.owner != NOBODY:
            owns[s.owner] = owns.get(s.owner, 0) | (1 << i)
        if s.borrower != NOBODY:
            borrows[s.borrower] = borrows.get(s.borrower, 0) | (1 << i)
    steps: dict = {}
    for k, st in enumerate(world.steps):
        for rid in st.requests:
            steps[rid] = steps.get(rid, 0) | (1 << k)
    return owns, borrows, steps


def _request_sig(r, owns, borrows, steps) -> tuple:
    return (
        r.phase,
        _NONE if r.handle is None else r.handle + 2,
        r.lent,
        r.ran,
        owns.get(r.id, 0),
        borrows.get(r.id, 0),
        steps.get(r.id, 0),
    )


def renaming(world: World) -> dict:
    """The canonical renaming of `world`: old id -> new id for every request and session."""
    owns, borrows, steps = _masks(world)
    sigs = {r.id: _request_sig(r, owns, borrows, steps) for r in world.requests}
    sessions = []
    for s in world.sessions:
        turn = _NONE if s.turn is None else 1 + s.turns.index(s.turn) if s.turn in s.turns else 255
        sig = (s.status, _NONE if s.handle is None else s.handle + 2, turn, owns.get(s.id, 0),
               tuple([sigs[i] for i in s.turns]), s.id)  # fmt: skip
        sessions.append(sig)
    sessions.sort()
    names: dict = {}
    n = 0
    for j, sig in enumerate(sessions):
        names[sig[-1]] = SESSION_BASE + j
        for i in world.sessions[sig[-1] - SESSION_BASE].turns:
            names[i] = n
            n += 1
    for _, rid in sorted([(sigs[r.id], r.id) for r in world.requests if r.session is None]):
        names[rid] = n
        n += 1
    return names


def key(world: World) -> bytes:
    """The world renamed canonically, packed: one key per class of renamed worlds."""
    return _pack(world, renaming(world))


def plain_key(world: World) -> bytes:
    """The world packed as it is (no renaming)."""
    return _pack(world, None)


def useful(world: World) -> bool:
    """Whether any renaming can relate two worlds of this workload: two plain requests, or two
    sessions with as many turns. Without one, `plain_key` is exact and cheaper."""
    plain = sum(r.session is None for r in world.requests)
    counts = [len(s.turns) for s in world.sessions]
    return plain > 1 or len(set(counts)) < len(counts)


def _pack(world: World, names: dict | None) -> bytes:
    """Every field of `world`, ids renamed by `names` (None: kept), as small ints packed into
    bytes (a tuple of ints if a value falls outside a byte, which only a broken world has)."""
    get = (names or {}).get
    out = [world.launched + 8, len(world.steps)]
    for s in world.pool.slots:
        out += (s.state, get(s.owner, s.owner) + 2, get(s.borrower, s.borrower) + 2, s.fence + 8)
    out.append(len(world.pool.free))
    out += world.pool.free
    for st in world.steps:
        out.append(st.epoch + 8)
        out += sorted(st.slots)
        out.append(254)
        out += sorted(get(i, i) for i in st.requests)
        out.append(255)
    requests, sessions = world.requests, world.sessions
    if names is not None:  # in their new order: new ids are 0.. for requests, SESSION_BASE.. for sessions
        requests, sessions = list(requests), list(sessions)
        for r in world.requests:
            requests[names[r.id]] = r
        for s in world.sessions:
            sessions[names[s.id] - SESSION_BASE] = s
    for r in requests:
        out += (
            r.phase,
            0 if r.session is None else get(r.session, r.session) - SESSION_BASE + 1,
            _NONE if r.handle is None else r.handle + 2,
            r.lent,
            r.ran,
        )
    for s in sessions:
        out += (
            s.status,
            _NONE if s.handle is None else s.handle + 2,
            _NONE if s.turn is None else get(s.turn, s.turn) + 1,
        )
        out += [get(i, i) for i in s.turns]
        out.append(255)
    try:
        return bytes(out)
    except ValueError:  # a value outside a byte (a broken world): keep it exact all the same
        return tuple(out)  # type: ignore[return-value]
