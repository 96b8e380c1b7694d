"""The bug history as a catalogue: each `Mutant` pairs a bug's runtime variant (a `Scheduler`
subclass: `runtime.py`, the cache's in `cache.py`) with its checker variant (a `Policy`
subclass: `policies.py`), the bounds it needs, and the catch each must get: the checker's
violated property and the runtime error's type. `verify` counts a catch for another reason as a
failure: a crash elsewhere does not show that the check meant for the bug works.

A bug in the state's numbers rather than in who holds a slot (SGLang #40252: a retracted turn's
partial state kept as the session's checkpoint) makes only legal moves: the checker cannot see
it (`policy` None); the continuity machine catches it (`machine="continuity"`). The livelock and
hang bugs (`LIVENESS_MUTANTS`) make only legal moves too: the checker's liveness properties
catch them (`checker.liveness`); the livelock's runtime variant never lets the scheduler go idle
(the machine's teardown); the hangs' runtime variants are not written yet (`cls` None). The
index bugs (`write_set.py`) break the step's write set: the launch check refuses them, and the
checker's launch judge catches them. Speculative decoding's bugs: `window_history.py`.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.verification.abstract import Bounds
from slotwarden.verification.mutants.cache import (
    CowPublishedBeforeCopy,
    CowUnlockOverDecrements,
    EvictIgnoresPin,
    MatchLeaksOnQueueAbort,
    PublishAtSchedule,
    TombstoneLockSkipped,
)
from slotwarden.verification.mutants.policies import (
    AbstractMinusOnePad,
    AbstractPadStaleTail,
    AbstractReusedSlotNotZeroed,
    AbstractRowBoundState,
    AbstractStaleRowMapping,
    AbstractWrongSeedSlot,
    AbstractLentRollbackFrees,
    AbstractRollbackFreesAdmitted,
    AbstractRollbackFreesAdmittedTurn,
    AbstractCloseLeaks,
    AbstractStaleHandleAfterPark,
    AbstractSentinelFreed,
    AbstractAbortLeaks,
    AbstractEarlyFence,
    AbstractQueuedTurnAbortBricks,
    AbstractAbortPinsLentSlot,
    AbstractRejectedTurnClearsLive,
    AbstractOverlengthAbortRestores,
    AbstractTombstoneLockSkipped,
    AbstractCowUnlockOverDecrements,
    AbstractCowPublishedBeforeCopy,
    AbstractMatchLeaksOnQueueAbort,
    AbstractEvictIgnoresPin,
    AbstractPublishAtSchedule,
    AbstractReleaseAwaitsLostNotice,
    AbstractRequeueNearCeiling,
    AbstractTurnAwaitsLostHandoff,
)
from slotwarden.verification.mutants.write_set import (
    MinusOnePad,
    PadStaleTail,
    ReusedSlotNotZeroed,
    RowBoundState,
    StaleRowMapping,
    WrongSeedSlot,
)
from slotwarden.verification.mutants.runtime import (
    LentRollbackFrees,
    RollbackFreesAdmitted,
    RollbackFreesAdmittedTurn,
    CloseLeaks,
    StaleHandleAfterPark,
    SentinelFreed,
    AbortLeaks,
    EarlyFence,
    QueuedTurnAbortBricks,
    AbortPinsLentSlot,
    RejectedTurnClearsLive,
    OverlengthAbortRestores,
    RequeueNearCeiling,
    RetractKeepsPartialTurn,
)


class Mutant(NamedTuple):
    name: str
    cls: type | None  # the Scheduler subclass (runtime); None: its runtime variant is not written yet
    policy: type | None  # the Policy subclass (exhaustive checker); None: a bug its model cannot hold
    bounds: Bounds  # the checker bounds the bug needs
    bug: str  # the SGLang pull request(s)
    rule: str  # the lifecycle rule it breaks
    needs: dict  # scheduler settings fixed for this mutant (none: the machines find every mutant untuned)
    checker_catch: tuple = ()  # the checker properties that count as catching it
    runtime_catch: tuple = ()  # the runtime error types that count as catching it
    machine: str = "scheduler"  # the Hypothesis machine that hunts it: "scheduler" or "continuity"

    def caught_for_the_right_reason(self, prop: str | None, error: str) -> tuple[bool, bool]:
        """(checker, runtime): whether each caught it with an expected property / error type
        (`error` as the campaign reports it: "Type: message"; "" when it passed). A mutant
        the checker cannot see (`policy` None) is not checked there: that half holds when no
        property is reported; likewise a mutant with no runtime variant in this catalogue
        (`cls` None) holds its runtime half when no error is reported."""
        kind = error.split(":")[0] if error else None
        checker = prop is None if self.policy is None else prop in self.checker_catch
        runtime = kind is None if self.cls is None else kind in self.runtime_catch
        return checker, runtime


_SESSION = Bounds(slots=1, requests=3, sessions=1, overlap=False)  # s0 = r0, r1; r2 plain
_PAIR = Bounds(slots=2, requests=3, sessions=1, overlap=False)
_OVERLAP = Bounds(slots=2, requests=3, sessions=1, overlap=True)
_PADDED = Bounds(slots=3, requests=4, sessions=0, overlap=False)  # three running: padded to four
_PADDED_OVERLAP = Bounds(slots=4, requests=4, sessions=0, overlap=True)  # four rows in flight, then three
_CACHE = Bounds(slots=2, requests=3, sessions=0, overlap=False, nodes=1)  # a donor and two readers
_CACHE_OVERLAP = Bounds(slots=2, requests=2, sessions=0, overlap=True, nodes=1)

MUTANTS = (
    Mutant(
        "lent_rollback_frees",
        LentRollbackFrees,
        AbstractLentRollbackFrees,
        _SESSION,
        "21404 -> 23327",
        "a lent slot returns to its session",
        {},
        checker_catch=("legal",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "rollback_frees_admitted",
        RollbackFreesAdmitted,
        AbstractRollbackFreesAdmitted,
        _PAIR,
        "16067 / 18910",
        "a slot in the running batch is never freed by the batch builder",
        {},
        checker_catch=("legal",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "rollback_frees_admitted_turn",
        RollbackFreesAdmittedTurn,
        AbstractRollbackFreesAdmittedTurn,
        _PAIR,
        "16067 / 18910, in a session",
        "a turn in the running batch is never rolled back by the batch builder",
        {},
        checker_catch=("legal",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "close_leaks",
        CloseLeaks,
        AbstractCloseLeaks,
        _SESSION,
        "23496",
        "session close releases exactly the slots it owns",
        {},
        checker_catch=("no_orphans",),
        runtime_catch=("AuditFailed",),
    ),
    Mutant(
        "stale_handle_after_park",
        StaleHandleAfterPark,
        AbstractStaleHandleAfterPark,
        _SESSION,
        "26941",
        "after hand-over the previous holder keeps no handle",
        {},
        checker_catch=("handles_match",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "sentinel_freed",
        SentinelFreed,
        AbstractSentinelFreed,
        _SESSION,
        "40044 / 40250",
        "only real slot ids can be freed",
        {},
        checker_catch=("legal",),
        runtime_catch=("BadSlotId",),
    ),
    Mutant(
        "abort_leaks",
        AbortLeaks,
        AbstractAbortLeaks,
        _SESSION,
        "12693",
        "every path out of a request releases what it holds",
        {},
        # a leaked plain slot shows at the idle audit; a leaked lent slot already at its
        # session's next lend, which the ledger refuses (the slot is still LENT_RUNNING)
        checker_catch=("no_orphans",),
        runtime_catch=("AuditFailed", "IllegalMove"),
    ),
    Mutant(
        "early_fence",
        EarlyFence,
        AbstractEarlyFence,
        _OVERLAP,
        "overlap scheduling",
        "a released slot is free only after its step's fence",
        {},
        checker_catch=("in_flight_not_free",),
        runtime_catch=("FenceError",),
    ),
    Mutant(
        "queued_turn_abort_bricks",
        QueuedTurnAbortBricks,
        AbstractQueuedTurnAbortBricks,
        _SESSION,
        "31765 / 31767",
        "an aborted turn ends its session's turn",
        {},
        checker_catch=("deadlock",),
        runtime_catch=("AssertionError",),
    ),
    Mutant(
        "abort_pins_lent_slot",
        AbortPinsLentSlot,
        AbstractAbortPinsLentSlot,
        _SESSION,
        "40251",
        "an aborted lent turn gives the slot back to its session",
        {},
        checker_catch=("no_orphans",),
        runtime_catch=("AssertionError", "IllegalMove", "AuditFailed"),
    ),
    Mutant(
        "rejected_turn_clears_live",
        RejectedTurnClearsLive,
        AbstractRejectedTurnClearsLive,
        _SESSION,
        "36503",
        "a session has one turn in flight",
        {},
        checker_catch=("no_orphans", "legal", "handles_match"),
        runtime_catch=("IllegalMove", "AssertionError", "AuditFailed"),
    ),
    Mutant(
        "overlength_abort_restores",
        OverlengthAbortRestores,
        AbstractOverlengthAbortRestores,
        _SESSION,
        "22273",
        "only the borrower of a lent slot writes it",
        {},
        checker_catch=("legal",),
        runtime_catch=("IllegalCopy",),
    ),
    Mutant(
        "retract_keeps_partial_turn",
        RetractKeepsPartialTurn,
        None,
        _SESSION,
        "40252",
        "a retraction does not advance the session's checkpoint",
        {},
        runtime_catch=("AssertionError",),  # the continuity machine: tokens or state differ from the transcript's
        machine="continuity",
    ),
    # the step's write set: every move legal, the row -> slot index wrong (verification/mutants/write_set.py)
    Mutant(
        "pad_stale_tail",
        PadStaleTail,
        AbstractPadStaleTail,
        _PADDED_OVERLAP,
        "TensorRT-LLM #13151",
        "a pad row addresses only the pad slot",
        {"pad_to_captured": True, "overlap": True},
        checker_catch=("pads_to_pad",),
        runtime_catch=("IllegalStep",),
    ),
    Mutant(
        "minus_one_pad",
        MinusOnePad,
        AbstractMinusOnePad,
        _PADDED,
        "vLLM #43810",
        "-1 is never an index: a pad row addresses only the pad slot",
        {"pad_to_captured": True},
        checker_catch=("pads_to_pad", "ids_in_pool"),
        runtime_catch=("IllegalStep",),
    ),
    Mutant(
        "row_bound_state",
        RowBoundState,
        AbstractRowBoundState,
        _PAIR,
        "tenstorrent/vllm #454",
        "a row writes only the slot its request holds",
        {},
        checker_catch=("writes_held",),
        runtime_catch=("IllegalStep",),
    ),
    Mutant(
        "wrong_seed_slot",
        WrongSeedSlot,
        AbstractWrongSeedSlot,
        _PAIR,
        "vLLM #53142 / #55600",
        "a row reads and writes only the slot its request holds",
        {},
        checker_catch=("reads_held",),
        runtime_catch=("IllegalStep",),
    ),
    Mutant(
        "stale_row_mapping",
        StaleRowMapping,
        AbstractStaleRowMapping,
        _OVERLAP,
        "vLLM #55951",
        "a row writes only the slot its request holds, in this step",
        {},
        checker_catch=("writes_held", "writes_disjoint"),
        runtime_catch=("IllegalStep",),
    ),
    Mutant(
        "reused_slot_not_zeroed",
        ReusedSlotNotZeroed,
        AbstractReusedSlotNotZeroed,
        _PAIR,
        "vLLM #56524 / SGLang #39862",
        "a slot's first read follows its zeroing or a copy into it",
        {},
        checker_catch=("reads_filled",),
        runtime_catch=("IllegalStep",),
    ),
    # the prefix cache: the runtime variants run with the cache on (verification/mutants/cache.py);
    # the checker's on bounds with cache nodes
    Mutant(
        "tombstone_lock_skipped",
        TombstoneLockSkipped,
        AbstractTombstoneLockSkipped,
        _CACHE,
        "SGLang #27147",
        "every unlock matches a lock by the same request",
        {"prefix_cache": True},
        checker_catch=("locks_match", "legal"),
        runtime_catch=("IllegalCopy", "IllegalMove"),
    ),
    Mutant(
        "cow_unlock_over_decrements",
        CowUnlockOverDecrements,
        AbstractCowUnlockOverDecrements,
        _CACHE,
        "SGLang #27038",
        "a cached slot is never evicted while a copy from it is in flight",
        {"prefix_cache": True},
        checker_catch=("evict_unlocked",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "cow_published_before_copy",
        CowPublishedBeforeCopy,
        AbstractCowPublishedBeforeCopy,
        _CACHE_OVERLAP,
        "SGLang #30986",
        "a slot is published only once the step writing it is fenced",
        {"prefix_cache": True, "overlap": True},
        checker_catch=("reads_published",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "match_leaks_on_queue_abort",
        MatchLeaksOnQueueAbort,
        AbstractMatchLeaksOnQueueAbort,
        _CACHE,
        "SGLang #20182",
        "every path out of a request (abort included) lets go of what its match holds",
        {"prefix_cache": True},
        checker_catch=("locks_match",),
        runtime_catch=("IllegalMove", "AuditFailed"),
    ),
    Mutant(
        "evict_ignores_pin",
        EvictIgnoresPin,
        AbstractEvictIgnoresPin,
        _CACHE,
        "LMDeploy #4700",
        "only an unlocked node is evicted",
        {"prefix_cache": True},
        checker_catch=("legal",),
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "publish_at_schedule",
        PublishAtSchedule,
        AbstractPublishAtSchedule,
        _CACHE_OVERLAP,
        "vLLM #56525",
        "a donated slot is published at the fence of the step that wrote it, not when the next is scheduled",
        {"prefix_cache": True},
        checker_catch=("reads_published",),
        runtime_catch=("FenceError",),
    ),
)

LIVENESS_MUTANTS = (
    Mutant(
        "requeue_near_ceiling",
        RequeueNearCeiling,
        AbstractRequeueNearCeiling,
        _SESSION,
        "vLLM #52520 (HISTORY 44)",
        "a request admitted at the slot ceiling and prefilled is not requeued to be prefilled again forever",
        {},
        checker_catch=("admitted_ends",),
        runtime_catch=("AssertionError",),  # the machine's teardown: never idle, requests wait forever
    ),
    Mutant(
        "release_awaits_lost_notice",
        None,
        AbstractReleaseAwaitsLostNotice,
        _SESSION,
        "vLLM #50754 (HISTORY 18)",
        "a released slot is fenced by a step that will come, not held until a lease expires",
        {},
        checker_catch=("released_freed",),
    ),
    Mutant(
        "turn_awaits_lost_handoff",
        None,
        AbstractTurnAwaitsLostHandoff,
        _SESSION,
        "vLLM #50754 (HISTORY 18)",
        "a waiting turn is admitted when a slot is free, not only when its session parks one",
        {},
        checker_catch=("waiting_admitted",),
    ),
)
"""The livelock and hang class: every move legal, each caught by the liveness property it names
(the same bounds pass under the correct policy); the mutant matrix runs them after `MUTANTS`."""
