"""The declaration mutants' searching checks: the exhaustive checker on small bounds with the
model pool obeying the mutant (`declared_as`), and (`--thorough`) the CrossHair proofs.

The checker's search of the declaration itself runs once per bounds, recording every step it
made; a mutant that gives each recorded step from a (state, event) it changed the same outcome
would repeat that search step for step, so it is judged by it without searching again.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import NamedTuple

from slotwarden.model import pool as model_pool
from slotwarden.model import proofs
from slotwarden.model.declaration import Lifecycle
from slotwarden.model.errors import LifecycleError
from slotwarden.model.lifecycle import LIFECYCLE
from slotwarden.model.step import step
from slotwarden.model.vocabulary import NOBODY
from slotwarden.verification.mutants.fast_checks import changed


@contextmanager
def declared_as(lifecycle: Lifecycle):
    """Within the block, the model pool (and so the exhaustive checker, whose every slot move
    goes through `slotwarden.model.pool`) obeys `lifecycle` instead of the declaration."""
    from slotwarden.verification import abstract

    saved = model_pool.apply, model_pool.alloc, model_pool.fence
    apply, alloc, fence = saved
    subject = lifecycle

    def mutant_apply(pool, event, ids, actor, target=NOBODY, epoch=0, lifecycle=None):
        return apply(pool, event, ids, actor, target, epoch, subject)

    model_pool.apply = mutant_apply
    model_pool.alloc = lambda pool, n, actor, lifecycle=None: alloc(pool, n, actor, subject)
    model_pool.fence = lambda pool, completed, lifecycle=None: fence(pool, completed, subject)
    getattr(abstract, "forget", lambda: None)()  # memoised moves of another lifecycle
    try:
        yield
    finally:
        model_pool.apply, model_pool.alloc, model_pool.fence = saved
        getattr(abstract, "forget", lambda: None)()


def _bounds() -> tuple:
    from slotwarden.verification.abstract import Bounds

    # a plain request; then a session with two turns (the lent paths) and a plain request; then
    # the prefix cache: a donor and two readers of its node, and, overlapped, a dropped write;
    # then speculative windows of one draft beside a two-turn session, overlapped
    return (
        Bounds(slots=1, requests=2, sessions=1),
        Bounds(slots=2, requests=3, sessions=1),
        Bounds(slots=3, requests=3, sessions=0, nodes=1),
        Bounds(slots=2, requests=3, sessions=0, overlap=True, nodes=2),
        Bounds(slots=3, requests=3, sessions=1, overlap=True, drafts=1),
    )


def checker_check(lifecycle: Lifecycle, bounds) -> str:
    """The first violation the exhaustive checker finds on `bounds` with the scheduler's
    moves going through `lifecycle`, or ''.

    The lifecycle reaches the checker only through `step` (in `slotwarden.model.pool`), and a
    step's outcome depends only on the rules of its (state, event). So where `lifecycle`
    gives the same outcome as the declaration on every step the checker made on the
    declaration from a (state, event) whose rules differ, its search would repeat the
    declaration's step for step, and find what that found: the checker does not run again.
    (Within another `declared_as` block, whose lifecycle the pool already obeys, it does.)"""
    if model_pool.apply is not _APPLY:
        return _run_checker(lifecycle, bounds)
    recorded = _recorded(tuple(bounds))
    if _same_steps(lifecycle, recorded.steps):
        return recorded.found
    return _run_checker(lifecycle, bounds)


_APPLY = model_pool.apply  # the pool's own apply, which obeys the declaration


def _run_checker(lifecycle: Lifecycle, bounds) -> str:
    from slotwarden.verification.checker.search import check

    with declared_as(lifecycle):
        for b in bounds:
            r = check(b)
            if r.violation is not None:
                return f"{r.violation.property} at {b}: {r.violation.message}"
    return ""


class _Search(NamedTuple):
    found: str  # what the checker finds on the declaration ('' when nothing)
    steps: dict  # (state, event) -> every (slot, event, actor, target, epoch, slot id) it stepped


_SEARCHES: dict = {}  # bounds -> _Search of the declaration


def _recorded(bounds: tuple) -> _Search:
    """The checker's search of `bounds` on the declaration, with every step it made (once)."""
    if bounds not in _SEARCHES:
        steps: dict = {}
        inner = model_pool.step

        def recording(slot, event, actor, target=NOBODY, epoch=0, lifecycle=LIFECYCLE, slot_id=None):
            steps.setdefault((slot.state, event), set()).add((slot, event, actor, target, epoch, slot_id))
            return inner(slot, event, actor, target, epoch, lifecycle, slot_id)

        model_pool.step = recording
        try:
            found = _run_checker(LIFECYCLE, bounds)
        finally:
            model_pool.step = inner
        _SEARCHES[bounds] = _Search(found, steps)
    return _SEARCHES[bounds]


def _same_steps(lifecycle: Lifecycle, steps: dict) -> bool:
    """Whether `lifecycle` gives each recorded step from a (state, event) whose rules differ
    from the declaration's the same outcome: the same record, or the same refusal."""
    for key in changed(lifecycle):
        for slot, event, actor, target, epoch, slot_id in steps.get(key, ()):
            if _outcome(slot, event, actor, target, epoch, slot_id, lifecycle) != _outcome(
                slot, event, actor, target, epoch, slot_id, LIFECYCLE
            ):
                return False
    return True


def _outcome(slot, event, actor, target, epoch, slot_id, lifecycle: Lifecycle):
    try:
        return step(slot, event, actor, target, epoch, lifecycle, slot_id)
    except LifecycleError as e:
        return type(e), str(e)


def crosshair_check(lifecycle: Lifecycle, timeout: float) -> str:
    """The first CrossHair proof that does not confirm on `lifecycle`, or ''."""
    from slotwarden.verification.crosshair_proofs import prove

    for name in proofs.PROOFS:
        r = prove(name, lifecycle, timeout)
        if not r.confirmed:
            return f"{name}: {r.verdict} {r.message.splitlines()[0] if r.message else ''}"
    return ""


CHECKER_BOUNDS = _bounds()
"""The checker's bounds for the mutants the fast checks leave: small, and enough to reach
every rule a scheduler fires (a session with two turns lends its slot)."""
