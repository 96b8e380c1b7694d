"""Typed errors of the lifecycle. The runtime raises the same types as the model."""

from __future__ import annotations

import reprlib

from slotwarden.model.vocabulary import NOBODY, Actor, Event, Slot


class SlotwardenError(Exception):
    """The root of every error slotwarden raises on purpose: lifecycle, input, scheduler, cache,
    trace and usage errors all inherit it (and keep their other bases)."""


class DeclarationError(SlotwardenError, ValueError):
    """A lifecycle declaration is malformed (unknown state, duplicate transition, ...)."""


class LifecycleError(SlotwardenError, RuntimeError):
    """Base of every error the lifecycle raises at run time."""


class IllegalMove(LifecycleError):
    """An event that the lifecycle forbids. Raised before anything changes.

    Names the slot id (when known), its state, owner and borrower, the event and the actor,
    and why the move is illegal; each is kept as an attribute for programs. `reason` is a
    string or a zero-argument callable giving one: the text is built only when read, so a
    symbolic checker exploring the model never has to render numbers.
    """

    def __init__(self, reason, *, slot: Slot, event: Event, actor: Actor, slot_id: int | None = None):
        super().__init__()
        self._reason = reason
        self.slot = slot
        self.event = event
        self.actor = actor
        self.slot_id = slot_id

    @property
    def reason(self) -> str:
        return self._reason() if callable(self._reason) else self._reason

    def __str__(self) -> str:
        try:
            return self._describe()
        except Exception:  # e.g. symbolic values rendered outside a symbolic checker's trace
            return "illegal move"

    def _describe(self) -> str:
        where = f"slot {self.slot_id}" if self.slot_id is not None else "slot"
        owner = "nobody" if self.slot.owner == NOBODY else str(self.slot.owner)
        lent = "" if self.slot.borrower == NOBODY else f", lent to request {self.slot.borrower}"
        return (
            f"illegal {self.event.name.lower()} by {self.actor} on {where} "
            f"(state {self.slot.state.name}, owner {owner}{lent}): {self.reason}"
        )

    def __reduce__(self):
        return (_rebuild, (self.reason, self.slot, self.event, self.actor, self.slot_id))


def _rebuild(reason, slot, event, actor, slot_id):
    return IllegalMove(reason, slot=slot, event=event, actor=actor, slot_id=slot_id)


class BadInput(LifecycleError, ValueError):
    """An argument that is not what the call takes: the wrong type, out of range, or a value
    reserved for the ledger (an actor id of NOBODY). Names the argument and the bad value; raised
    before anything changes."""

    def __init__(self, reason: str, *, argument: str, value, event=None, actor=None):
        self.reason = reason
        self.argument = argument
        self.value = value
        self.event = event
        self.actor = actor
        super().__init__()  # the text is built when read: a symbolic checker never renders values

    def __str__(self) -> str:
        return self._describe()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._describe()!r})"

    def _describe(self) -> str:
        call = "" if self.event is None else f" for {_show_event(self.event)}"
        by = "" if self.actor is None else f" by {_show(self.actor)}"
        return f"bad {self.argument} {_show(self.value)}{call}{by}: {self.reason}"

    def __reduce__(self):
        return (_rebuild_bad_input, (type(self), self.reason, self.argument, self.value, self.event, self.actor))


def _rebuild_bad_input(cls, reason, argument, value, event, actor):
    return cls(reason, argument=argument, value=value, event=event, actor=actor)


class BadActor(BadInput):
    """An actor that is not one: not an `Actor`, an unknown kind, an id that is not an int64,
    or NOBODY (-1), which names no actor: a slot it took could never be released."""


class BadSlotId(BadInput):
    """A slot id that is not a real slot (the pad slot, a sentinel, out of range), one named
    twice in a batch, or a batch that is not a batch of ids (empty, not integers, not 1-D, on
    the wrong device). Raised before anything changes.

    `slot_id` is the one bad id when there is one; `batch` the whole argument when what is wrong
    is the batch itself (its type, shape or dtype), so the text names the value that was given."""

    def __init__(self, reason: str, *, slot_id, event: Event, actor: Actor, batch=None):
        self.slot_id, self.batch = slot_id, batch
        whole = slot_id is None and batch is not None
        super().__init__(
            reason,
            argument="slot ids" if whole else "slot id",
            value=batch if whole else slot_id,
            event=event,
            actor=actor,
        )

    def _describe(self) -> str:
        by = "" if self.actor is None else f" by {_show(self.actor)}"
        if self.argument == "slot ids":
            what = f"slot ids {_show(self.value)} ({type(self.value).__name__})"
        elif self.slot_id is None:  # a refusal of the batch, given no value to name
            what = "batch of slot ids"
        else:
            what = f"slot id {_show(self.slot_id)}"
        return f"bad {what} for {_show_event(self.event)}{by}: {self.reason}"

    def __reduce__(self):
        return (_rebuild_bad_id, (self.reason, self.slot_id, self.event, self.actor, self.batch))


def _rebuild_bad_id(reason, slot_id, event, actor, batch=None):
    return BadSlotId(reason, slot_id=slot_id, event=event, actor=actor, batch=batch)


class WrongThread(LifecycleError):
    """A ledger (and the pool or guard around it) called from a thread other than the one using
    it. They are single-threaded: one thread at a time, handed over with `adopt()`."""


