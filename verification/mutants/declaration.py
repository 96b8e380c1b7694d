"""Declaration mutants: every single-rule change of the lifecycle, and what notices it.

Each mutant is the declaration of `slotwarden.model.lifecycle` with one rule changed: dropped;
its relation replaced by another, or another relation allowed as well; its destination changed;
one field of its effect taken from another source; or the rule copied to another source state.
Each is judged by the checks, cheapest first; the first that fails kills it: `declare()` itself,
then the fast checks over a finite domain (`fast_checks`: every move property on every move the
mutation can change, a bounded proof of the one-move properties; the shutdown; `conserved` over
a two-slot pool step), then the exhaustive checker on small bounds with the scheduler's moves
going through the mutant (`search_checks`), and with `--thorough` the CrossHair proofs on any
survivor not listed as equivalent; last, a history mutant's runtime half (`KILLED_AT_RUNTIME`,
checked in that mutant's row). A mutant no check kills must be listed in `EQUIVALENT` with
its reason (`equivalent`); the stage fails on an unlisted survivor and on a listed mutant that
is in fact killed.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Iterator, NamedTuple

from slotwarden.model.declaration import Effect, Rule, Source, declare
from slotwarden.model.errors import DeclarationError
from slotwarden.model.lifecycle import EVENTS, LIFECYCLE, RULES, STATES
from slotwarden.model.vocabulary import Relation, State
from slotwarden.verification.mutants.equivalent import EQUIVALENT, KILLED_AT_RUNTIME
from slotwarden.verification.mutants.fast_checks import baseline_check, changed, move_check, pool_check, shutdown_check
from slotwarden.verification.mutants.search_checks import CHECKER_BOUNDS, checker_check, crosshair_check


class Mutant(NamedTuple):
    name: str  # e.g. "PARKED --LEND [OWNER]: by NONE"
    rules: tuple  # the mutated rule list


class Kill(NamedTuple):
    mutant: str
    killed_by: str  # "declare", "moves", "shutdown", "pool", "checker", "crosshair", or "" (survived)
    detail: str  # the broken properties and a witness, or why declare refused it
    seconds: float

    @property
    def killed(self) -> bool:
        return bool(self.killed_by)


def _label(r: Rule) -> str:
    return f"{r.source.name} --{r.event.name} [{r.by.name}]"


def mutants(rules: tuple = RULES) -> Iterator[Mutant]:
    """Every single-rule mutation of `rules`, in a fixed order."""
    for k, r in enumerate(rules):
        others = rules[:k] + rules[k + 1 :]
        at = lambda new: rules[:k] + (new,) + rules[k + 1 :]  # noqa: E731
        yield Mutant(f"{_label(r)}: dropped", others)
        for by in Relation:
            if by is not r.by:
                yield Mutant(f"{_label(r)}: by {by.name}", at(dataclasses.replace(r, by=by)))
                yield Mutant(f"{_label(r)}: also by {by.name}", rules + (dataclasses.replace(r, by=by),))
        for dest in State:
            if dest is not r.dest:
                yield Mutant(f"{_label(r)}: to {dest.name}", at(dataclasses.replace(r, dest=dest)))
        for field in Effect._fields:
            for source in Source:
                if source is not getattr(r.effect, field):
                    effect = r.effect._replace(**{field: source})
                    yield Mutant(f"{_label(r)}: {field} from {source.name}", at(dataclasses.replace(r, effect=effect)))
        for src in State:
            if src is not r.source:
                yield Mutant(f"{_label(r)}: also from {src.name}", rules + (dataclasses.replace(r, source=src),))


def judge(mutant: Mutant, bounds: tuple, crosshair_timeout: float | None = None) -> Kill:
    """Run the checks on `mutant`, cheapest first; the first that fails kills it."""
    start = time.perf_counter()

    def kill(by: str, detail: str) -> Kill:
        return Kill(mutant.name, by, detail, time.perf_counter() - start)

    try:
        lifecycle = declare(mutant.name, STATES, EVENTS, mutant.rules)
    except DeclarationError as e:
        return kill("declare", str(e))
    where = changed(lifecycle)
    for by, run in (
        ("moves", lambda: move_check(lifecycle, where)),
        ("shutdown", lambda: shutdown_check(lifecycle)),
        ("pool", lambda: pool_check(lifecycle, where)),
        ("checker", lambda: checker_check(lifecycle, bounds)),
    ):
        found = run()
        if found:
            return kill(by, found)
    if crosshair_timeout:
        found = crosshair_check(lifecycle, crosshair_timeout)
        if found:
            return kill("crosshair", found)
    if mutant.name in KILLED_AT_RUNTIME:  # its history mutant's row replays the claim (`runtime_checks`)
        return kill(
            "runtime", f"the runtime half of history mutant {KILLED_AT_RUNTIME[mutant.name]} gives another verdict"
        )
    return kill("", "")


# -- the stage ---------------------------------------------------------------------------------
class StageResult(NamedTuple):
    kills: tuple  # tuple[Kill, ...]
    baseline: str  # '' when the declaration as written passes the fast checks
    unlisted: tuple  # survivors not in EQUIVALENT
    wrongly_listed: tuple  # listed in EQUIVALENT, yet killed (or no longer a mutant)
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.baseline and not self.unlisted and not self.wrongly_listed


def run_stage(
    bounds: tuple | None = None, crosshair_timeout: float | None = None, on_kill=None, names=None
) -> StageResult:
    """Judge every mutant (or those named); the declaration as written must pass the same fast
    checks first. `crosshair_timeout`: also run the CrossHair proofs, with that per-condition
    timeout, on each survivor not listed in `EQUIVALENT` (`--thorough`)."""
    bounds = CHECKER_BOUNDS if bounds is None else bounds
    start = time.perf_counter()
    baseline = baseline_check(LIFECYCLE) if names is None else ""  # a partial run judges only its mutants
    kills = []
    for m in mutants():
        if names is not None and m.name not in names:
            continue
        k = judge(m, bounds, crosshair_timeout if m.name not in EQUIVALENT else None)
        kills.append(k)
        if on_kill:
            on_kill(k)
    judged = {k.mutant for k in kills}
    unlisted = tuple(k.mutant for k in kills if not k.killed and k.mutant not in EQUIVALENT)
    listed = EQUIVALENT if names is None else {n: EQUIVALENT[n] for n in EQUIVALENT if n in names}
    wrongly = tuple(n for n in listed if n not in judged or any(k.killed for k in kills if k.mutant == n))
    return StageResult(tuple(kills), baseline, unlisted, wrongly, time.perf_counter() - start)


KILLERS = ("declare", "moves", "shutdown", "pool", "checker", "crosshair", "runtime")


def summary(r: StageResult) -> str:
    """One line: how many mutants, how each was killed, and what is wrong."""
    counts = {by: sum(k.killed_by == by for k in r.kills) for by in KILLERS}
    text = f"{len(r.kills)} mutants: " + ", ".join(f"{n} {by}" for by, n in counts.items() if n)
    text += f", {sum(not k.killed for k in r.kills)} equivalent (listed)"
    if r.baseline:
        text += f"; THE DECLARATION FAILS: {r.baseline}"
    if r.unlisted:
        text += f"; {len(r.unlisted)} UNLISTED SURVIVORS: {', '.join(r.unlisted[:3])}"
    if r.wrongly_listed:
        text += f"; {len(r.wrongly_listed)} LISTED AS EQUIVALENT BUT KILLED: {', '.join(r.wrongly_listed[:3])}"
    return text


def detail(r: StageResult) -> dict:
    return {
        "kills": [k._asdict() for k in r.kills],
        "baseline": r.baseline,
        "unlisted": list(r.unlisted),
        "wrongly_listed": list(r.wrongly_listed),
        "equivalent": {k.mutant: EQUIVALENT[k.mutant] for k in r.kills if k.mutant in EQUIVALENT},
    }


def matrix_lines(detail: dict) -> list:
    """The kill matrix as a markdown table: one row per declared rule, one column per check."""
    lines = [
        "| rule | mutants | " + " | ".join(KILLERS) + " | equivalent | survived, unlisted |",
        "|---|" + "---:|" * (len(KILLERS) + 3),
    ]
    for rule in RULES:
        mine = [k for k in detail["kills"] if k["mutant"].startswith(_label(rule) + ":")]
        cells = [sum(k["killed_by"] == by for k in mine) for by in KILLERS]
        equivalent = sum(not k["killed_by"] and k["mutant"] in detail["equivalent"] for k in mine)
        unlisted = sum(not k["killed_by"] and k["mutant"] not in detail["equivalent"] for k in mine)
        lines.append(
            f"| {_label(rule)} | {len(mine)} | " + " | ".join(map(str, cells)) + f" | {equivalent} | {unlisted} |"
        )
    return lines


def main() -> int:
    """`python -m slotwarden.verification.mutants.declaration`: the kill matrix."""
    r = run_stage(
        on_kill=lambda k: print(
            f"{k.killed_by or 'SURVIVED':<9} {k.seconds:6.2f} s  {k.mutant}  {k.detail[:110]}", flush=True
        )
    )
    by: dict = {}
    for k in r.kills:
        by[k.killed_by or "survived"] = by.get(k.killed_by or "survived", 0) + 1
    print(
        f"{len(r.kills)} mutants in {r.seconds:.1f} s: {by}; unlisted survivors {len(r.unlisted)}, wrongly listed "
        f"{len(r.wrongly_listed)}"
    )
    if r.baseline:
        print("the declaration as written fails:", r.baseline)
    return 0 if r.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
