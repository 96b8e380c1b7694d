"""`docs/lifecycle.md`, generated from the declaration (regenerate with `slotwarden docs`).

The page is a reference: how to read the diagram, the diagram, the states and events, every
rule with its reason, what a launched step's rows may address, the seed bug drawn against the
lifecycle, and the safety properties with the checks that prove them. Everything in it is read from the code.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.model.declaration import Effect, Lifecycle, Source
from slotwarden.model.diagram import Refused, mermaid, mermaid_flow, refused
from slotwarden.model.lifecycle import LIFECYCLE, WRITE_SET
from slotwarden.model.machine import condition_label
from slotwarden.model.registry import CHECKER, PROPERTIES
from slotwarden.model.vocabulary import Event, State
from slotwarden.model.write_set import Access, WriteSet

REGENERATE = "slotwarden docs"
SEED_BUG_SVG = "seed-bug.svg"


class View(NamedTuple):
    """What a picture stresses: one event or state highlighted, refused moves drawn dashed."""

    highlight: Event | State | None
    refuse: tuple[Refused, ...]


def seed_bug(lifecycle: Lifecycle = LIFECYCLE) -> View:
    """SGLang PR 21404: a rejected session turn's rollback freed the session's lent slot. The
    picture highlights every rollback and draws LENT --rollback--> FREE, which the lifecycle
    refuses (checked by `refused`), against the legal LENT --rollback--> PARKED."""
    move = refused(State.LENT, Event.ROLLBACK, State.FREE, "refused (PR 21404 freed it)", lifecycle)
    return View(Event.ROLLBACK, (move,))


class PropertyDoc(NamedTuple):
    """One safety property as the page shows it."""

    name: str
    text: str
    checks: tuple[str, ...]


def safety_properties() -> tuple[PropertyDoc, ...]:
    """Every safety property: its name, its words, and the checks that prove it.

    The one place this page reads the properties, all from `registry.PROPERTIES`: the words,
    the CrossHair proofs (`proofs.PROOFS`) and the other stages that judge each one.
    Continuity (7) is a property of the scheduler's state flow, checked end to end by the
    scheduler tests.
    """
    from slotwarden.model.proofs import PROOFS

    found = []
    for p in PROPERTIES.values():
        if not p.number:  # `legal`, `deadlock`: the checker's own verdicts, not properties of the slots
            continue
        checks = []
        if p.proofs:
            checks.append("CrossHair: " + ", ".join(f"`{PROOFS[n].__name__}`" for n in p.proofs))
        if CHECKER in p.checks:
            checks.append(f"exhaustive checker: `{p.name}`")
        checks += [c for c in p.checks if c != CHECKER]
        found.append(PropertyDoc(p.name, p.words(), tuple(checks)))
    found.append(
        PropertyDoc(
            "continuity",
            "7. a session's state after turns t1..tn equals one request over the concatenated input",
            ("`tests/runtime/scheduler/test_scheduler.py::test_session_state_continuity` (the scheduler end to end)",),
        )
    )
    return tuple(found)


def _effect(effect: Effect) -> str:
    words = {
        Source.ACTOR: "the actor",
        Source.TARGET: "the target",
        Source.EPOCH: "the step in flight",
        Source.CLEAR: "nobody",
        Source.INC: "one more",
        Source.DEC: "one fewer",
    }
    counts = ("fence", "readers")
    parts = [
        f"{field} := {words[src]}" if field not in counts or src is not Source.CLEAR else f"{field} := 0"
        for field, src in zip(Effect._fields, effect)
        if src is not Source.KEEP
    ]
    return ", ".join(parts) or "unchanged"


def _how_to_read(lifecycle: Lifecycle) -> str:
    groups = list(dict.fromkeys(s.group.name for s in lifecycle.states))
    return f"""\
## How to read this

