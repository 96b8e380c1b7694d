"""What an engine's `free(ids)` means, read from the declaration.

An engine has one call, free ("back to the free list"), where the lifecycle has several events.
The move a free makes on one slot is the first declared rule that starts from the slot's state,
fires an event the acting actor's kind may fire, matches the actor's relation to the slot, and
ends in the FREE or RELEASED group. If no rule starting there that this kind of actor may fire
ends in those groups, or none matches the actor's relation, the free is illegal: `IllegalFree`
says which moves the actor does have and whom the slot belongs to. A slot that is only lent to
the actor has no such move, so a free by its borrower always raises.
"""

from __future__ import annotations

from slotwarden.model.declaration import Lifecycle, Rule, relation_of
from slotwarden.model.errors import IllegalMove
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.step import refusal
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Group, Relation, Slot, State

TOWARD_FREE = (Group.FREE, Group.RELEASED)
"""The groups a free may end in: free now, or free at the fence of the step in flight."""


def free_rules(lifecycle: Lifecycle, state: State, kind: ActorKind) -> tuple[Rule, ...]:
    """The rules from `state` that an actor of `kind` fires and that end toward the free list."""
    return tuple(
        r
        for r in lifecycle.rules_from(state)
        if lifecycle.event(r.event).actor is kind and lifecycle.spec(r.dest).group in TOWARD_FREE
    )


def free_rule_for(lifecycle: Lifecycle, state: State, kind: ActorKind, relation: Relation) -> Rule | None:
    """The move of a free by an actor of `kind` standing in `relation` to a `state` slot, or None."""
    return next((r for r in free_rules(lifecycle, state, kind) if r.by is relation), None)


def free_rule(slot: Slot, actor: Actor, lifecycle: Lifecycle = LIFECYCLE, slot_id: int | None = None) -> Rule:
    """The rule a free of `slot` by `actor` follows, or raise `IllegalFree` saying why none does."""
    relation = relation_of(lifecycle.spec(slot.state), slot, actor)
    rule = free_rule_for(lifecycle, slot.state, actor.kind, relation)
    if rule is None:
        raise IllegalFree(lifecycle, slot, actor, relation, slot_id)
    return rule


class IllegalFree(IllegalMove):
    """A free that no declared rule allows. `event` is the event a free from this state would
    be (for the right actor), or None when no actor of this kind can free such a slot;
    `moves` are the rules the actor does have from here."""

    def __init__(self, lifecycle: Lifecycle, slot: Slot, actor: Actor, relation: Relation, slot_id: int | None):
        toward = free_rules(lifecycle, slot.state, actor.kind)
        event = toward[0].event if toward else None
        mine = (r for r in lifecycle.rules_from(slot.state) if lifecycle.event(r.event).actor is actor.kind)
        self.moves = tuple(r for r in mine if r.by is relation)
        self.lifecycle, self.relation = lifecycle, relation
        super().__init__(lambda: self._why(toward), slot=slot, event=event, actor=actor, slot_id=slot_id)

    def _why(self, toward) -> str:
        lc, slot, kind = self.lifecycle, self.slot, self.actor.kind.name.lower()
        spec = lc.spec(slot.state)
        if toward:
            why = f"a free here is a {toward[0].event.name.lower()}, and " + refusal(
                lc, slot, toward[0].event, self.relation
            )
        else:
            why = f"no move of a {kind} takes a {slot.state.name} slot toward the free list"
            if spec.group in TOWARD_FREE:
                why += f" (it is already {spec.group.name}: a double free)"
        if self.moves:
            why += "; its moves from here: " + ", ".join(f"{r.event.name.lower()} -> {r.dest.name}" for r in self.moves)
        if spec.owner is not None and slot.owner != NOBODY:
            why += f"; the slot belongs to {spec.owner.name.lower()} {slot.owner}"
        return why

    def _describe(self) -> str:
        where = f"slot {self.slot_id}" if self.slot_id is not None else "slot"
        owner = "nobody" if self.slot.owner == NOBODY else str(self.slot.owner)
        lent = "" if self.slot.borrower == NOBODY else f", lent to request {self.slot.borrower}"
        state = self.slot.state.name
        return f"illegal free by {self.actor} on {where} (state {state}, owner {owner}{lent}): {self.reason}"

    def __reduce__(self):
        return (IllegalFree, (self.lifecycle, self.slot, self.actor, self.relation, self.slot_id))
