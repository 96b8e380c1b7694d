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
from slotwarden.model.lifecycle import LIFECYCLE
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


def prove(name: str, lifecycle: Lifecycle = LIFECYCLE, timeout: float = DEFAULT_TIMEOUT) -> ProofResult:
    """Run CrossHair on the proof `name` against `lifecycle` and return its verdict."""
    fn = proofs.PROOFS[name]
    options = AnalysisOptionSet(
        analysis_kind=[AnalysisKind.PEP316],
        per_condition_timeout=float(timeout),
        per_path_timeout=max(2.0, timeout / 10),
    )
    proofs.SUBJECT[0] = lifecycle
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():  # CrossHair's module scan trips deprecation warnings in torch and others
            warnings.simplefilter("ignore")
            messages = list(run_checkables(analyze_function(fn, options)))
    finally:
        proofs.SUBJECT[0] = LIFECYCLE
    seconds = time.perf_counter() - start
    if not messages:
        verdict, text = MessageType.CANNOT_CONFIRM, "CrossHair returned no message"
    else:
        worst = max(messages, key=lambda m: _RANK[m.state])
        verdict, text = worst.state, worst.message
    words = "; ".join(registry.text(p) for p in registry.proved_by(name)) or name
    return ProofResult(name, words, verdict.name, seconds, text)


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
