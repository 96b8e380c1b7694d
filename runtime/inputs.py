"""The public edge's one validation layer, shared by `SlotLedger`, `StatePool` and `LedgerGuard`.

Every argument is normalised here to what the runtime works with (an `Event`, an `Actor` whose
kind is an `ActorKind` and whose id is a Python int, an int, a 1-D integer numpy array of ids)
or refused with a typed error that names the bad value (`BadInput`, `BadActor`, `BadSlotId`),
before anything is written. So the runtime's special cases (`event is Event.FENCE`) never see a
raw int, and no junk reaches a column.

Cost: a few isinstance tests per call, and for ids given as a Python list one C-level scan of
the element types (numpy turns `[True, 2]` into `[1, 2]` silently); never a Python loop over
the slots of a batch.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from slotwarden.model.errors import BadActor, BadInput, BadSlotId, shown
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event

ID_MIN, ID_MAX = -(2**63), 2**63 - 1  # actor ids, targets and owners are stored as int64
CAPACITY_MAX = 2**31 - 2  # the free ring and the duplicate stamp hold int32
_BOOLS = frozenset((bool, np.bool_))
_INTS = frozenset((int,))  # the element type of a list of plain Python ints (bool is another type)
_INT64 = np.dtype(np.int64)
_UNIT = (8,)  # the strides of a contiguous 1-D int64 array
_EVENTS = ", ".join(e.name for e in Event)
_ONE = np.zeros(1, dtype=np.int64)  # copied for one id (never written itself)


def is_int(value) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def event(value, actor=None) -> Event:
    """`value` as an `Event`: an `Event`, or a plain int naming one."""
    if type(value) is Event:
        return value
    if is_int(value) and 0 <= value < len(Event):
        return Event(int(value))
    raise BadInput(f"not an event (one of {_EVENTS}, or its number)", argument="event", value=value, actor=actor)


def actor(value, event=None) -> Actor:
    """`value` as an `Actor` of a known kind with an int64 id. NOBODY (-1) is the ledger's mark
    for "no owner" and never an actor: a slot it took could never be released. (Other negative
    ids are distinct actors: `GuardedAllocator` names unattributed calls -2.)"""
    if type(value) is Actor and type(value.kind) is ActorKind and type(value.id) is int and 0 <= value.id <= ID_MAX:
        return value  # the common case, in four comparisons
    if not isinstance(value, Actor):
        raise BadActor(
            "not an Actor (Actor.request(id), Actor.session(id), Actor.fence(step))",
            argument="actor",
            value=value,
            event=event,
        )
    kind, ident = value
    if not isinstance(kind, ActorKind):
        if not (is_int(kind) and 0 <= kind < len(ActorKind)):
            raise BadActor(f"unknown actor kind {shown(kind)}", argument="actor", value=value, event=event)
        kind = ActorKind(int(kind))
    if not is_int(ident):
        raise BadActor(f"an actor id is an int, not {type(ident).__name__}", argument="actor", value=value, event=event)
    ident = int(ident)
    if ident == NOBODY:
        raise BadActor("-1 is NOBODY, the mark of a field with no actor", argument="actor", value=value, event=event)
    if not ID_MIN <= ident <= ID_MAX:
        raise BadActor("an actor id is an int64", argument="actor", value=value, event=event)
    return Actor(kind, ident)


def actor_ids(value, n: int, event=None) -> np.ndarray:
    """One actor id per slot of a batch of `n` (`SlotLedger.apply_each`): a 1-D integer
    array, list or tuple of int64 ids, none of them NOBODY, as an int64 numpy array (a negative
    id other than NOBODY is an actor, as in `actor`: `GuardedAllocator`'s unattributed -2)."""
    if type(value) is list and len(value) == n and n and _INTS.issuperset(map(type, value)):
        if min(value) >= 0 and max(value) <= ID_MAX:  # the common case (a scheduler's request ids), no ufunc
            return np.array(value, dtype=np.int64)
    given = length(value)  # before anything is converted: a list of 10**8 ids is refused by its length
    if given is not None and given != n:
        why = f"one int64 actor id for each of the {n} slots, not {given}"
        raise BadActor(why, argument="actor_ids", value=value, event=event)
    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            raise BadActor(
                "actor ids on the meta device have no values", argument="actor_ids", value=value, event=event
            )
        value = value.cpu().numpy() if value.dtype not in (torch.bool,) and not value.is_floating_point() else None
    elif isinstance(value, (list, tuple)):
        value = None if not _BOOLS.isdisjoint(map(type, value)) else _as_array(value)
    if (
        not isinstance(value, np.ndarray)
        or value.ndim != 1
        or value.size != n
        or (value.size and value.dtype.kind not in "iu")
    ):
        need = f"one int64 actor id for each of the {n} slots" if n >= 0 else "a 1-D batch of int64 actor ids"
        raise BadActor(need, argument="actor_ids", value=value, event=event)
    if value.dtype.kind == "u" and value.size and value.max() > ID_MAX:
        raise BadActor("an actor id is an int64", argument="actor_ids", value=value, event=event)
    value = np.array(value, dtype=np.int64)
    if value.size and (value == NOBODY).any():  # other negative ids are actors (`inputs.actor`)
        raise BadActor(
            "an actor id is not NOBODY (-1), which is no actor", argument="actor_ids", value=value, event=event
        )
    return value


def _as_array(value) -> np.ndarray | None:
    try:
        return np.asarray(value) if len(value) else np.zeros(0, dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        return None


def target(value, event=None, actor=None) -> int:
    """The other party of a lend or park: a request or session id, or NOBODY for none."""
    if type(value) is int and NOBODY <= value <= ID_MAX:
        return value
    if is_int(value) and NOBODY <= value <= ID_MAX:
        return int(value)
    raise BadInput(
        "a target is an id in 0..2**63-1, or NOBODY (-1) for none",
        argument="target",
        value=value,
        event=event,
        actor=actor,
    )


def count(value, actor=None) -> int:
    """How many slots an alloc takes: a positive int."""
    if type(value) is int and value >= 1:
        return value
    if is_int(value) and value >= 1:
        return int(value)
    raise BadInput("alloc needs a positive count", argument="count", value=value, event=Event.ALLOC, actor=actor)


def step(value) -> int | None:
    """A step number for a fence (None: every finished step)."""
    if value is None or (type(value) is int and value >= 0):
        return value
    if is_int(value) and value >= 0:
        return int(value)
    raise BadInput("a step is an int >= 0 (or None)", argument="step", value=value, event=Event.FENCE)


def done(value) -> Callable[[], bool] | None:
    """What a launch is told to ask whether the device has finished: None or a callable."""
    if value is None or callable(value):
        return value
    raise BadInput("done is a callable (a CUDA event's query) or None", argument="done", value=value)


def capacity(value) -> int:
    if is_int(value) and 1 <= value <= CAPACITY_MAX:
        return int(value)
    raise BadInput(
        f"a ledger needs a capacity of at least 1 slot (at most {CAPACITY_MAX})", argument="capacity", value=value
    )


def slot(value, capacity: int, what: str, actor=None) -> int:
    """One slot id, 1..capacity."""
    if is_int(value) and 1 <= value <= capacity:
        return int(value)
    if (
        isinstance(value, torch.Tensor)
        and value.numel() == 1
        and value.dim() <= 1
        and not value.is_floating_point()
        and not value.is_complex()
        and value.dtype is not torch.bool
        and value.device.type != "meta"
    ):
        return slot(value.item(), capacity, what, actor)  # a device sync when the tensor is on a device
    why = "slot 0 is the pad slot" if is_int(value) and value == 0 else f"one slot id, 1..{capacity}"
    raise BadSlotId(why, slot_id=value, event=what, actor=actor)


def ids(value, event, actor, limit: int | None = None) -> np.ndarray:
    """A batch of slot ids as a 1-D integer numpy array (a view of `value` where it can be;
    empty batches come back empty). Only the type is checked here, and with `limit` (a
    ledger's capacity) the length, before anything is converted or scanned: a batch of more
    ids than there are slots is refused by its length (`too_long`). Range and duplicates are
    the ledger's (`SlotLedger.checked_ids`)."""
    if type(value) is np.ndarray and value.dtype is _INT64 and value.ndim == 1 and value.strides == _UNIT:
        if limit is None or value.size <= limit:
            return value  # the common case: nothing to convert
    if limit is not None:
        n = length(value)
        if n is not None and n > limit:
            too_long(value, n, limit, event, actor)
    batch = value  # named in every refusal
    if isinstance(value, torch.Tensor):
        if value.dtype is torch.bool or value.is_floating_point() or value.is_complex():
            raise BadSlotId(
                f"slot ids must be integers, not {value.dtype}", slot_id=None, event=event, actor=actor, batch=batch
            )
        if value.dim() != 1:
            raise BadSlotId(
                f"a batch of ids is 1-D, not of shape {tuple(value.shape)}",
                slot_id=None,
                event=event,
                actor=actor,
                batch=batch,
            )
        if value.device.type == "meta":
            raise BadSlotId(
                "ids on the meta device have no values", slot_id=None, event=event, actor=actor, batch=batch
            )
        if value.device.type != "cpu":
            value = value.cpu()  # device sync: only for ids handed over on a device (LedgerGuard)
        try:
            arr = value.numpy()
        except (RuntimeError, TypeError) as e:  # dtypes numpy lacks
            raise BadSlotId(
                f"slot ids of dtype {value.dtype}: {e}", slot_id=None, event=event, actor=actor, batch=batch
            ) from None
    elif isinstance(value, np.ma.MaskedArray):
        raise BadSlotId(
            "a masked array: a masked id names no slot", slot_id=None, event=event, actor=actor, batch=batch
        )
    elif isinstance(value, np.ndarray):
        arr = value
    elif (
        type(value) is list
        and value
        and _INTS.issuperset(map(type, value))
        and min(value) >= ID_MIN
        and max(value) <= ID_MAX
    ):
        return np.array(value, dtype=np.int64)  # plain Python ints (a scheduler's slots): nothing else to check here
    elif isinstance(value, (list, tuple, range)):
        if not _BOOLS.isdisjoint(map(type, value)):
            raise BadSlotId("slot ids must be integers, not bool", slot_id=None, event=event, actor=actor, batch=batch)
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError) as e:  # ragged, or not numbers at all
            raise BadSlotId(
                f"not a batch of slot ids ({e})", slot_id=None, event=event, actor=actor, batch=batch
            ) from None
    else:
        raise BadSlotId(
            f"a batch of slot ids is a 1-D tensor, array, list or tuple of ints, not {type(value).__name__}",
            slot_id=None,
            event=event,
            actor=actor,
            batch=batch,
        )
    if arr.ndim != 1:
        raise BadSlotId(
            f"a batch of ids is 1-D, not of shape {arr.shape}", slot_id=None, event=event, actor=actor, batch=batch
        )
    if arr.size == 0:  # before the dtype: `[]` reads as float64, but it is an empty batch
        return np.zeros(0, dtype=np.int64)
    dtype = arr.dtype
    if dtype is _INT64 and arr.strides[0] == 8:  # the common case: nothing to convert
        return arr
    if dtype.kind not in "iu":
        raise BadSlotId(f"slot ids must be integers, not {dtype}", slot_id=None, event=event, actor=actor, batch=batch)
    if dtype.kind == "u" and dtype.itemsize == 8 and (arr > ID_MAX).any():
        raise BadSlotId("not a slot id", slot_id=int(arr[np.argmax(arr > ID_MAX)]), event=event, actor=actor)
    # int64 with positive unit strides, so the ids handed back can become a tensor (`torch.from_numpy`
    # refuses negative strides, which numpy keeps even on a 1-element "contiguous" array)
    return np.array(arr, dtype=np.int64)


def host_ids(value: torch.Tensor) -> np.ndarray | None:
    """The ids of a 1-D int64 tensor on the CPU or a CUDA device as an int64 array of their own
    (a view of the engine's memory the ledger would check against its own columns on every
    batch), or None for any other tensor (`ids` converts or refuses it). A device sync for a
    CUDA tensor."""
    if value.dtype is not torch.int64 or value.dim() != 1:
        return None
    if value.is_cpu:
        if value.numel() == 1:
            one = _ONE.copy()
            one[0] = value.item()
            return one
        return value.numpy().copy()
    if value.is_cuda:
        return value.cpu().numpy().copy()  # device sync: the ledger lives on the host
    return None


def length(value) -> int | None:
    """How many ids a batch holds, read without converting it (a range's from its bounds, even
    past `sys.maxsize`); None for what is no batch type (refused by its type, later)."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return value.numel() if isinstance(value, torch.Tensor) else value.size
    if isinstance(value, range):
        try:
            return len(value)
        except OverflowError:  # longer than sys.maxsize
            return (value.stop - value.start + value.step - (1 if value.step > 0 else -1)) // value.step
    return len(value) if isinstance(value, (list, tuple)) else None


def too_long(value, n: int, limit: int, event, actor) -> None:
    """Refuse a batch of `n` ids for a ledger of `limit` slots (a batch names each slot once)."""
    raise BadSlotId(
        f"a batch of {n} ids, more than the {limit} slots of the pool: one is no slot or is named twice in one "
        "batch (refused by its length)",
        slot_id=None,
        event=event,
        actor=actor,
        batch=value,
    )


def live(values, what: str) -> np.ndarray | None:
    """A collection of live request or session ids (for the audit) as a sorted int64 array."""
    if values is None:
        return None
    try:
        items = list(values)
    except TypeError:
        raise BadInput("a collection of ids", argument=what, value=values) from None
    try:
        arr = np.asarray(items) if items else np.zeros(0, dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        arr = np.zeros((0, 0))  # ragged: refused below
    if (
        arr.ndim != 1
        or arr.dtype.kind not in "iu"
        or not _BOOLS.isdisjoint(map(type, items))
        or (arr.size and (arr.max() > ID_MAX or (arr == NOBODY).any()))
    ):
        raise BadInput("ids are int64s other than NOBODY (-1)", argument=what, value=values)
    return np.sort(arr.astype(np.int64))