SHOWN = 200
"""How many characters of a bad value an error message shows (then it says how long it was)."""


def cut(text: str, limit: int = SHOWN) -> str:
    """`text`, or its first `limit` characters and how many there were."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


_BRIEF = reprlib.Repr()  # a repr that never builds the whole text of a long builtin container or string
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 3, SHOWN, SHOWN, SHOWN
_BRIEF.maxlist = _BRIEF.maxtuple = _BRIEF.maxdict = _BRIEF.maxset = _BRIEF.maxfrozenset = _BRIEF.maxdeque = 16
_UNITS = {str: "characters", bytes: "bytes", bytearray: "bytes"} | dict.fromkeys(
    (list, tuple, dict, set, frozenset), "items"
)


def shown(value, limit: int = SHOWN) -> str:
    """A bounded rendering of any value for an error message, even one whose `repr` raises: at
    most `limit` characters of it, and how long it was when that is cut (its characters, items
    or elements). A long string or list is never rendered whole (`reprlib`); an array or a
    tensor summarises itself."""
    text = None
    if isinstance(value, Actor):
        try:
            text = str(value)
        except Exception:  # a junk actor (a kind that is not an ActorKind): its fields, below
            pass
    if text is None:
        try:
            text = _BRIEF.repr(value)
        except Exception:
            text = f"<{type(value).__name__}>"
    size = _size(value) if len(text) > limit or "..." in text else None  # cut here, or abbreviated by its repr
    if size is None:
        return cut(text, limit)
    return f"{text[:limit]}... ({size[0]} {size[1]})" if len(text) > limit else f"{text} ({size[0]} {size[1]})"


def _size(value) -> tuple[int, str] | None:
    """How long `value` is, and in what (None: not a sized value, or its size is unreadable)."""
    try:
        unit = _UNITS.get(type(value))  # the builtins themselves (a NamedTuple's fields are no items)
        if unit is not None:
            return len(value), unit
        n = getattr(value, "size", None)  # a numpy array; a tensor's `size` is a method, its `numel` the count
        n = value.numel() if callable(n) and callable(getattr(value, "numel", None)) else n
        return (int(n), "elements") if isinstance(n, int) and not isinstance(n, bool) else None
    except Exception:
        return None


def _show(value, limit: int = 60) -> str:
    """A short rendering of any value (`shown`, in at most `limit` characters)."""
    return shown(value, limit)


def _show_event(event) -> str:
    """An event, or the name of the caller's operation ("free"), in at most `SHOWN` characters."""
    if isinstance(event, Event):
        return event.name.lower()
    return cut(event) if isinstance(event, str) else shown(event)


class FenceError(LifecycleError):
    """A fence for a step that the device has not finished (or that was never launched)."""


class IllegalCopy(LifecycleError):
    """A copy or fork of slot state that the ownership rules forbid: from a slot the actor may
    not read (one nobody holds, another request's or session's, a cached slot it has not
    locked), or into a slot the actor does not hold. Raised before any state is copied."""

    def __init__(self, reason: str, *, slot_id: int, slot: Slot, actor: Actor):
        self.reason, self.slot_id, self.slot, self.actor = reason, slot_id, slot, actor
        owner = "nobody" if slot.owner == NOBODY else str(slot.owner)
        super().__init__(
            f"illegal copy by {actor} with slot {slot_id} (state {slot.state.name}, owner {owner}): {reason}"
        )

    def __reduce__(self):  # keyword-only arguments: pickle's default would call it with the text alone
        return (_rebuild_copy, (self.reason, self.slot_id, self.slot, self.actor))


def _rebuild_copy(reason, slot_id, slot, actor):
    return IllegalCopy(reason, slot_id=slot_id, slot=slot, actor=actor)


class IllegalStep(LifecycleError):
    """A launched step whose write set the declaration forbids: a row that writes or reads a
    slot its actor may not (another's, a free one, one no zeroing or copy filled since it was
    taken), a slot written by two rows, a pad row off the pad slot, an id outside the pool.
    Names the row, the slot id, the slot's record and holder, and the row's actor; raised
    before the step is launched. The text is built when read."""

    def __init__(self, reason, *, row: int, slot_id, slot: Slot | None, holder: Actor | None, actor: Actor | None):
        super().__init__()
        self._reason = reason
        self.row, self.slot_id, self.slot, self.holder, self.actor = row, slot_id, slot, holder, actor

    @property
    def reason(self) -> str:
        return self._reason() if callable(self._reason) else self._reason

    def __str__(self) -> str:
        try:
            return self._describe()
        except Exception:  # symbolic values rendered outside a symbolic checker's trace
            return "illegal step"

    def _describe(self) -> str:
        who = "a pad row" if self.actor is None else str(self.actor)
        state = "" if self.slot is None else f", state {self.slot.state.name}"
        holder = "nobody" if self.holder is None else str(self.holder)
        return (
            f"illegal step: row {self.row} ({who}) on slot {_show(self.slot_id)} "
            f"(held by {holder}{state}): {self.reason}"
        )

    def __reduce__(self):
        return (_rebuild_step, (self.reason, self.row, self.slot_id, self.slot, self.holder, self.actor))


def _rebuild_step(reason, row, slot_id, slot, holder, actor):
    return IllegalStep(reason, row=row, slot_id=slot_id, slot=slot, holder=holder, actor=actor)
