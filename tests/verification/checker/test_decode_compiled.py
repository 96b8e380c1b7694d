"""The decoding in C against the Python decoding: on every reachable world of the tests' bounds,
the symmetry tests' workloads and the default run's cache bounds, and on the worlds the history
mutants reach, the C world of each key (`key` and `plain_key`) is the Python one, of the same
types field by field, its sets in the same order, with the same hash; exact and malformed keys
are left to Python; without the extension, or for a codec that changes the decoding, the codec
decodes in Python. A C decoding bound wrongly is caught."""

import pytest

from slotwarden.verification.abstract import Bounds, initial
from slotwarden.verification.abstract.world import Request
from slotwarden.verification.checker import decode_compiled
from slotwarden.verification.checker.bounds import TEST_BOUNDS
from slotwarden.verification.checker.decoding import Decoding
from slotwarden.verification.checker.symmetry import EXACT, Codec
from slotwarden.verification.mutants.history import LIVENESS_MUTANTS, MUTANTS
from worlds import CODEC_BOUNDS, reachable, same

pytest.importorskip("slotwarden.verification.checker._key")

BOUNDS = CODEC_BOUNDS
CACHE = Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2)  # locks, copies, cache-owned slots


def mismatches(codec: Codec, worlds: list) -> list:
    """The keys (`key` and `plain_key` of each world) whose C world is not the Python one (other
    values, other types, another hash, or None: declined)."""
    wrong = []
    for w in worlds:
        for k in (codec.key(w), codec.plain_key(w)):
            ours, python = codec._decoder(k), Decoding.world(codec, k)
            if not (same(ours, python) and hash(ours) == hash(python)):
                wrong.append(k)
    return wrong


def test_same_tells_types_apart_where_equality_does_not():
    assert Request(0, None, 1, None, True) == Request(0, None, 1, None, 1)
    assert not same(Request(0, None, 1, None, True), Request(0, None, 1, None, 1))
    assert not same(frozenset({(0, True)}), frozenset({(0, 1)}))
    assert same(frozenset({(0, 1), (2, 3)}), frozenset({(0, 1), (2, 3)}))


@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_the_c_world_is_the_python_world_on_every_reachable_world(bounds):
    codec = Codec(initial(bounds))
    assert codec._decoder is not None
    assert mismatches(codec, reachable(bounds)) == []


@pytest.mark.parametrize("mutant", [m for m in MUTANTS + LIVENESS_MUTANTS if m.policy], ids=lambda m: m.name)
def test_the_c_world_is_the_python_world_on_the_worlds_a_mutant_reaches(mutant):
    codec = Codec(initial(mutant.bounds))
    assert mismatches(codec, reachable(mutant.bounds, limit=600, policy=mutant.policy())) == []


def test_exact_and_malformed_keys_are_left_to_python():
    codec = Codec(initial(CACHE))
    worlds = reachable(CACHE, limit=200)
    for w in worlds:
        k = codec.key(w)
        assert codec._decoder((EXACT, w)) is None and codec.world((EXACT, w)) is w
        assert codec._decoder(k[:-1]) is None and codec._decoder(k + b"\0") is None
        assert codec._decoder(bytearray(k)) is None
    root = codec.key(initial(CACHE))  # no steps in flight: the first block (a request's) follows the free list
    k = bytearray(root)
    k[3] = 255  # a slot state no world packed: not in `_slot_back`
    assert codec._decoder(bytes(k)) is None
    with pytest.raises(KeyError):
        codec.world(bytes(k))
    k = bytearray(root)
    k[3 + 3 * CACHE.slots + 1 + CACHE.slots + 5] = 1 << CACHE.slots  # its owner mask names no slot of the pool
    assert codec._decoder(bytes(k)) is None
    with pytest.raises(IndexError):
        codec.world(bytes(k))


def test_without_the_extension_the_codec_decodes_in_python(monkeypatch):
    monkeypatch.setattr(decode_compiled, "Decoder", None)
    root = initial(TEST_BOUNDS[0])
    codec = Codec(root)
    assert codec._decoder is None and codec.world(codec.key(root)) == root


class PythonDecoding(Codec):
    """A codec variant that changes a part of the decoding: it decodes in Python."""

    def _pool_of(self, pool_key):
        return super()._pool_of(pool_key)


def test_a_codec_that_changes_the_decoding_keeps_to_python():
    assert PythonDecoding(initial(TEST_BOUNDS[0]))._decoder is None
    big = initial(Bounds(slots=9, requests=2, sessions=1))  # kept exactly: nothing to decode in C
    assert Codec(big)._decoder is None


def _bound_wrongly(monkeypatch, change):
    """The C decoding bound with one of its arguments changed by `change(args) -> args`."""
    real = decode_compiled.Decoder
    monkeypatch.setattr(decode_compiled, "Decoder", lambda *args: real(*change(list(args))))


def _worlds_as_requests(args):  # the World and Request record types swapped (both of seven fields)
    records = list(args[2])
    records[0], records[3] = records[3], records[0]
    args[2] = tuple(records)
    return args


def _nodes_shifted(args):  # each cache-owned slot named by the next slot's node
    args[10] = args[10][1:] + args[10][:1]
    return args


def _another_nobody(args):  # an unheld slot's owner and borrower
    args[11] = -2
    return args


@pytest.mark.parametrize("change", (_worlds_as_requests, _nodes_shifted, _another_nobody), ids=lambda f: f.__name__)
def test_a_c_decoding_bound_wrongly_is_caught(monkeypatch, change):
    _bound_wrongly(monkeypatch, change)
    codec = Codec(initial(CACHE))
    assert codec._decoder is not None and mismatches(codec, reachable(CACHE))
