"""`shown` and `cut`: a bad value in an error message in at most SHOWN characters, and how long
it was when it is cut; never the whole repr of a long string or list."""

import numpy as np
import pytest
import torch

from slotwarden.model.errors import SHOWN, BadInput, BadSlotId, cut, shown
from slotwarden.model.vocabulary import Actor, Event


@pytest.mark.parametrize(
    "value, length",
    [
        ("x" * 5_000_000, "(5000000 characters)"),
        (b"x" * 1_000_000, "(1000000 bytes)"),
        (list(range(100_000)), "(100000 items)"),
        (tuple(range(100_000)), "(100000 items)"),
        ({i: i for i in range(1000)}, "(1000 items)"),
        (np.arange(10**6), "(1000000 elements)"),
        (torch.arange(10**6), "(1000000 elements)"),
        ([["x" * 10**6]] * 10, "(10 items)"),
    ],
    ids=["str", "bytes", "list", "tuple", "dict", "array", "tensor", "nested"],
)
def test_a_long_value_is_cut_and_says_its_length(value, length):
    text = shown(value)
    assert len(text) <= SHOWN + 30 and text.endswith(length), text


@pytest.mark.parametrize("value", [1, "abc", [1, 2, 3], Event.ADMIT, None, range(1, 2**62), "x" * 100])
def test_a_short_value_is_its_repr(value):
    assert shown(value) == repr(value)


def test_an_actor_is_its_str_and_a_repr_that_raises_is_its_type():
    class Broken:
        def __repr__(self):
            raise RuntimeError("no")

    assert shown(Actor.request(3)) == "request 3" and shown(Broken()).startswith("<Broken")


def test_cut():
    assert cut("abc") == "abc" and cut("x" * 201) == "x" * 200 + "... (201 characters)"


@pytest.mark.parametrize("value", ["x" * 5_000_000, ["x"] * 100_000])
def test_every_input_error_shows_a_huge_value_bounded(value):
    errors = [
        BadInput("why", argument="event", value=value, event=value, actor=value),
        BadSlotId("why", slot_id=value, event=value, actor=value),
        BadSlotId("why", slot_id=None, event=Event.ADMIT, actor=None, batch=value),
    ]
    for e in errors:
        assert len(str(e)) < 600 and len(repr(e)) < 700, str(e)[:300]


def test_a_junk_actor_is_shown_by_its_fields():
    """An `Actor` whose kind is no `ActorKind` has no str: its fields are shown (was `<Actor>`)."""
    assert shown(Actor(0, -1)) == "Actor(kind=0, id=-1)"
    assert len(shown(Actor(9, "x" * 10**6))) <= SHOWN + 30
