"""The pure next-state function of one slot, read straight from the declaration."""

from __future__ import annotations

from slotwarden.model.declaration import Effect, Lifecycle, Rule, Source, relation_of
from slotwarden.model.errors import IllegalMove
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.vocabulary import NOBODY, Actor, Event, Relation, Slot


def step(
    slot: Slot,
    event: Event,
    actor: Actor,
    target: int = NOBODY,
    epoch: int = 0,
    lifecycle: Lifecycle = LIFECYCLE,
    slot_id: int | None = None,
) -> Slot:
    """The record of `slot` after `actor` fires `event` on it.

    `target` is the other party of a lend (the borrowing request) or a park (the session);
    `epoch` is the step in flight, which a released slot waits for. Raises `IllegalMove`
    naming state, owner, event and actor when the declaration has no rule for the move.
    """
    rule = legal_rule(slot, event, actor, target, lifecycle, slot_id)
    return apply_effect(slot, rule.effect, rule.dest, actor, target, epoch)


def legal_rule(
    slot: Slot, event: Event, actor: Actor, target: int, lifecycle: Lifecycle, slot_id: int | None = None
) -> Rule:
    """The rule that allows the move, or raise `IllegalMove` saying why there is none."""
    spec = lifecycle.event(event)
    if actor.kind is not spec.actor:
        raise IllegalMove(
            lambda: f"only a {spec.actor.name.lower()} may fire it",
            slot=slot,
            event=event,
            actor=actor,
            slot_id=slot_id,
        )
    if spec.target is not None and target < 0:
        raise IllegalMove(
            lambda: f"it needs the {spec.target.name.lower()} it is for",
            slot=slot,
            event=event,
            actor=actor,
            slot_id=slot_id,
        )
    relation = relation_of(lifecycle.spec(slot.state), slot, actor)
    rule = lifecycle.rule(slot.state, event, relation)
    if rule is None:
        raise IllegalMove(
            lambda: refusal(lifecycle, slot, event, relation), slot=slot, event=event, actor=actor, slot_id=slot_id
        )
    return rule


def refusal(lifecycle: Lifecycle, slot: Slot, event: Event, relation: Relation) -> str:
    """Why the declaration has no rule for this (state, event, relation), in words."""
    allowed = [r.by for r in lifecycle.rules_from(slot.state) if r.event is event]
    if not allowed:
        return f"{event.name.lower()} is not allowed from {slot.state.name}"
    if relation is Relation.EARLY:
        return f"the slot waits for the fence of step {slot.fence}"
    if relation is Relation.PINNED:
        return f"{slot.readers} reader(s) hold a lock on it"
    if relation is Relation.FULL:
        return f"its lock count is at the bound ({slot.readers})"
    if relation is Relation.NONE and set(allowed) <= {Relation.READER, Relation.FULL}:
        return "no lock is held on it"
    who = " or ".join(_WHO[r] for r in allowed)
    return f"only {who} may {event.name.lower()} a {slot.state.name} slot"


_WHO = {
    Relation.NONE: "an actor with no claim",
    Relation.OWNER: "its owner",
    Relation.BORROWER: "the request it is lent to",
    Relation.DUE: "the fence of its step",
    Relation.EARLY: "an early fence",
    Relation.READER: "a request while others read it",
    Relation.FULL: "a request while its lock count is at the bound",
    Relation.PINNED: "its owner while it is locked",
}


def apply_effect(slot: Slot, effect: Effect, dest, actor: Actor, target: int, epoch: int) -> Slot:
    """Rewrite `slot` into state `dest` as `effect` says."""
    return Slot(
        dest,
        _field(effect.owner, slot.owner, actor, target, epoch, NOBODY),
        _field(effect.borrower, slot.borrower, actor, target, epoch, NOBODY),
        _field(effect.fence, slot.fence, actor, target, epoch, 0),
        _count(effect.readers, slot.readers),
    )


def _count(source: Source, old: int) -> int:
    if source is Source.INC:
        return old + 1
    if source is Source.DEC:
        return old - 1
    if source is Source.KEEP:
        return old
    return 0


def _field(source: Source, old: int, actor: Actor, target: int, epoch: int, cleared: int) -> int:
    if source is Source.KEEP:
        return old
    if source is Source.ACTOR:
        return actor.id
    if source is Source.TARGET:
        return target
    if source is Source.EPOCH:
        return epoch
    return cleared
