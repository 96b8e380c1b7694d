"""The declaration mutants no check kills, each with the reason it changes nothing the
properties protect. The stage fails on a survivor missing here, and on an entry here that some
check kills. A mutant is equivalent only if the runtime half of every history mutant gives the
same verdict under it (`runtime_checks`): each history mutant's row of the matrix replays its
failing example under every mutant listed here, and under those it is said to kill below."""

_NO_BORROWER = "the source state has no borrower (`exclusive`, proved inductive): KEEP and CLEAR both give NOBODY"
_NO_FENCE = "the source state has no fence (`exclusive`, proved inductive): KEEP and CLEAR both give 0"
_NO_OWNER = "a RELEASED record names no owner (`exclusive`, proved inductive): KEEP and CLEAR both give NOBODY"
_ACTOR_IS_OWNER = "only the owner fires the rule (relation OWNER): ACTOR and KEEP give the same owner"
_ACTOR_IS_BORROWER = "only the borrower fires the rule (relation BORROWER): ACTOR and KEEP give the same borrower"
_NO_OP = "a self-loop that rewrites nothing: the move leaves the record as it was"
_SAME_MOVE = (
    "the same move as a declared rule of that state (the turn gives its session back the slot) "
    "under another event's name"
)
_LATER = "a candidate's slot, which no step used, waits for a fence instead of being free at once: later, never unsafe"

_NO_COUNT = "the source state counts no locks (`exclusive`, proved inductive): KEEP and CLEAR both give 0"
_UNLOCKED = "only an unlocked node is evicted (relation OWNER, not PINNED): KEEP and CLEAR both give 0 locks"
_CACHE = {
    **{
        f"{r}: readers from {src}": _NO_COUNT
        for r, src in (
            ("FREE --ALLOC [NONE]", "KEEP"),
            ("TAKEN --ADMIT [OWNER]", "CLEAR"),
            ("TAKEN --ROLLBACK [OWNER]", "KEEP"),
            ("TAKEN --ABORT [OWNER]", "KEEP"),
            ("RUNNING --FINISH [OWNER]", "KEEP"),
            ("RUNNING --RETRACT [OWNER]", "KEEP"),
            ("RUNNING --ABORT [OWNER]", "KEEP"),
            ("RUNNING --PARK [OWNER]", "CLEAR"),
            ("PARKED --LEND [OWNER]", "CLEAR"),
            ("LENT --ADMIT [BORROWER]", "CLEAR"),
            ("LENT --ROLLBACK [BORROWER]", "CLEAR"),
            ("LENT --ABORT [BORROWER]", "CLEAR"),
            ("LENT_RUNNING --FINISH [BORROWER]", "CLEAR"),
            ("LENT_RUNNING --RETRACT [BORROWER]", "CLEAR"),
            ("LENT_RUNNING --ABORT [BORROWER]", "CLEAR"),
            ("PARKED --CLOSE [OWNER]", "KEEP"),
            ("RELEASED --FENCE [DUE]", "KEEP"),
            ("RUNNING --INSERT [OWNER]", "KEEP"),
            ("CACHING --FENCE [DUE]", "KEEP"),
            ("CACHING --EVICT [OWNER]", "KEEP"),
        )
    },
    "CACHED --EVICT [OWNER]: readers from KEEP": _UNLOCKED,
    **{
        f"{r}: borrower from {src}": _NO_BORROWER
        for r, src in (
            ("RUNNING --INSERT [OWNER]", "KEEP"),
            ("CACHING --FENCE [DUE]", "KEEP"),
            ("CACHING --EVICT [OWNER]", "KEEP"),
            ("CACHED --EVICT [OWNER]", "KEEP"),
            ("CACHED --LOCK [NONE]", "CLEAR"),
            ("CACHED --LOCK [READER]", "CLEAR"),
            ("CACHED --UNLOCK [READER]", "CLEAR"),
            ("CACHED --UNLOCK [FULL]", "CLEAR"),
        )
    },
    **{
        f"CACHED --{e}: fence from CLEAR": _NO_FENCE
        for e in (
            "LOCK [NONE]",
            "LOCK [READER]",
            "UNLOCK [READER]",
            "UNLOCK [FULL]",
        )
    },
}
"""The prefix cache's equivalent mutants (and the other rules' mutants of the lock count)."""

