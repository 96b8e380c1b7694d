"""The symmetry codec against brute force: over every reachable world of small workloads, the
plain key decodes back to the world itself, and two worlds share a canonical key exactly when
some renaming of requests and sessions (computed here independently, by enumerating the group)
maps one onto the other. Broken codecs that merge worlds they should not, or split an orbit,
are caught by the same check."""

from itertools import permutations, product

import pytest

from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import NOBODY
from slotwarden.verification import symmetry
from slotwarden.verification.abstract import Bounds, Policy, initial, successors
from slotwarden.verification.abstract_world import Request
from slotwarden.verification.symmetry import EXACT, Codec

WORKLOADS = (
    Bounds(slots=1, requests=5, sessions=2, overlap=False, turns=1),  # s100 = r0; s101 = r1; r2..r4 plain
    Bounds(slots=2, requests=5, sessions=2, overlap=True, turns=2),  # s100 = r0, r1; s101 = r2, r3; r4 plain
)


def reachable(bounds: Bounds, limit: int = 1500) -> list:
    """Every world reachable under `bounds` (breadth-first, exact: no reduction), up to `limit`."""
    root = initial(bounds)
    seen = {root}
    frontier = [root]
    while frontier and len(seen) < limit:
        nxt = []
        for w in frontier:
            for out in successors(w, Policy(), bounds.overlap):
                if out.world not in seen:
                    seen.add(out.world)
                    nxt.append(out.world)
        frontier = nxt
    return list(seen)


def group(root) -> list:
    """Every renaming of the workload as a dict old id -> new id: plain requests permuted, and
    sessions with as many turns permuted together with their turns, position by position."""
    plain = [r.id for r in root.requests if r.session is None]
    classes: dict = {}
    for s in root.sessions:
        classes.setdefault(len(s.turns), []).append(s)
    choices = [[dict(zip(plain, p)) for p in permutations(plain)]]
    for members in classes.values():
        options = []
        for p in permutations(members):
            names = {}
            for a, b in zip(members, p):
                names[a.id] = b.id
                names.update(zip(a.turns, b.turns))
            options.append(names)
        choices.append(options)
    out = []
    for parts in product(*choices):
        names = {}
        for part in parts:
            names.update(part)
        out.append(names)
    return out


def rename(world, names: dict):
    """`world` with every request and session id renamed by `names`."""

    def get(i):
        return names.get(i, i)

    slots = tuple(s._replace(owner=get(s.owner), borrower=get(s.borrower)) for s in world.pool.slots)
    requests = [None] * len(world.requests)
    for r in world.requests:
        requests[get(r.id)] = r._replace(id=get(r.id), session=None if r.session is None else get(r.session))
    base = world.sessions[0].id if world.sessions else 0
    sessions = [None] * len(world.sessions)
    for s in world.sessions:
        turn = None if s.turn is None else get(s.turn)
        sessions[get(s.id) - base] = s._replace(id=get(s.id), turn=turn, turns=tuple(get(i) for i in s.turns))
    steps = tuple(st._replace(requests=frozenset(get(i) for i in st.requests)) for st in world.steps)
    return world._replace(
        pool=Pool(slots, world.pool.free), requests=tuple(requests), sessions=tuple(sessions), steps=steps
    )


def faults(codec: Codec, worlds: list, renamings: list) -> list:
    """What `codec` gets wrong over `worlds`: a plain key that does not decode to its world, a
    canonical key shared by two orbits or split within one, a decoded representative outside
    its orbit."""
    found = []
    orbit_of = {}
    for w in worlds:
        if _decoded(codec, codec.plain_key(w)) != w:
            found.append(f"plain key does not decode: {w}")
        orbit_of[w] = frozenset(codec.plain_key(rename(w, g)) for g in renamings)
    by_key: dict = {}
    for w in worlds:
        by_key.setdefault(codec.key(w), set()).add(orbit_of[w])
    for k, orbits in by_key.items():
        if len(orbits) > 1:
            found.append(f"one key for {len(orbits)} orbits: {k!r}")
        rep = _decoded(codec, k)
        if rep is None or codec.plain_key(rep) not in next(iter(orbits)):
            found.append(f"representative outside its orbit: {rep}")
    if len(by_key) != len(set(orbit_of.values())):
        found.append(f"{len(by_key)} keys for {len(set(orbit_of.values()))} orbits")
    return found


def _decoded(codec: Codec, key):
    try:
        return codec.world(key)
    except (IndexError, KeyError, ValueError):
        return None


@pytest.mark.parametrize("bounds", WORKLOADS, ids=str)
def test_keys_are_exactly_the_orbits_of_renaming(bounds):
    worlds = reachable(bounds)
    root = initial(bounds)
    renamings = group(root)
    assert len(renamings) == (12 if bounds.turns == 1 else 2)
    assert faults(Codec(root), worlds, renamings) == []
    keys = {symmetry.key(w) for w in worlds}
    assert len(keys) < len(worlds) and all(isinstance(k, bytes) for k in keys)


class DropsRan(Codec):
    """Merges worlds that differ only in whether a request has run (a field left out)."""

    def _req_code(self, k, r):
        return super()._req_code(k, r._replace(ran=False))


class SortsTurnsApart(Codec):
    """Sorts sessions and their turns separately: a session is separated from its own turns."""

    def _layout(self, world, canonical):
        if not canonical:
            return super()._layout(world, canonical)
        head, reqs, sess = self._parts(world)
        return head + b"".join(sorted(sess)) + b"".join(sorted(reqs))


class IgnoresPlainOrder(Codec):
    """Sorts nothing: renamed worlds keep different keys (an orbit split in two)."""

    def key(self, world):
        return self.plain_key(world)


@pytest.mark.parametrize("broken", (DropsRan, SortsTurnsApart, IgnoresPlainOrder), ids=lambda c: c.__name__)
def test_a_broken_codec_is_caught(broken):
    bounds = WORKLOADS[1]
    root = initial(bounds)
    assert faults(broken(root), reachable(bounds, limit=400), group(root))


def test_worlds_outside_the_compact_range_are_kept_exactly():
    root = initial(WORKLOADS[0])
    codec = Codec(root)
    odd = root._replace(requests=(root.requests[0]._replace(handle=999),) + root.requests[1:])
    stranger = root._replace(pool=Pool((root.pool.slots[0]._replace(owner=77),), root.pool.free))
    locked = root._replace(pool=root.pool._replace(locks=()))  # a lock record names requests
    for w in (odd, stranger, locked):
        assert codec.key(w) == (EXACT, w) and codec.world(codec.key(w)) is w
    assert NOBODY not in {r.id for r in root.requests}
    big = initial(Bounds(slots=9, requests=2, sessions=1))  # a slot mask holds eight slots
    assert Codec(big).key(big) == (EXACT, big)


def test_a_new_record_field_must_be_classified(monkeypatch):
    monkeypatch.setitem(symmetry.FIELDS, Request, ("id", "session", "phase"))
    with pytest.raises(TypeError, match="classify the new field"):
        symmetry._check_fields()
