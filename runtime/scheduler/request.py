"""Requests and sessions as the scheduler sees them: what each has fed, produced and holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

import torch


class Phase(Enum):
    WAITING = "waiting"  # queued; holds no slot
    RUNNING = "running"  # admitted; holds its slot (owned, or lent by its session)
    DONE = "done"  # finished or aborted; holds nothing


@dataclass(eq=False)
class Request:
    """One generation request. `input` is everything it must feed before generating (for a
    session turn: the session's pending token and the turn's prompt, after the whole transcript
    if the session's state must be rebuilt; after a retraction, what it had generated too).
    `slot` is the one handle it keeps, and only while it holds the slot; `lent` says the slot
    is its session's. A group of n samples of one prompt (`Scheduler.submit_n`) with the prefix
    cache on has one `shared` prompt request whose finished state the siblings wait for (`awaits`)."""

    rid: int
    prompt: list
    max_new_tokens: int
    session: int | None = None
    input: list = field(default_factory=list)
    output: list = field(default_factory=list)
    phase: Phase = Phase.WAITING
    slot: int | None = None
    lent: bool = False
    fed: int = 0  # tokens of `input` fed so far (chunked prefill)
    refeeds: bool = False  # a session turn whose input starts with the whole transcript
    pending_outputs: int = 0  # outputs of launched steps not yet processed (overlap)
    tail: tuple | None = None  # (tokens tensor of a launched step, row, step): its last token, a device future
    finish_reason: str | None = None
    waited: int = 0  # steps spent at the head of the queue waiting for a slot or a seat
    outputs_at_admit: int = 0  # len(output) when last admitted: retraction waits for progress past it
    generation: int = 0  # bumped when it leaves the running batch: outputs of steps launched before are void
    unzeroed: bool = False  # holds a faulted alloc's slot the recovery could not give back: zeroed when kept
    cached: tuple | None = None  # a candidate's prefix-cache match (node, slot, length), locked until copied
    temperature: float = 0.0  # 0: greedy; > 0: sampled (kernels/sample.py)
    seed: int = 0  # the sampling seed, an int64 (with the token's position, all its noise depends on)
    awaits: "Request | None" = None  # a sibling's group prompt request, until its state is published
    shared: bool = False  # a group's prompt request (n > 1, prefix cache on): nobody collects its result
    donated: int | None = None  # the tree node it donated its slot to, if any
    shares: int | None = None  # a sibling: the node its group's prompt request donated (evicted last)
    siblings: list = field(default_factory=list)  # a group's prompt request: the siblings waiting for it
    spec_k: int = 0  # drafts verified per step (speculative decoding; 0: off)
    window: object = None  # its `speculative.Window` from the verify's launch until its commit or rollback

    @property
    def prefilling(self) -> bool:
        return self.fed < len(self.input)

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    def remaining(self) -> int:
        return self.max_new_tokens - len(self.output) - self.pending_outputs

    def result(self) -> "Result":
        return Result(self.rid, self.session, tuple(self.output), self.finish_reason or "unfinished")


class Result(NamedTuple):
    """What the user collects of an ended request: plain ints, no tensor, no slot."""

    rid: int
    session: int | None
    output: tuple  # the generated tokens
    reason: str  # "length", "abort", "session closed", "step N failed: ..."


class SessionStatus(Enum):
    OPEN = "open"
    CLOSING = "closing"  # close asked while a turn is in flight; closes when the turn ends
    CLOSED = "closed"


@dataclass(eq=False)
class Session:
    """A streaming session. Between turns it owns at most one slot (`slot`), whose state is
    exactly `transcript` fed from zero; `pending` is the last generated token, not yet fed.
    `stale` means the slot's state no longer matches the transcript (a turn was aborted or
    failed mid-way): the next turn zeroes it and feeds the whole transcript again."""

    sid: int
    status: SessionStatus = SessionStatus.OPEN
    slot: int | None = None
    transcript: list = field(default_factory=list)
    pending: list = field(default_factory=list)
    turns: list = field(default_factory=list)  # request ids, in order
    turn: int | None = None  # the request id of the turn queued or in flight
    stale: bool = False
    idle_steps: int = 0


class SessionState(NamedTuple):
    """A session's recurrent state between turns: copies (clones) of its slot's conv state
    `[layers, conv_dim, conv_kernel - 1]` and SSM state `[layers, heads, head_dim, dstate]`,
    exactly the state of feeding `tokens` from zero. Copies, not views: the slot is lent to the
    session's next turn and written in place, and a view would let a reader write past the
    lifecycle."""

    conv: torch.Tensor
    ssm: torch.Tensor
    tokens: tuple  # the transcript the state holds (prompts and outputs so far, minus the last output)


class Counters(NamedTuple):
    """Totals since the scheduler was built (`scheduler.counters`); every ended request is
    counted once, under the reason it ended with (a parallel-sampling group's prompt request,
    which the user did not submit, is not)."""

    steps: int  # batches launched
    finished: int  # requests that reached their token budget (reason "length")
    aborts: int  # requests ended by `abort()`
    failures: int  # requests ended because their step's forward pass raised ("step N failed: ...")
    dropped: int  # queued session turns dropped by the session's close
    rollbacks: int  # candidates that took a slot, did not fit the step and gave it back
    retractions: int  # running requests preempted to free a slot or a seat (each recomputes later)
    verified: int = 0  # windows verified and committed (speculative decoding)
    drafted: int = 0  # drafts proposed in them
    accepted: int = 0  # drafts the target agreed with


class StepReport(NamedTuple):
    step: int | None
    kind: str  # "prefill", "decode" or "idle"
    size: int
    tokens: int
    finished: tuple  # Result of every request that ended since the last report (or collect())
    rolled_back: int
    retracted: tuple