_WINDOW_BACK = (
    "a window slot goes back under another event's name: to FREE as its rollback does (no step used it), "
    "or RELEASED to wait for the fence: later, never unsafe"
)
_REUSED = "a verified window slot becomes a window position again: the next verify writes it before any read"
_FRESH = "a slot the request took joins its window written by the step at once, skipping DRAFT: the same slot"
_OWN_STEP = (
    "a window slot's only user is its verify step: the fence of that step (KEEP) frees it as safely as a later one"
)
_WINDOW = {
    **{
        f"{rule}: also from {state}": _WINDOW_BACK
        for rule in (
            "TAKEN --ABORT [OWNER]",
            "RUNNING --FINISH [OWNER]",
            "RUNNING --RETRACT [OWNER]",
            "RUNNING --ABORT [OWNER]",
        )
        for state in ("DRAFT", "VERIFYING", "VERIFIED")
        if (rule, state) != ("TAKEN --ABORT [OWNER]", "VERIFYING")  # freed under its verify: killed
    },
    **{f"{r}: owner from ACTOR": _ACTOR_IS_OWNER for r in ("TAKEN --DRAFT [OWNER]", "DRAFT --VERIFY [OWNER]")},
    **{
        f"{r}: borrower from {src}": _NO_BORROWER
        for r, src in (
            ("TAKEN --DRAFT [OWNER]", "CLEAR"),
            ("DRAFT --VERIFY [OWNER]", "CLEAR"),
            ("VERIFYING --FENCE [DUE]", "KEEP"),
            ("RUNNING --COMMIT [OWNER]", "CLEAR"),
            ("VERIFIED --COMMIT [OWNER]", "KEEP"),
            ("DRAFT --ROLLBACK [OWNER]", "KEEP"),
            ("VERIFYING --ROLLBACK [OWNER]", "KEEP"),
            ("VERIFIED --ROLLBACK [OWNER]", "KEEP"),
        )
    },
    **{
        f"{r}: fence from {src}": _NO_FENCE
        for r, src in (
            ("TAKEN --DRAFT [OWNER]", "CLEAR"),
            ("RUNNING --COMMIT [OWNER]", "CLEAR"),
            ("LENT_RUNNING --COMMIT [BORROWER]", "CLEAR"),
            ("DRAFT --ROLLBACK [OWNER]", "KEEP"),
            ("VERIFIED --ROLLBACK [OWNER]", "KEEP"),
        )
    },
    **{
        f"{r}: readers from {src}": _NO_COUNT
        for r, src in (
            ("TAKEN --DRAFT [OWNER]", "CLEAR"),
            ("DRAFT --VERIFY [OWNER]", "CLEAR"),
            ("VERIFYING --FENCE [DUE]", "KEEP"),
            ("RUNNING --COMMIT [OWNER]", "CLEAR"),
            ("LENT_RUNNING --COMMIT [BORROWER]", "CLEAR"),
            ("VERIFIED --COMMIT [OWNER]", "KEEP"),
            ("DRAFT --ROLLBACK [OWNER]", "KEEP"),
            ("VERIFYING --ROLLBACK [OWNER]", "KEEP"),
            ("VERIFIED --ROLLBACK [OWNER]", "KEEP"),
        )
    },
    "TAKEN --DRAFT [OWNER]: also from DRAFT": _NO_OP,
    "TAKEN --DRAFT [OWNER]: also from VERIFIED": _REUSED,
    "DRAFT --VERIFY [OWNER]: also from TAKEN": _FRESH,
    "DRAFT --VERIFY [OWNER]: also from VERIFYING": "a window being verified is stamped again with a later step: "
    "its fence comes later, never unsafe",
    "DRAFT --VERIFY [OWNER]: also from VERIFIED": _REUSED,
    "RUNNING --COMMIT [OWNER]: also by NONE": _NO_OP,
    "RUNNING --COMMIT [OWNER]: owner from ACTOR": _ACTOR_IS_OWNER,
    "RUNNING --COMMIT [OWNER]: also from TAKEN": _NO_OP,
    "LENT_RUNNING --COMMIT [BORROWER]: also by NONE": _NO_OP,
    "LENT_RUNNING --COMMIT [BORROWER]: borrower from ACTOR": _ACTOR_IS_BORROWER,
    "LENT_RUNNING --COMMIT [BORROWER]: also from LENT": _NO_OP,
    "VERIFIED --COMMIT [OWNER]: also from TAKEN": _LATER,
    "VERIFYING --ROLLBACK [OWNER]: fence from KEEP": _OWN_STEP,
}
"""Speculative windows' equivalent mutants."""