Each box is a state a slot can be in, labelled with the kind of its owner (`PARKED · session`:
a session owns it; `nobody`: no one does) and filled with the colour of its group, one of
{", ".join(groups[:-1])} and {groups[-1]}: the legend names the colours, the States table
below says what each state holds. Each arrow is a rule: its label names the event and who may
fire it (`rollback (borrowing request)`: only the request the slot is lent to). Whatever has
no arrow is illegal: the runtime raises `IllegalMove` and changes nothing. The pad slot 0 and
sentinel ids are outside the machine. `slotwarden demo --plot` uses the same colours.
"""


def _header(lifecycle: Lifecycle) -> list[str]:
    return [
        "# The slot lifecycle",
        "",
        f"<!-- Generated from model/lifecycle.py by `{REGENERATE}`. Do not edit by hand. -->",
        "",
        "Every recurrent-state slot of the pool moves through this machine, declared once in",
        "`model/lifecycle.py`. This page, its pictures and the runtime's table are all read from",
        "that declaration.",
        "",
        _how_to_read(lifecycle),
        "![The slot lifecycle: states filled by group, arrows labelled by event and actor](lifecycle.svg)",
        "",
        "The same diagram in Mermaid:",
        "",
        "```mermaid",
        mermaid(lifecycle).rstrip("\n"),
        "```",
        "",
    ]


def _tables(lifecycle: Lifecycle) -> list[str]:
    out = [
        "## States",
        "",
        "| state | group | owner | lent | waits for a fence | counts locks | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in lifecycle.states:
        owner = s.owner.name.lower() if s.owner is not None else "-"
        out.append(
            f"| `{s.state.name}` | {s.group.name} | {owner} | {'yes' if s.lent else '-'} "
            f"| {'yes' if s.fenced else '-'} | {'yes' if s.shared else '-'} | {s.doc} |"
        )
    out += ["", "## Events", "", "| event | fired by | target | meaning |", "|---|---|---|---|"]
    for e in lifecycle.events:
        target = e.target.name.lower() if e.target is not None else "-"
        out.append(f"| `{e.event.name.lower()}` | {e.actor.name.lower()} | {target} | {e.doc} |")
    out += [
        "",
        "## Rules",
        "",
        "Every legal move, in declaration order, with why it is the way it is.",
        "",
        "| from | event | by | to | record after | why |",
        "|---|---|---|---|---|---|",
    ]
    for r in lifecycle.rules:
        out.append(
            f"| `{r.source.name}` | `{r.event.name.lower()}` | {condition_label(r, lifecycle)} "
            f"| `{r.dest.name}` | {_effect(r.effect)} | {r.why or '-'} |"
        )
    return out + [""]


def _access(a: Access) -> str:
    return f"`{a.state.name}` as {a.by.name.lower()}" + (f" ({a.why})" if a.why else "")


def _write_set(write_set: WriteSet) -> list[str]:
    out = [
        "## The step's write set",
        "",
        "A launched step reads and writes the state through its batch rows: each row writes one slot",
        "and reads it and, for a copy, one slot besides. `WRITE_SET` (in `model/lifecycle.py`)",
        "declares what each kind of row may address, by the state of the slot and the relation of",
        "the row's actor to it; the check at launch reads it, and refuses the whole step otherwise.",
        "",
        "| row | acts for | may write | may read | meaning |",
        "|---|---|---|---|---|",
    ]
    for r in write_set.rows:
        actor = r.actor.name.lower() if r.actor is not None else "nobody"
        pad = f"only the pad slot {write_set.pad_slot}"
        writes = pad if r.pad_only else "; ".join(_access(a) for a in r.writes) or "-"
        reads = pad if r.pad_only else "; ".join(_access(a) for a in r.reads) or "-"
        out.append(f"| `{r.kind.name.lower()}` | {actor} | {writes} | {reads} | {r.doc} |")
    names = [f"`{f.name.lower()}`" for f in sorted(write_set.readable)]
    fills = " or ".join(filter(None, (", ".join(names[:-1]), names[-1]))) if names else "nothing"
    return out + [
        "",
        f"The pad slot is slot {write_set.pad_slot}, outside the lifecycle. A slot is read only when it is {fills}",
        "since it was taken: never with what its previous tenant left (`stale`).",
        "",
    ]


def _seed_bug(lifecycle: Lifecycle) -> list[str]:
    view = seed_bug(lifecycle)
    legal = [r for r in lifecycle.rules if r.source is State.LENT and r.event is Event.ROLLBACK]
    return [
        "## The seed bug: a rejected session turn's rollback (SGLang PR 21404)",
        "",
        "A session's next turn borrows the session's slot (`LENT`). When the batch builder rejects",
        "that turn, its rollback freed the slot as if the turn had owned it, and the session's",
        "saved state was lost and later handed to someone else (fixed in PR 23327). Here every",
        "rollback is highlighted: a candidate's own slot goes back to `FREE`, a lent slot goes",
        f"back to `{legal[0].dest.name}`, its session. The dashed move is the bug's: the lifecycle",
        "refuses it with `IllegalMove`.",
        "",
        f"![The seed bug: LENT --rollback--> FREE refused, LENT --rollback--> PARKED legal]({SEED_BUG_SVG})",
        "",
        "```mermaid",
        mermaid_flow(lifecycle, view.highlight, view.refuse).rstrip("\n"),
        "```",
        "",
    ]


def _properties() -> list[str]:
    out = [
        "## Safety properties",
        "",
        "Each is a named predicate in `model/properties.py`, registered once in `model/registry.py`",
        "with its words and the proofs and checks that establish it; they all call the same function.",
        "",
        "| property | what holds | proved / checked by |",
        "|---|---|---|",
    ]
    for p in safety_properties():
        out.append(f"| **{p.name}** | {p.text} | {'; '.join(p.checks) or '-'} |")
    return out + [""]


WHERE_NEXT = """\
## Where to go next

- [howto.md](howto.md): put the ledger in front of an engine's allocator, use the pool, point
  the shipped Hypothesis machine at your own pool, check a scheduler change against the bugs.
- `slotwarden verify --report DIR` runs every check above and writes `DIR/report.md` and
  `DIR/report.json`: each proof's verdict, the checker's state counts, the mutant matrix (each
  SGLang bug injected and caught) and any counterexample as runnable steps.
- `slotwarden diagram --format svg --highlight EVENT|STATE -o FILE` draws this diagram with
  one event's arrows or one state in a contrasting colour.
"""


def lifecycle_markdown(lifecycle: Lifecycle = LIFECYCLE, write_set: WriteSet = WRITE_SET) -> str:
    """The whole page: how to read it, diagram, states, events, rules, the step's write set,
    the seed bug, the safety properties and their checks, where to go next."""
    out = _header(lifecycle) + _tables(lifecycle) + _write_set(write_set) + _seed_bug(lifecycle) + _properties()
    return "\n".join(out) + "\n" + WHERE_NEXT
