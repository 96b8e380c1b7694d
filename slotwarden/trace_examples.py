"""The example traces in examples/, made by running real code with a trace on.

- `clean.jsonl`: `StatePool` (the checked pool) with `trace=`: a streaming session over three
  turns (one rolled back, lent and returned), plain requests, fences, the session's close.
- `seed-bug.jsonl`: an unguarded engine free list of SGLang's shape whose adapter logs each of
  its calls, running the seed's bug (SGLang PR 21404): the prefill rollback of a session's
  candidate turn frees the slot the session lent it; the free list then hands that slot to
  another request, and the session's close finds it gone.

Regenerate with `python -m slotwarden.trace_examples [DIR]`; a test checks the files are in sync.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import torch

from slotwarden.model.vocabulary import NOBODY, Actor, Event
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.free_list import FreeList  # noqa: F401  (the tests import it from here too)
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.trace import FREE, TraceWriter

EXAMPLES = Path("examples")


class LoggedEngine:
    """An unguarded engine whose adapter writes a trace line for each of its slot calls."""

    def __init__(self, size: int, out):
        self.slots = FreeList(size)
        self.trace = TraceWriter(out, size)
        self.step = 0

    def alloc(self, n: int, actor: Actor) -> torch.Tensor:
        ids = self.slots.alloc(n)
        self.trace.write(self.step, Event.ALLOC, ids.tolist(), actor)
        return ids

    def free(self, ids: torch.Tensor, actor: Actor) -> None:
        self.trace.write(self.step, FREE, ids.tolist(), actor)
        self.slots.free(ids)

    def note(self, event: Event, ids: torch.Tensor, actor: Actor, target: int = NOBODY) -> None:
        """A lifecycle move the engine makes without touching its free list."""
        self.trace.write(self.step, event, ids.tolist(), actor, target)


def clean(out) -> None:
    """A session's three turns and plain requests through the checked pool."""
    cfg = PoolConfig(num_slots=4, layers=1, conv_dims=(4,), conv_kernel=2, heads=1, head_dim=2, state_size=2)
    pool = StatePool(cfg, trace=TraceWriter(out, cfg.num_slots))
    r1, r2, r3, r4, r6, s5 = (
        Actor.request(1),
        Actor.request(2),
        Actor.request(3),
        Actor.request(4),
        Actor.request(6),
        Actor.session(5),
    )
    turn = pool.alloc(1, r1)  # session 5's first turn
    pool.admit(turn, r1)
    plain = pool.alloc(1, r2)
    pool.admit(plain, r2)
    pool.launch()
    pool.park(turn, r1, 5)  # the turn's state stays with session 5
    pool.lend(turn, s5, 3)  # the second turn is a candidate ...
    pool.rollback(turn, r3)  # ... that does not fit: the slot goes back to the session
    pool.launch()
    pool.finish(plain, r2)  # released: free at the fence of the step in flight
    pool.lend(turn, s5, 4)  # the second turn, retried
    pool.admit(turn, r4)
    pool.finish(turn, r4)  # back to the session
    more = pool.alloc(2, r6)
    pool.rollback(more, r6)  # a candidate that never ran: free at once
    pool.fence()
    pool.close(s5)
    pool.launch()
    pool.fence()
    pool.ledger.recorder.writer.flush()


def seed_bug(out) -> None:
    """SGLang PR 21404, as an unguarded engine runs it."""
    engine = LoggedEngine(2, out)
    r1, r2, r3, r4, s5 = (Actor.request(1), Actor.request(2), Actor.request(3), Actor.request(4), Actor.session(5))
    turn = engine.alloc(1, r1)  # session 5's first turn
    engine.note(Event.ADMIT, turn, r1)
    plain = engine.alloc(1, r2)
    engine.note(Event.ADMIT, plain, r2)
    engine.step = 1
    engine.note(Event.PARK, turn, r1, 5)  # the turn's state stays with session 5
    engine.free(plain, r2)  # request 2 finishes
    engine.note(Event.FENCE, plain, Actor.fence(1))
    engine.step = 2
    engine.note(Event.LEND, turn, s5, 3)  # restore_to_req: the next turn borrows the session's slot
    engine.free(turn, r3)  # THE BUG: the prefill rollback frees the borrowed slot
    engine.alloc(2, r4)  # the free list hands the session's slot to another request
    engine.step = 3
    engine.note(Event.CLOSE, turn, s5)  # and the session's close finds it taken
    engine.trace.flush()


MAKERS = {"clean.jsonl": clean, "seed-bug.jsonl": seed_bug}


def render() -> dict[str, str]:
    """Each example's text, generated now."""
    texts = {}
    for name, make in MAKERS.items():
        buf = io.StringIO()
        make(buf)
        texts[name] = buf.getvalue()
    return texts


def write(folder: Path = EXAMPLES) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in render().items():
        (folder / name).write_text(text, encoding="utf-8")
        paths.append(folder / name)
    return paths


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else EXAMPLES):
        print(f"wrote {path}")
