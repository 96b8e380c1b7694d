"""The symmetry codec against brute force: over every reachable world of small workloads, the
plain key decodes back to the world itself, and two worlds share a canonical key exactly when
some renaming of requests and sessions (computed here independently, by enumerating the group)
maps one onto the other. Broken codecs that merge worlds they should not, or split an orbit,
are caught by the same check."""

from itertools import permutations, product

import pytest

from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import FREE_SLOT, NOBODY, State
from slotwarden.verification.checker import packing, symmetry
from slotwarden.verification.abstract import Bounds, initial
from slotwarden.verification.abstract.world import Request, node_of
from slotwarden.verification.checker.symmetry import EXACT, Codec
from worlds import reachable

WORKLOADS = (  # (bounds, how many renamings of requests and sessions, of slots)
    (Bounds(slots=1, requests=5, sessions=2, overlap=False, turns=1), 12, 1),  # s100 = r0; s101 = r1; r2..r4 plain
    (Bounds(slots=2, requests=5, sessions=2, overlap=True, turns=2), 2, 2),  # s100 = r0, r1; s101 = r2, r3; r4 plain
    (Bounds(slots=3, requests=3, sessions=1, overlap=True), 1, 6),  # s100 = r0, r1; r2 plain: slots only
    (Bounds(slots=3, requests=3, sessions=0, overlap=True, nodes=2), 6, 6),  # locks, copies, nodes named by slots
)


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


def slot_renamings(root) -> list:
    """Every renaming of the slots, as a tuple old id -> new id (index 0 unused)."""
    n = len(root.pool.slots)
    return [(0, *p) for p in permutations(range(1, n + 1))]


def rename(world, names: dict, slots: tuple = ()):
    """`world` with every request and session id renamed by `names`, and every slot id by
    `slots` (old id -> new id, index 0 unused; empty: kept), wherever an id appears."""

    def get(i):
        return names.get(i, i)

    def slot(i):
        return slots[i] if slots and type(i) is int and 0 < i < len(slots) else i

    def record(k, s):
        owner = node_of(slot(k + 1)) if s.owner == node_of(k + 1) else get(s.owner)
        return s._replace(owner=owner, borrower=get(s.borrower))

    new_slots = [None] * len(world.pool.slots)
    for k, s in enumerate(world.pool.slots):
        new_slots[slot(k + 1) - 1] = record(k, s)
    locks = world.pool.locks
    if locks is not None:
        locks = tuple(sorted((get(r), slot(i)) for r, i in locks))
    pool = Pool(tuple(new_slots), tuple(slot(i) for i in world.pool.free), locks)
    requests = [None] * len(world.requests)
    for r in world.requests:
        requests[get(r.id)] = r._replace(
            id=get(r.id), session=None if r.session is None else get(r.session), handle=slot(r.handle), src=slot(r.src)
        )
    base = world.sessions[0].id if world.sessions else 0
    sessions = [None] * len(world.sessions)
    for s in world.sessions:
        turn = None if s.turn is None else get(s.turn)
        sessions[get(s.id) - base] = s._replace(
            id=get(s.id), turn=turn, turns=tuple(get(i) for i in s.turns), handle=slot(s.handle)
        )
    steps = tuple(
        st._replace(
            slots=frozenset(slot(i) for i in st.slots),
            requests=frozenset(get(i) for i in st.requests),
            copies=frozenset((get(r), slot(i)) for r, i in st.copies),
        )
        for st in world.steps
    )
    return world._replace(pool=pool, requests=tuple(requests), sessions=tuple(sessions), steps=steps)


def faults(codec: Codec, worlds: list, renamings: list, slot_maps: list) -> list:
    """What `codec` gets wrong over `worlds`: a plain key that does not decode to its world, a
    canonical key shared by two orbits or split within one, a decoded representative outside
    its orbit."""
    found = []
    orbit_of = {}
    for w in worlds:
        if _decoded(codec, codec.plain_key(w)) != w:
            found.append(f"plain key does not decode: {w}")
        orbit_of[w] = frozenset(codec.plain_key(rename(w, g, p)) for g in renamings for p in slot_maps)
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


