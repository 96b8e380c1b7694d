"""The abstract scheduler in words: slots, moves, outcomes and worlds as one-line text for
the checker's traces."""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY, ActorKind, Event, Slot, State

from slotwarden.verification.abstract.world import PHASES, STATUSES, World


def show_slot(s: Slot) -> str:
    text = s.state.name
    if s.owner != NOBODY:
        text += f"(owner {s.owner}"
        text += f", lent to r{s.borrower})" if s.borrower != NOBODY else ")"
    elif s.borrower != NOBODY:
        text += f"(lent to r{s.borrower})"
    if s.state in (State.RELEASED, State.CACHING):
        text += f"(fence +{s.fence})"
    if s.readers:
        text += f"({s.readers} locked)"
    return text


def show_slots(slots: tuple) -> str:
    return "[" + ", ".join(f"{i + 1}:{show_slot(s)}" for i, s in enumerate(slots)) + "]"


def show_handles(handles: dict) -> str:
    parts = []
    for actor, ids in handles.items():
        short = ("r" if actor.kind is ActorKind.REQUEST else "s") + str(actor.id)
        parts.append(f"{short}:{list(ids)}")
    return "{" + ", ".join(parts) + "}"


def show_move(m) -> str:
    """One slot move (an `abstract_actions.Move`)."""
    if m.actor.kind is ActorKind.SCHEDULER:
        text = f"{m.event.name} slot {m.slot_id}"
    else:
        actor = "r" if m.actor.kind is ActorKind.REQUEST else "s"
        text = f"{m.event.name} slot {m.slot_id} by {actor}{m.actor.id}"
    if m.event is Event.LEND:
        text += f" to r{m.after.borrower}"
    elif m.event is Event.PARK:
        text += f" into s{m.after.owner}"
    return text + f" ({m.before.state.name}->{m.after.state.name})"


def describe(outcome) -> str:
    """One line of a trace (an `abstract_actions.Outcome`): the action and every slot move it
    made (or the model's refusal)."""
    text = str(outcome.action)
    if outcome.error is not None:
        return f"{text}: REFUSED by the model: {outcome.error}"
    if outcome.moves:
        text += ": " + "; ".join(show_move(m) for m in outcome.moves)
    return text


def show_world(world: World) -> str:
    reqs = ", ".join(
        f"r{r.id}{'' if r.session is None else f'@s{r.session}'}:{PHASES[r.phase]}"
        + ("" if r.handle is None else f"[{r.handle}{'L' if r.lent else ''}]")
        + ("" if r.src is None else f"<copies {r.src}>")
        for r in world.requests
    )
    sess = ", ".join(
        f"s{s.id}:{STATUSES[s.status]}" + ("" if s.handle is None else f"[{s.handle}]") for s in world.sessions
    )
    return f"pool {show_slots(world.pool.slots)} free {world.pool.free}; {reqs}; {sess}; in flight {len(world.steps)}"
