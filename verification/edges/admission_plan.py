"""The admission plan is the loop's decisions taken early: `take_fresh_slots` gives the leading
fresh candidates their slots in one multi-actor alloc, "in the same order, as the loop
decides" (runtime/scheduler/admission.py). Judged against the loop alone: twin schedulers,
one with the plan switched off, run the same workloads (plain requests of several lengths
under a small token budget and few seats, a short one behind one that does not fit, session
turns that keep or borrow a slot, an abort of a waiting request); after every step both give
the same report, every request holds the same slot, and the same requests end alike.
"""

from __future__ import annotations

from slotwarden.kernels.layer import TinyMambaConfig
from slotwarden.runtime.scheduler.build import build

LAYER = TinyMambaConfig(layers=1)
WORKLOADS = {  # name -> (build settings, submissions: step -> [(prompt length, new tokens, session?)])
    "seats and budget": (
        dict(slots=6, max_running=3, token_budget=8, chunk_size=4),
        {0: [(3, 2, False), (5, 2, False), (2, 3, False), (7, 1, False), (1, 2, False)], 3: [(4, 2, False)] * 3},
    ),
    "session turns between plain requests": (
        dict(slots=5, max_running=4, token_budget=10, chunk_size=6),
        {
            0: [(2, 2, True), (3, 1, False), (4, 2, False)],
            2: [(2, 2, True), (6, 1, False), (1, 1, False)],
            5: [(3, 1, True), (2, 2, False), (2, 2, False), (5, 1, False)],
        },
    ),
    "a short request behind one that does not fit": (
        dict(slots=8, max_running=6, token_budget=6, chunk_size=6),
        {0: [(5, 1, False), (3, 1, False), (1, 1, False)], 2: [(6, 1, False), (2, 1, False), (1, 2, False)]},
    ),
    "more candidates than slots": (
        dict(slots=3, max_running=3, token_budget=64, chunk_size=8, retract_after=None),
        {0: [(2, 3, False)] * 5 + [(1, 1, True)], 1: [(3, 2, False)] * 2},
    ),
}


def _run(settings: dict, submissions: dict, plan: bool) -> list:
    sched = build(LAYER, **settings)
    if not plan:
        sched.batches.take_fresh_slots = lambda budget: None  # the loop takes every slot itself
    sid = sched.open_session()
    seen, rids = [], []
    for step in range(200):
        for length, new, turn in submissions.get(step, ()):
            prompt = [(step + 7 * len(rids) + i) % 50 + 1 for i in range(length)]
            rids.append(sched.submit(prompt, new, session=sid if turn else None))
        if step == 1 and len(rids) > 3:
            sched.abort(rids[-1])  # a waiting request leaves
        if sched.idle and step > max(submissions):
            break
        report = sched.step()
        slots = {r.rid: r.slot for r in sched.requests.values()}
        ended = tuple((r.rid, r.output, r.reason) for r in report.finished)
        seen.append((step, report.kind, report.size, report.tokens, report.rolled_back, slots, ended))
    sched.close_session(sid)
    results = sched.run()
    seen.append(("end", sorted((r.rid, r.output, r.reason) for r in results.values())))
    return seen


def problems() -> list[str]:
    out = []
    for name, (settings, submissions) in WORKLOADS.items():
        planned, loop = _run(settings, submissions, True), _run(settings, submissions, False)
        for a, b in zip(planned, loop):
            if a != b:
                out.append(f"{name}: with the plan {a}; the loop alone {b}")
                break
        else:
            if len(planned) != len(loop):
                out.append(f"{name}: {len(planned)} steps with the plan, {len(loop)} without")
    return out
