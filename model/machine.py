"""One slot as a `transitions` state machine, built from the declaration: for interactive use
and for the diagrams. Never on a hot path (a trigger costs microseconds; the runtime uses the
compiled table instead).

    >>> m = SlotMachine()
    >>> m.fire(Event.ALLOC, Actor.request(1)).state.name
    'TAKEN'
"""

from __future__ import annotations

from transitions import Machine, MachineError

from slotwarden.model.declaration import Lifecycle, Rule
from slotwarden.model.errors import IllegalMove
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.step import apply_effect, legal_rule
from slotwarden.model.declaration import relation_of
from slotwarden.model.vocabulary import FREE_SLOT, NOBODY, Actor, ActorKind, Event, Relation, Slot, State

_WHO = {
    Relation.NONE: "any {kind}",
    Relation.OWNER: "owning {kind}",
    Relation.BORROWER: "borrowing {kind}",
    Relation.DUE: "fence of its step",
    Relation.EARLY: "early fence",
    Relation.READER: "any {kind} while read",
    Relation.FULL: "any {kind} at the lock bound",
    Relation.PINNED: "owning {kind} while locked",
}


def condition_label(rule: Rule, lifecycle: Lifecycle) -> str:
    """Who may fire the rule, in words: 'owning session', 'borrowing request', ..."""
    kind = lifecycle.event(rule.event).actor
    return _WHO[rule.by].format(kind=kind.name.lower())


class SlotMachine:
    """A single slot record driven by a `transitions.Machine` (auto_transitions off, invalid
    triggers raise). Each declared rule is one transition whose condition is the owner rule.

    `fire` returns the new record or raises `IllegalMove` with nothing changed; the triggers
    (`alloc`, `lend`, ...) are also available on the object, taking `actor=`, `target=`, `epoch=`.
    """

    def __init__(self, lifecycle: Lifecycle = LIFECYCLE, slot: Slot = FREE_SLOT, machine_cls=Machine, **machine_kwargs):
        self.lifecycle = lifecycle
        self.record = slot
        self.machine = machine_cls(
            model=self,
            states=[spec.state.name for spec in lifecycle.states],
            initial=slot.state.name,
            auto_transitions=False,
            ignore_invalid_triggers=False,
            send_event=True,
            **machine_kwargs,
        )
        for rule in lifecycle.rules:
            self.machine.add_transition(
                trigger=rule.event.name.lower(),
                source=rule.source.name,
                dest=rule.dest.name,
                conditions=[self._condition(rule)],
                after=[self._effect(rule)],
            )

    def fire(self, event: Event, actor: Actor, target: int = NOBODY, epoch: int = 0) -> Slot:
        """Fire `event` by `actor` through the machine; the new record, or `IllegalMove`."""
        before = self.record
        try:
            moved = self.trigger(event.name.lower(), actor=actor, target=target, epoch=epoch)
        except MachineError:
            moved = False
        if not moved:
            legal_rule(before, event, actor, target, self.lifecycle)  # raises, saying why
            raise IllegalMove("refused by the state machine", slot=before, event=event, actor=actor)
        return self.record

    def _condition(self, rule: Rule):
        kind = self.lifecycle.event(rule.event).actor
        needs_target = self.lifecycle.event(rule.event).target is not None

        def allowed(ev) -> bool:
            actor: Actor = ev.kwargs["actor"]
            if actor.kind is not kind or (needs_target and ev.kwargs.get("target", NOBODY) < 0):
                return False
            return relation_of(self.lifecycle.spec(self.record.state), self.record, actor) is rule.by

        allowed.__name__ = condition_label(rule, self.lifecycle)
        return allowed

    def _effect(self, rule: Rule):
        def effect(ev) -> None:
            kw = ev.kwargs
            self.record = apply_effect(
                self.record, rule.effect, rule.dest, kw["actor"], kw.get("target", NOBODY), kw.get("epoch", 0)
            )

        return effect


__all__ = ["SlotMachine", "condition_label", "ActorKind", "State"]
