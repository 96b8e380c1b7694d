"""The speculative-decoding rows of the bug history (`history.Mutant`), on bounds with windows:
each caught by the property it names in the checker (`speculative.py`, the twin's policies) and
by the error it names at the runtime (`windows.py`: the machines draw speculative requests). The
mutant matrix runs them after `history.LIVENESS_MUTANTS`.
"""

from __future__ import annotations

from slotwarden.verification.abstract import Bounds
from slotwarden.verification.mutants.history import Mutant
from slotwarden.verification.mutants.speculative import (
    AbstractCountBeforeFence,
    AbstractLookaheadCached,
    AbstractRollbackInPlace,
    AbstractStaleWindowRead,
    AbstractVerifyBeforeAlloc,
    AbstractVerifyNeverCommits,
    AbstractWindowOneSlot,
)
from slotwarden.verification.mutants.windows import (
    CountBeforeFence,
    LookaheadCached,
    RollbackInPlace,
    StaleWindowRead,
    VerifyBeforeAlloc,
    VerifyNeverCommits,
    WindowOneSlot,
)

_SPEC = Bounds(slots=3, requests=2, sessions=0, overlap=True, drafts=1)  # a window of two slots, overlapped
_SPEC_CACHE = Bounds(slots=4, requests=2, sessions=0, overlap=True, nodes=1, drafts=1)

SPECULATIVE_MUTANTS = (
    Mutant(
        "lookahead_cached",
        LookaheadCached,
        AbstractLookaheadCached,
        _SPEC_CACHE,
        "vLLM #48375",
        "only committed state is published to the prefix cache",
        {},
        checker_catch=("legal", "publishes_committed"),
        machine="speculative",
        runtime_catch=("IllegalMove",),
    ),
    Mutant(
        "stale_window_read",
        StaleWindowRead,
        AbstractStaleWindowRead,
        _SPEC,
        "vLLM #56531",
        "the next step reads only the committed state",
        {},
        checker_catch=("reads_committed", "reads_current"),
        machine="speculative",
        runtime_catch=("IllegalStep",),
    ),
    Mutant(
        "verify_never_commits",
        VerifyNeverCommits,
        AbstractVerifyNeverCommits,
        _SPEC,
        "SGLang #26351",
        "a commit copies the accepted state into the committed slot",
        {},
        checker_catch=("reads_current",),
        runtime_catch=("AssertionError",),
        machine="speculative continuity",
    ),
    Mutant(
        "window_one_slot",
        WindowOneSlot,
        AbstractWindowOneSlot,
        _SPEC,
        "vLLM #41233",
        "a verify writes only the window slots its request holds",
        {},
        checker_catch=("writes_held", "ids_in_pool"),
        machine="speculative",
        runtime_catch=("IllegalStep",),
    ),
    Mutant(
        "rollback_in_place",
        RollbackInPlace,
        AbstractRollbackInPlace,
        _SPEC,
        "llama.cpp #26695",
        "a rollback restores the committed state: the verify never writes it",
        {},
        checker_catch=("rollback_restores",),
        runtime_catch=("AssertionError",),
        machine="speculative continuity",
    ),
    Mutant(
        "verify_before_alloc",
        VerifyBeforeAlloc,
        AbstractVerifyBeforeAlloc,
        _SPEC,
        "SGLang #28484",
        "a verify addresses only window slots already allocated",
        {},
        checker_catch=("ids_in_pool",),
        machine="speculative",
        runtime_catch=("IllegalStep",),
    ),
    Mutant(
        "count_before_fence",
        CountBeforeFence,
        AbstractCountBeforeFence,
        _SPEC,
        "vLLM #50021",
        "the accepted count is read only after the fence of the step that produced it",
        {},
        checker_catch=("legal", "commit_fenced"),
        machine="speculative",
        runtime_catch=("IllegalMove",),
    ),
)
