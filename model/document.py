"""`docs/lifecycle.md`, generated from the declaration (regenerate with `slotwarden docs`)."""

from __future__ import annotations

from .declaration import Effect, Lifecycle, Source
from .diagram import mermaid
from .lifecycle import LIFECYCLE
from .machine import condition_label
from .properties import SLOT_PROPERTIES

REGENERATE = "slotwarden docs"


def _effect(effect: Effect) -> str:
    words = {
        Source.ACTOR: "the actor",
        Source.TARGET: "the target",
        Source.EPOCH: "the step in flight",
        Source.CLEAR: "nobody",
    }
    parts = [
        f"{field} := {words[src]}" if field != "fence" or src is not Source.CLEAR else "fence := 0"
        for field, src in zip(Effect._fields, effect)
        if src is not Source.KEEP
    ]
    return ", ".join(parts) or "unchanged"


def lifecycle_markdown(lifecycle: Lifecycle = LIFECYCLE) -> str:
    """The whole page: diagram, states, events, every transition, the properties."""
    out = [
        "# The slot lifecycle",
        "",
        f"<!-- Generated from model/lifecycle.py by `{REGENERATE}`. Do not edit by hand. -->",
        "",
        "Every recurrent-state slot of the pool moves through this machine. Whatever is not drawn",
        "here is illegal: the runtime raises `IllegalMove` before changing anything. The pad slot 0",
        "and any sentinel id are outside the machine. An SVG of the same diagram is in",
        "[lifecycle.svg](lifecycle.svg).",
        "",
        "```mermaid",
        mermaid(lifecycle).rstrip("\n"),
        "```",
        "",
        "## States",
        "",
        "| state | group | owner | lent | waits for a fence | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for s in lifecycle.states:
        owner = s.owner.name.lower() if s.owner is not None else "-"
        out.append(
            f"| `{s.state.name}` | {s.group.name} | {owner} | {'yes' if s.lent else '-'} "
            f"| {'yes' if s.fenced else '-'} | {s.doc} |"
        )
    out += ["", "## Events", "", "| event | fired by | target | meaning |", "|---|---|---|---|"]
    for e in lifecycle.events:
        target = e.target.name.lower() if e.target is not None else "-"
        out.append(f"| `{e.event.name.lower()}` | {e.actor.name.lower()} | {target} | {e.doc} |")
    out += [
        "",
        "## Transitions",
        "",
        "| from | event | by | to | record after | why |",
        "|---|---|---|---|---|---|",
    ]
    for r in lifecycle.rules:
        out.append(
            f"| `{r.source.name}` | `{r.event.name.lower()}` | {condition_label(r, lifecycle)} "
            f"| `{r.dest.name}` | {_effect(r.effect)} | {r.why} |"
        )
    out += [
        "",
        "## Safety properties",
        "",
        "Each is a named predicate in `slotwarden.model.properties`, proved over the model by",
        "CrossHair (`slotwarden verify`) and checked by the runtime's audit.",
        "",
    ]
    out += [f"- **{name}**: {text}" for name, text in SLOT_PROPERTIES.items()]
    out += ["- **continuity**: 7. a session's state after turns t1..tn equals one request over the concatenated input", ""]
    return "\n".join(out)
