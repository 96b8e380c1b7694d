"""Contracts that state the safety properties over the model, for CrossHair to confirm.

Each proof is a contracted function (PEP 316 docstring contracts) around `step`, a step over a
pool, or the shutdown of a slot; CrossHair explores every path through it and must report
"confirmed over all paths". `PROOFS` names every one, `MOVE_PROOFS` the one-move proofs
(`move_proofs`) that `prove_every_move` confirms at once; `pool_proofs` holds the other two.

Why one move is enough: every move property's only precondition is `exclusive` (a well-formed
record, any owner, borrower, fence and lock count), and `prove_exclusive` shows that `exclusive`
is inductive, so each move property holds on every move of every run from a free slot; a proof
over runs of several moves would establish nothing more. `prove_conserved` is inductive the
same way over a pool step, and `prove_quiescent` starts from a record in any state. The
step proofs (`launch`) judge the check of a launched step's write set. The lifecycle under proof
is `SUBJECT[0]` (`proof_move`) and the write set `STEP_SUBJECT[0]`, so a test can point the same
proofs at a deliberately wrong declaration and watch them fail."""

from __future__ import annotations

from slotwarden.model.proofs.one_move import (
    prove_authority,
    prove_borrow_safe,
    prove_cache_read_only,
    prove_commit_fenced,
    prove_every_move,
    prove_evict_unlocked,
    prove_exclusive,
    prove_fence_respected,
    prove_freed_once,
    prove_handles_follow,
    prove_lock_counted,
    prove_parks_what_ran,
    prove_publishes_committed,
    prove_reads_published,
    prove_release_waits,
    prove_session_kept,
)
from slotwarden.model.proofs.launch import (
    STEP_SUBJECT,
    prove_ids_in_pool,
    prove_pads_to_pad,
    prove_reads_committed,
    prove_reads_filled,
    prove_reads_held,
    prove_writes_disjoint,
    prove_writes_held,
)
from slotwarden.model.proofs.pool import BATCHES, pool_step, prove_conserved, prove_quiescent, record, shut_down
from slotwarden.model.proofs.move import MOVE_CLAIMS, SUBJECT, Move, holds, move, record_of

PROOFS = {
    "session_kept": prove_session_kept,
    "freed_once": prove_freed_once,
    "conserved": prove_conserved,
    "fence_respected": prove_fence_respected,
    "release_waits": prove_release_waits,
    "exclusive": prove_exclusive,
    "handles_follow": prove_handles_follow,
    "quiescent": prove_quiescent,
    "authority": prove_authority,
    "borrow_safe": prove_borrow_safe,
    "parks_what_ran": prove_parks_what_ran,
    "cache_read_only": prove_cache_read_only,
    "evict_unlocked": prove_evict_unlocked,
    "lock_counted": prove_lock_counted,
    "reads_published": prove_reads_published,
    "writes_held": prove_writes_held,
    "writes_disjoint": prove_writes_disjoint,
    "pads_to_pad": prove_pads_to_pad,
    "ids_in_pool": prove_ids_in_pool,
    "reads_held": prove_reads_held,
    "reads_filled": prove_reads_filled,
    "publishes_committed": prove_publishes_committed,
    "commit_fenced": prove_commit_fenced,
    "reads_committed": prove_reads_committed,
}
"""Every contracted function in model/, keyed by the proof's name (`registry.proved_by` says
which properties each establishes), but `prove_every_move`, which is the one-move proofs at once."""

MOVE_PROOFS = tuple(MOVE_CLAIMS)
"""The one-move proofs: those `prove_every_move` confirms in one exploration."""

__all__ = [
    "BATCHES",
    "MOVE_CLAIMS",
    "MOVE_PROOFS",
    "Move",
    "PROOFS",
    "STEP_SUBJECT",
    "SUBJECT",
    "holds",
    "move",
    "pool_step",
    "prove_authority",
    "prove_borrow_safe",
    "prove_cache_read_only",
    "prove_commit_fenced",
    "prove_conserved",
    "prove_every_move",
    "prove_evict_unlocked",
    "prove_exclusive",
    "prove_fence_respected",
    "prove_freed_once",
    "prove_handles_follow",
    "prove_lock_counted",
    "prove_parks_what_ran",
    "prove_publishes_committed",
    "prove_quiescent",
    "prove_reads_published",
    "prove_release_waits",
    "prove_session_kept",
    "prove_ids_in_pool",
    "prove_pads_to_pad",
    "prove_reads_committed",
    "prove_reads_filled",
    "prove_reads_held",
    "prove_writes_disjoint",
    "prove_writes_held",
    "record",
    "record_of",
    "shut_down",
]
