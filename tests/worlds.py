"""The abstract scheduler's reachable worlds, for tests that judge every one of them, the bounds
the compiled codec's tests (key, decoding) walk, `same`, the equality those tests ask of C and
Python records, and declaration mutants as lifecycles, for the tests that search under them."""

from slotwarden.verification.abstract import Bounds, Policy, initial, successors
from slotwarden.verification.checker.bounds import DEFAULT_BOUNDS, TEST_BOUNDS

SYMMETRY_WORKLOADS = (  # test_symmetry's workloads: turns=1 classes, two two-turn sessions, locks and copies
    Bounds(slots=1, requests=5, sessions=2, overlap=False, turns=1),
    Bounds(slots=2, requests=5, sessions=2, overlap=True, turns=2),
    Bounds(slots=3, requests=3, sessions=1, overlap=True),
    Bounds(slots=3, requests=3, sessions=0, overlap=True, nodes=2),
)
CODEC_BOUNDS = tuple(
    b
    for b in dict.fromkeys(TEST_BOUNDS + SYMMETRY_WORKLOADS + tuple(b for b in DEFAULT_BOUNDS if b.nodes))
    if not b.drafts
)
"""The tests' bounds, test_symmetry's workloads and the default run's cache bounds, but those of
speculative windows (kept exactly, expanded in Python: `SPECULATIVE_BOUNDS`)."""
SPECULATIVE_BOUNDS = tuple(b for b in DEFAULT_BOUNDS + TEST_BOUNDS if b.drafts)


def reachable(bounds: Bounds, limit: int = 1500, policy: Policy | None = None) -> list:
    """Every world reachable under `bounds` (breadth-first, exact: no reduction), up to `limit`,
    with `policy` (default: the correct one; a move it makes that is refused leads nowhere)."""
    policy = Policy() if policy is None else policy
    root = initial(bounds)
    seen = {root}
    frontier = [root]
    while frontier and len(seen) < limit:
        nxt = []
        for w in frontier:
            for out in successors(w, policy, bounds.overlap):
                if out.world is not None and out.world not in seen:
                    seen.add(out.world)
                    nxt.append(out.world)
        frontier = nxt
    return list(seen)


def same(a, b) -> bool:
    """`a == b`, and every part of `a` of the same type as its part in `b` (a set's items in the
    same order: the successors of the world come in the same order)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list, frozenset)):
        return a == b and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def mutant_lifecycles(every: int = 9) -> list:
    """Every `every`-th declaration mutant that declares, as a lifecycle."""
    from slotwarden.model.declaration import DeclarationError
    from slotwarden.verification.mutants import declaration

    out = []
    for n, m in enumerate(declaration.mutants()):
        if n % every == 0:
            try:
                out.append(declaration.declare(m.name, declaration.STATES, declaration.EVENTS, m.rules))
            except DeclarationError:
                continue
    return out


def mutant_lifecycle(name: str):
    """The declaration mutant named `name`, as a lifecycle."""
    from slotwarden.verification.mutants import declaration

    mutant = next(m for m in declaration.mutants() if m.name == name)
    return declaration.declare(name, declaration.STATES, declaration.EVENTS, mutant.rules)
