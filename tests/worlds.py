"""The abstract scheduler's reachable worlds, for tests that judge every one of them."""

from slotwarden.verification.abstract import Bounds, Policy, initial, successors


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
