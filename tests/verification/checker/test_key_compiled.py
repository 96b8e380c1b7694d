"""The canonical key in C against the Python key: byte for byte on every reachable world of the
tests' bounds, the symmetry tests' workloads and the default run's cache bounds, and on the
worlds the history mutants reach, where it declines only the worlds Python keeps exactly; worlds
made out of the compact range are left to Python; a key made in C decodes as the Python one
does; without the extension the codec packs in Python. A C key bound wrongly is caught."""

import pytest

from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import NOBODY, Slot, State
from slotwarden.verification.abstract import Bounds, initial
from slotwarden.verification.abstract.world import Step, node_of
from slotwarden.verification.checker import key_compiled
from slotwarden.verification.checker.bounds import TEST_BOUNDS
from slotwarden.verification.checker.symmetry import EXACT, Codec
from slotwarden.verification.mutants.history import LIVENESS_MUTANTS, MUTANTS
from worlds import CODEC_BOUNDS, SYMMETRY_WORKLOADS, reachable

pytest.importorskip("slotwarden.verification.checker._key")

BOUNDS = CODEC_BOUNDS


def mismatches(codec: Codec, worlds: list) -> list:
    """The worlds on which `codec`'s C key is not its Python key (`_layout`): other bytes, bytes
    for a world Python keeps exactly, or None (declined) for a world Python packs."""
    wrong = []
    for w in worlds:
        ours, python = codec._compiled(w), codec._layout(w, True)
        if not (ours == python if isinstance(python, bytes) else ours is None and python == (EXACT, w)):
            wrong.append(w)
    return wrong


@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_the_c_key_is_the_python_key_on_every_reachable_world(bounds):
    codec = Codec(initial(bounds))
    assert codec._compiled is not None
    worlds = reachable(bounds)
    assert mismatches(codec, worlds) == []
    assert all(isinstance(codec.key(w), bytes) for w in worlds)


@pytest.mark.parametrize("mutant", [m for m in MUTANTS + LIVENESS_MUTANTS if m.policy], ids=lambda m: m.name)
def test_the_c_key_is_the_python_key_on_the_worlds_a_mutant_reaches(mutant):
    codec = Codec(initial(mutant.bounds))
    assert mismatches(codec, reachable(mutant.bounds, limit=600, policy=mutant.policy())) == []


def test_a_key_made_in_c_decodes_as_the_python_key_does():
    bounds = Bounds(slots=3, requests=4, sessions=1, overlap=False, nodes=2)
    ours, python, worlds = Codec(initial(bounds)), Codec(initial(bounds)), reachable(bounds)
    python._compiled = None
    assert all(ours.world(ours.key(w)) == python.world(python.key(w)) for w in worlds)


def test_worlds_outside_the_compact_range_are_left_to_python():
    root = initial(Bounds(slots=2, requests=3, sessions=1, overlap=True))
    r0, s0, slot, step = root.requests[0], root.sessions[0], root.pool.slots[0], Step(0, frozenset(), frozenset())
    cache = initial(Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2))
    kept = (  # kept exactly by the Python key, with the codec of `root` or of `cache`
        root._replace(requests=(r0._replace(handle=999),) + root.requests[1:]),  # a value out of a byte
        root._replace(requests=root.requests[::-1]),  # requests out of id order
        root._replace(sessions=(s0._replace(turn=2),)),  # a turn not of its session
        root._replace(sessions=(s0._replace(turns=(0,)),)),  # a session of another workload
        root._replace(pool=root.pool._replace(slots=(slot._replace(owner=77),) + root.pool.slots[1:])),
        root._replace(pool=root.pool._replace(locks=())),  # a lock record where the cache does not run
        root._replace(pool=Pool(root.pool.slots[:1], (1,))),  # a pool of another size
        root._replace(launched=300),  # an epoch out of a byte
        root._replace(steps=(step._replace(slots=frozenset({9})),)),  # a step on no slot of the pool
        root._replace(steps=(step._replace(copies=frozenset({(0, 1)})),)),  # a copy where the cache does not run
        cache._replace(steps=(step,) * 3),  # three steps in flight beside the cache
        cache._replace(pool=cache.pool._replace(locks=((100, 1),))),  # a lock held by no request
        cache._replace(pool=cache.pool._replace(slots=(Slot(State.CACHED, node_of(2)),) + cache.pool.slots[1:])),
    )
    for w in kept:
        codec = Codec(cache if w.nodes else root)
        assert codec._compiled(w) is None and codec.key(w) == (EXACT, w)
    packed_in_python = (
        root._replace(requests=(r0._replace(handle=True),) + root.requests[1:]),  # a flag where a slot id goes
        root._replace(pool=root.pool._replace(free=(1, 1))),  # a slot free twice
    )
    for w in packed_in_python:
        codec = Codec(root)
        assert codec._compiled(w) is None and codec.key(w) == codec._layout(w, True)
    with pytest.raises(AttributeError):  # not a world: the Python key raises
        assert Codec(root)._compiled(root._replace(steps=(None,))) is None
        Codec(root).key(root._replace(steps=(None,)))
    big = initial(Bounds(slots=9, requests=2, sessions=1))  # a slot mask holds eight slots
    assert Codec(big)._compiled is None and Codec(big).key(big) == (EXACT, big)
    assert NOBODY not in {r.id for r in root.requests}


def test_without_the_extension_the_codec_packs_in_python(monkeypatch):
    monkeypatch.setattr(key_compiled, "Key", None)
    root = initial(TEST_BOUNDS[0])
    codec = Codec(root)
    assert codec._compiled is None and codec.key(root) == codec._layout(root, True)


class PythonPacking(Codec):
    """A codec variant that changes a part of the packing: it packs in Python."""

    def _slot_value(self, v, new):
        return super()._slot_value(v, new)


def test_a_codec_that_changes_the_packing_keeps_to_python():
    assert PythonPacking(initial(TEST_BOUNDS[0]))._compiled is None


def _bound_wrongly(monkeypatch, change):
    """The C key bound with one of its arguments changed by `change(args) -> args`."""
    real = key_compiled.Key
    monkeypatch.setattr(key_compiled, "Key", lambda *args: real(*change(list(args))))


def _no_classes(args):  # every request described as plain where like slots tie
    args[7] = (0,) * len(args[7])
    return args


def _unsorted_sessions(args):  # each session a class of its own: like sessions' groups left unsorted
    args[9] = tuple((j,) for c in args[9] for j in c)
    return args


def _no_plain_requests(args):  # the plain requests left out: the key ends after the sessions
    args[10] = ()
    return args


@pytest.mark.parametrize("change", (_no_classes, _unsorted_sessions, _no_plain_requests), ids=lambda f: f.__name__)
def test_a_c_key_bound_wrongly_is_caught(monkeypatch, change):
    bounds = SYMMETRY_WORKLOADS[1]  # two two-turn sessions and a plain request on two slots
    _bound_wrongly(monkeypatch, change)
    codec = Codec(initial(bounds))
    assert codec._compiled is not None and mismatches(codec, reachable(bounds))
