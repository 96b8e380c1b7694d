"""Run the CrossHair proofs of `slotwarden.model.proofs` and read their verdicts.

CrossHair exits 0 both for "confirmed over all paths" and for "not confirmed", and with its
default timeouts it can miss a planted bug, so this runner always sets `per_condition_timeout`
and reads the message state: a proof passes only when every condition is CONFIRMED.
Pinned to crosshair-tool 0.0.113 (its analysis API is not promised stable).
"""

from __future__ import annotations

import time
import warnings
from typing import Callable, Iterable, NamedTuple

from crosshair.core_and_libs import analyze_function, run_checkables
from crosshair.options import AnalysisKind, AnalysisOptionSet
from crosshair.statespace import MessageType

from slotwarden.model import proofs
from slotwarden.model.declaration import Lifecycle
from slotwarden.model.lifecycle import LIFECYCLE, WRITE_SET
from slotwarden.model.write_set import WriteSet
from slotwarden.model import registry

DEFAULT_TIMEOUT = 300.0
"""Seconds CrossHair may spend on one condition before giving up (never left at its default).
A proof that exhausts its paths stops sooner, well within it (verify's report gives each proof's seconds)."""


class ProofResult(NamedTuple):
    name: str  # the contracted function's property key
    property: str  # the properties it proves, in words (from the registry)
    verdict: str  # CONFIRMED, CANNOT_CONFIRM, POST_FAIL, ...: the worst message state
    seconds: float
    message: str  # CrossHair's own words; for a failure, the call that breaks the contract

    @property
    def confirmed(self) -> bool:
        return self.verdict == MessageType.CONFIRMED.name


def prove(
    name: str, lifecycle: Lifecycle = LIFECYCLE, timeout: float = DEFAULT_TIMEOUT, write_set: WriteSet = WRITE_SET
) -> ProofResult:
    """Run CrossHair on the proof `name` against `lifecycle` (and, for a step proof, the
    write-set declaration `write_set`) and return its verdict."""
    return _analyze(proofs.PROOFS[name], name, lifecycle, timeout, write_set)


def _analyze(
    fn: Callable, name: str, lifecycle: Lifecycle, timeout: float, write_set: WriteSet = WRITE_SET
) -> ProofResult:
    options = AnalysisOptionSet(
        analysis_kind=[AnalysisKind.PEP316],
        per_condition_timeout=float(timeout),
        per_path_timeout=max(2.0, timeout / 10),
    )
    proofs.SUBJECT[0], proofs.STEP_SUBJECT[0] = lifecycle, write_set
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():  # CrossHair's module scan trips deprecation warnings in torch and others
            warnings.simplefilter("ignore")
            messages = list(run_checkables(analyze_function(fn, options)))
    finally:
        proofs.SUBJECT[0], proofs.STEP_SUBJECT[0] = LIFECYCLE, WRITE_SET
    seconds = time.perf_counter() - start
    if not messages:
        verdict, text = MessageType.CANNOT_CONFIRM, "CrossHair returned no message"
    else:
        worst = max(messages, key=lambda m: _RANK[m.state])
        verdict, text = worst.state, worst.message
    return _result(name, verdict.name, seconds, text)


def _result(name: str, verdict: str, seconds: float, text: str) -> ProofResult:
    words = "; ".join(registry.text(p) for p in registry.proved_by(name)) or name
    return ProofResult(name, words, verdict, seconds, text)


def prove_moves(lifecycle: Lifecycle = LIFECYCLE, timeout: float = DEFAULT_TIMEOUT) -> list[ProofResult]:
    """Every one-move proof (`proofs.MOVE_PROOFS`) from one exploration of
    `proofs.prove_every_move`, whose postcondition is their conjunction: each CONFIRMED with it,
    its seconds a share of the exploration's. When it does not confirm, each one-move proof
    runs alone, so the results name which properties break."""
    whole = _analyze(proofs.prove_every_move, "every_move", lifecycle, timeout)
    if not whole.confirmed:
        return [prove(name, lifecycle, timeout) for name in proofs.MOVE_PROOFS]
    share = whole.seconds / len(proofs.MOVE_PROOFS)
    text = f"{whole.message} (every one-move proof at once, by prove_every_move: {whole.seconds:.1f} s in all)"
    return [_result(name, whole.verdict, share, text) for name in proofs.MOVE_PROOFS]


def prove_all(
    lifecycle: Lifecycle = LIFECYCLE,
    timeout: float = DEFAULT_TIMEOUT,
    names: Iterable[str] | None = None,
    on_result: Callable[[ProofResult], None] | None = None,
) -> list[ProofResult]:
    """Every proof (or those named), in declaration order."""
    results = []
    for name in names or proofs.PROOFS:
        result = prove(name, lifecycle, timeout)
        if on_result:
            on_result(result)
        results.append(result)
    return results


_RANK = {
    MessageType.CONFIRMED: 0,
    MessageType.CANNOT_CONFIRM: 1,
    MessageType.PRE_UNSAT: 2,
    MessageType.POST_ERR: 3,
    MessageType.EXEC_ERR: 4,
    MessageType.POST_FAIL: 5,
    MessageType.SYNTAX_ERR: 6,
    MessageType.IMPORT_ERR: 7,
}
