"""Strongly connected components, iteratively (Tarjan's algorithm, no recursion): of a graph of
int ids stored compactly (`tarjan`: edges as arrays, some kinds of edge left out) and of a small
one given as lists (`components`). Only components with a cycle are reported: more than one
node, or a node with an edge to itself.
    >>> components([[1], [0], [2], []])
    [[0, 1], [2]]
"""

from __future__ import annotations

from array import array


def tarjan(n: int, starts, targets, kinds, skip: frozenset) -> tuple:
    """(comp, cyclic): the component number of each of the `n` nodes (node v's edges are
    `targets[starts[v]:starts[v + 1]]`, each of kind `kinds[e]`; an edge of a kind in `skip` is
    left out) and the set of the numbers of the components with a cycle."""
    index = array("i", [-1]) * n
    low = array("i", [0]) * n
    comp = array("i", [-1]) * n
    on = bytearray(n)
    stack: list = []
    cyclic: set = set()
    counter = ncomp = 0
    for root in range(n):
        if index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on[root] = 1
        work = [(root, starts[root])]
        while work:
            v, e = work[-1]
            end = starts[v + 1]
            while e < end:
                w = targets[e]
                e += 1
                if kinds[e - 1] in skip:
                    continue
                if index[w] == -1:
                    work[-1] = (v, e)
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on[w] = 1
                    work.append((w, starts[w]))
                    break
                if on[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    if low[v] < low[u]:
                        low[u] = low[v]
                if low[v] == index[v]:
                    size = 0
                    while True:
                        w = stack.pop()
                        on[w] = 0
                        comp[w] = ncomp
                        size += 1
                        if w == v:
                            break
                    if size > 1 or any(
                        targets[f] == v and kinds[f] not in skip for f in range(starts[v], starts[v + 1])
                    ):
                        cyclic.add(ncomp)
                    ncomp += 1
    return comp, cyclic


def components(succ: list) -> list:
    """The components with a cycle of the graph whose node v has the edges `succ[v]`, each as
    a sorted list of nodes, in the order Tarjan's algorithm closes them."""
    n = len(succ)
    starts = array("I", [0])
    targets = array("I")
    for out in succ:
        targets.extend(out)
        starts.append(len(targets))
    comp, cyclic = tarjan(n, starts, targets, bytes(len(targets)), frozenset((1,)))
    found: dict = {c: [] for c in sorted(cyclic)}
    for v in range(n):
        if comp[v] in found:
            found[comp[v]].append(v)
    return list(found.values())