EQUIVALENT: dict[str, str] = {
    **_CACHE,
    **_WINDOW,
    "FREE --ALLOC [NONE]: borrower from KEEP": "a FREE record has no borrower (`exclusive`): KEEP and CLEAR both give "
    "NOBODY",
    "FREE --ALLOC [NONE]: fence from KEEP": "a FREE record has no fence (`exclusive`): KEEP and CLEAR both give 0",
    "TAKEN --ADMIT [OWNER]: owner from ACTOR": _ACTOR_IS_OWNER,
    "TAKEN --ADMIT [OWNER]: borrower from CLEAR": _NO_BORROWER,
    "TAKEN --ADMIT [OWNER]: fence from CLEAR": _NO_FENCE,
    "TAKEN --ADMIT [OWNER]: also from RUNNING": _NO_OP,
    "TAKEN --ROLLBACK [OWNER]: borrower from KEEP": _NO_BORROWER,
    "TAKEN --ROLLBACK [OWNER]: fence from KEEP": _NO_FENCE,
    "TAKEN --ABORT [OWNER]: borrower from KEEP": _NO_BORROWER,
    "TAKEN --ABORT [OWNER]: fence from KEEP": _NO_FENCE,
    "RUNNING --FINISH [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RUNNING --FINISH [OWNER]: also from TAKEN": _LATER,
    "RUNNING --RETRACT [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RUNNING --RETRACT [OWNER]: also from TAKEN": _LATER,
    "RUNNING --ABORT [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RUNNING --PARK [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RUNNING --PARK [OWNER]: fence from CLEAR": _NO_FENCE,
    "PARKED --LEND [OWNER]: owner from ACTOR": _ACTOR_IS_OWNER,
    "PARKED --LEND [OWNER]: fence from CLEAR": _NO_FENCE,
    "LENT --ADMIT [BORROWER]: borrower from ACTOR": _ACTOR_IS_BORROWER,
    "LENT --ADMIT [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT --ADMIT [BORROWER]: also from LENT_RUNNING": _NO_OP,
    "LENT --ROLLBACK [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT --ABORT [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT_RUNNING --FINISH [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT_RUNNING --RETRACT [BORROWER]: fence from CLEAR": _NO_FENCE,
    "LENT_RUNNING --RETRACT [BORROWER]: also from LENT": _SAME_MOVE,
    "LENT_RUNNING --ABORT [BORROWER]: fence from CLEAR": _NO_FENCE,
    "PARKED --CLOSE [OWNER]: borrower from KEEP": _NO_BORROWER,
    "RELEASED --FENCE [DUE]: owner from KEEP": _NO_OWNER,
    "RELEASED --FENCE [DUE]: borrower from KEEP": "a RELEASED record has no borrower (`exclusive`): KEEP and CLEAR "
    "both give NOBODY",
}
"""Mutants no check kills, each with the reason it changes nothing the properties protect.
The stage fails on a survivor missing here, and on an entry here that some check kills."""

KILLED_AT_RUNTIME: dict[str, str] = {
    # the runtime refuses by event name: a buggy scheduler's FINISH of a lent candidate (PR 21404)
    # goes through once FINISH is also allowed from LENT
    "LENT_RUNNING --FINISH [BORROWER]: also from LENT": "lent_rollback_frees",
    # a rollback of a turn in the running batch goes through, and is caught only at its finish
    "LENT --ROLLBACK [BORROWER]: also from LENT_RUNNING": "rollback_frees_admitted_turn",
    # a rollback of a request in the running batch (PR 16067) goes through once ROLLBACK releases a
    # RUNNING slot like a window's
    "VERIFYING --ROLLBACK [OWNER]: also from RUNNING": "rollback_frees_admitted",
}
"""Mutants the model's checks do not kill but a history mutant's runtime half does: the history
mutant whose failing example gives another verdict under it. Its row checks the claim."""
