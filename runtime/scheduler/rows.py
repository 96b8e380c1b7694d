"""The rows of a launched step: the persistent decode batch and the row -> slot index.

A decode request keeps its row from step to step. When one leaves (finished, aborted,
retracted), the last row moves into its hole (condense); newcomers append at the end. A request
still running but not in this step (its last token in flight) keeps its row as a pad row until
it leaves. The host index (int64, row -> slot) moves with the rows, and the step's copy of it is
the one list both the kernel and the launch check read. A decode step is then padded to the next
captured size; pad rows address the pad slot for nobody. A prefill step keeps its batch's order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from slotwarden.model.vocabulary import NOBODY, PAD_SLOT


class Step(NamedTuple):
    """A step's plan: its requests in the order of their rows (`items`: request, tokens it
    feeds), each one's row (`rows`), and per row the slot it indexes and the request it writes
    for (`slots`, `actors`: int64 host arrays, NOBODY on the pad rows)."""

    kind: str
    items: tuple
    rows: np.ndarray
    slots: np.ndarray
    actors: np.ndarray

    @property
    def pads(self) -> int:
        return len(self.slots) - len(self.items)


def captured_sizes(max_running: int) -> tuple:
    """The batch sizes a decode step is padded to: 1, 2, 4, ... below `max_running`, then it."""
    sizes = [1]
    while sizes[-1] * 2 < max_running:
        sizes.append(sizes[-1] * 2)
    return tuple(sizes) + ((max_running,) if sizes[-1] < max_running else ())


def prefill_step(items: list) -> Step:
    """A prefill step: row i is the i-th item's, on its request's slot."""
    n = len(items)
    slots = np.fromiter((req.slot for req, _ in items), dtype=np.int64, count=n)
    actors = np.fromiter((req.rid for req, _ in items), dtype=np.int64, count=n)
    return Step("prefill", tuple(items), np.arange(n, dtype=np.int64), slots, actors)


class PersistentBatch:
    """The decode rows kept across steps (`entries[row]`: request and its generation when it
    took the row; None for a hole), the host `index` (row -> slot) kept with them, and the
    captured sizes decode steps are padded to (`sizes`, None: not padded)."""

    def __init__(self, sizes: tuple | None = None):
        self.sizes = sizes
        self.entries: list = []
        self.row_of: dict = {}  # id(request) -> its row
        self.dark: set = set()  # rows kept for a request not in the last step: pad rows then
        self.condensed = 0  # rows moved into a hole so far
        self.index = np.full(max(sizes or (1,)), PAD_SLOT, dtype=np.int64)

    def decode(self, items: list) -> Step:
        """The decode step over `items` (request, 1): the rows of requests that left close up,
        newcomers append, rows of running requests not in `items` are pad rows, then padding."""
        vacated = [row for row, e in enumerate(self.entries) if e[0].generation != e[1]]
        if vacated:
            self._condense(vacated)
        row_of = self.row_of
        listed = [row_of.get(id(req), -1) for req, _ in items]
        if -1 in listed:
            listed = [self._append(req) if row < 0 else row for row, (req, _) in zip(listed, items)]
        n, k = len(self.entries), len(listed)
        size = n if self.sizes is None else next((m for m in self.sizes if m >= n), n)
        self._grow(size)
        rows = np.array(listed, dtype=np.int64)
        if k > 1 and not (rows[1:] > rows[:-1]).all():  # items in the order of their rows
            order = np.argsort(rows, kind="stable")
            rows, items = rows[order], [items[i] for i in order.tolist()]
        actors = np.full(size, NOBODY, dtype=np.int64)
        actors[rows] = np.fromiter((req.rid for req, _ in items), dtype=np.int64, count=k)
        back = self.dark.intersection(listed) if self.dark else ()
        for row in back:  # a pad row last step, its request in this one: its slot again
            self.index[row] = self.entries[row][0].slot
        if size > k:
            pads = np.flatnonzero(actors == NOBODY)
            self.dark = set(pads[pads < n].tolist())
            self._pad(pads)
        else:
            self.dark = set()
        return Step("decode", tuple(items), rows, self.index[:size].copy(), actors)

    def _condense(self, vacated: list) -> None:
        """Each vacated row, lowest first, takes the last row (its index entry with it)."""
        for row in vacated:
            del self.row_of[id(self.entries[row][0])]
            self.entries[row] = None
            self.dark.discard(row)
        for hole in vacated:
            self._trim()
            if hole >= len(self.entries):
                break
            self.entries[hole] = self.entries.pop()
            self.row_of[id(self.entries[hole][0])] = hole
            if len(self.entries) in self.dark:
                self.dark.remove(len(self.entries))
                self.dark.add(hole)
            self._move(len(self.entries), hole)
            self.condensed += 1
        self._trim()

    def _trim(self) -> None:
        while self.entries and self.entries[-1] is None:
            self.entries.pop()

    def _append(self, req) -> int:
        row = len(self.entries)
        self.entries.append((req, req.generation))
        self.row_of[id(req)] = row
        self._grow(row + 1)
        self.index[row] = req.slot
        return row

    def _grow(self, size: int) -> None:
        if size > self.index.size:
            self.index = np.concatenate([self.index, np.full(size - self.index.size, PAD_SLOT, dtype=np.int64)])

    def _move(self, src: int, dst: int) -> None:
        """Row `src`'s request now runs in row `dst`: its index entry moves with it."""
        self.index[dst] = self.index[src]

    def _pad(self, rows: np.ndarray) -> None:
        """The pad rows of this step address the pad slot."""
        self.index[rows] = PAD_SLOT
