"""`slotwarden verify`: the main job. Runs every check, prints a summary, returns the exit code."""

from __future__ import annotations

import time

from slotwarden.verification.agreement import judge
from slotwarden.verification.crosshair_proofs import DEFAULT_TIMEOUT, ProofResult, prove_all


def _agreement() -> tuple[bool, str]:
    start = time.perf_counter()
    verdicts = judge()
    bad = [v for v in verdicts if not v.agrees]
    legal = sum(v.step is not None for v in verdicts)
    took = time.perf_counter() - start
    text = (
        f"machine, step() and table agree on {len(verdicts) - len(bad)}/{len(verdicts)} "
        f"(state, event, actor, relation) combinations ({legal} legal) in {took:.2f} s"
    )
    for v in bad[:5]:
        text += f"\n    DISAGREE {v.case}: machine={v.machine} step={v.step} table={v.table}"
    return not bad, text


def run_verify(args) -> int:
    ok = True
    print("== declaration: the derived forms agree", flush=True)
    agreed, text = _agreement()
    ok &= agreed
    print(("  ok    " if agreed else "  FAIL  ") + text, flush=True)

    timeout = args.proof_timeout or DEFAULT_TIMEOUT
    print(f"== CrossHair proofs of the model (per-condition timeout {timeout:.0f} s)", flush=True)

    def show(r: ProofResult) -> None:
        print(f"  {r.verdict:<15} {r.seconds:6.1f} s  {r.name:<24} {r.property}", flush=True)
        if not r.confirmed:
            print(f"      {r.message}", flush=True)

    results = prove_all(timeout=timeout, names=args.only, on_result=show)
    proved = all(r.confirmed for r in results)
    ok &= proved
    total = sum(r.seconds for r in results)
    print(f"  {sum(r.confirmed for r in results)}/{len(results)} CONFIRMED in {total:.1f} s", flush=True)
    print("verify: " + ("PASS" if ok else "FAIL"), flush=True)
    return 0 if ok else 1