@pytest.mark.parametrize("bounds, n_names, n_slots", WORKLOADS, ids=lambda x: str(x) if isinstance(x, Bounds) else "")
def test_keys_are_exactly_the_orbits_of_renaming(bounds, n_names, n_slots):
    worlds = reachable(bounds)
    root = initial(bounds)
    renamings, slot_maps = group(root), slot_renamings(root)
    assert (len(renamings), len(slot_maps)) == (n_names, n_slots)
    assert faults(Codec(root), worlds, renamings, slot_maps) == []
    # what makes slot ids names: free slots are one record, which nothing else names
    for w in worlds:
        free = {i + 1 for i, s in enumerate(w.pool.slots) if s.state is State.FREE}
        assert all(w.pool.slots[i - 1] == FREE_SLOT for i in free) and set(w.pool.free) == free
        named = {r.handle for r in w.requests} | {r.src for r in w.requests} | {s.handle for s in w.sessions}
        assert not free & (named | {i for st in w.steps for i in st.slots})
    keys = {symmetry.key(w) for w in worlds}
    assert len(keys) < len(worlds) and all(isinstance(k, bytes) for k in keys)


class DropsRan(Codec):
    """Merges worlds that differ only in whether a request has run (a field left out)."""

    def _req_code(self, k, r, new):
        return super()._req_code(k, r._replace(ran=False), new)


class SortsTurnsApart(Codec):
    """Sorts sessions and their turns separately: a session is separated from its own turns."""

    def _layout(self, world, canonical):
        if not canonical:
            return super()._layout(world, canonical)
        head, reqs, sess = self._parts(world, self.slot_renaming(world))
        return head + b"".join(sorted(sess)) + b"".join(sorted(reqs))


class KeepsHandlesUnrenamed(Codec):
    """Renames the pool's slots but not the handles that name them: merges worlds in which a
    request holds a different one of two like slots than its handle says."""

    def _slot_value(self, v, new):
        return packing.small(v)


class RenamesNoSlots(Codec):
    """Never renames a slot: worlds that differ only by slot ids keep different keys."""

    def slot_renaming(self, world):
        return self.identity


class IgnoresPlainOrder(Codec):
    """Sorts nothing: renamed worlds keep different keys (an orbit split in two)."""

    def key(self, world):
        return self.plain_key(world)


@pytest.mark.parametrize(
    "broken",
    (DropsRan, SortsTurnsApart, IgnoresPlainOrder, KeepsHandlesUnrenamed, RenamesNoSlots),
    ids=lambda c: c.__name__,
)
def test_a_broken_codec_is_caught(broken):
    bounds = WORKLOADS[1][0]
    root = initial(bounds)
    assert faults(broken(root), reachable(bounds, limit=400), group(root), slot_renamings(root))


def test_worlds_outside_the_compact_range_are_kept_exactly():
    root = initial(WORKLOADS[0][0])
    codec = Codec(root)
    odd = root._replace(requests=(root.requests[0]._replace(handle=999),) + root.requests[1:])
    stranger = root._replace(pool=Pool((root.pool.slots[0]._replace(owner=77),), root.pool.free))
    locked = root._replace(pool=root.pool._replace(locks=()))  # a lock record names requests
    late = root._replace(launched=300)  # an epoch out of a byte
    for w in (odd, stranger, locked, late):
        assert codec.key(w) == (EXACT, w) and codec.world(codec.key(w)) is w
    assert NOBODY not in {r.id for r in root.requests}
    big = initial(Bounds(slots=9, requests=2, sessions=1))  # a slot mask holds eight slots
    assert Codec(big).key(big) == (EXACT, big)


class ReadsAMissingTable(Codec):
    """A codec bug: a lookup that fails (a KeyError or a TypeError while packing a request)."""

    def __init__(self, root, error):
        super().__init__(root)
        self.error = error

    def _req_code(self, k, r, new):
        raise self.error("a bug in the codec")


@pytest.mark.parametrize("error", (KeyError, TypeError, IndexError))
def test_a_bug_in_the_codec_is_raised_not_kept_exactly(error):
    """Only `OutOfRange` (a world the compact encoding cannot hold) falls back to an exact key."""
    root = initial(WORKLOADS[1][0])
    with pytest.raises(error, match="a bug in the codec"):
        ReadsAMissingTable(root, error).key(root)
    with pytest.raises(error, match="a bug in the codec"):
        ReadsAMissingTable(root, error).plain_key(root)


def test_a_new_record_field_must_be_classified(monkeypatch):
    monkeypatch.setitem(symmetry.FIELDS, Request, ("id", "session", "phase"))
    with pytest.raises(TypeError, match="classify the new field"):
        symmetry._check_fields()
