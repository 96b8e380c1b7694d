"""The scheduler's whole-run contract, on the tiny engine, against what its steps reported:

- `counters` agree with the steps made (`steps` launched, `finished`/`aborts` the results of
  that reason); a leave of the running batch bumps a request's `generation` by one; `run()`
  returns every result, and past `max_steps` raises `NotIdle` naming the sessions that park
  slots while requests wait, losing no result; the session reaper then lets the run end;
- parallel sampling: `submit_n` gives consecutive ids and reserves one more only for a group
  (n > 1) with the prefix cache on; each sibling's tokens are those of a plain request with
  `sibling_seed(seed, i)`; the prompt is prefilled once (a lone sample has no prompt
  request); results and counters name the siblings only;
- a forward pass that fails after writing ends its requests (`StepFailed` naming them, the
  group's prompt request too), counted as failures; one failing before writing leaves them;
- `session_state` refuses a session with no state, a busy one, a stale one and a closed one;
  `build()`, `SchedulerConfig`, `submit` and the pool refuse bad arguments, naming them.
"""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import torch

from slotwarden.kernels.layer import TinyMambaConfig
from slotwarden.model.errors import BadInput, BadSlotId
from slotwarden.model.vocabulary import Actor
from slotwarden.runtime.pool import StatePool
from slotwarden.kernels.sample import sibling_seed
from slotwarden.runtime.scheduler.build import BadBuild, build
from slotwarden.runtime.scheduler.shapes import PoolMismatch, pool_config
from slotwarden.runtime.scheduler.config import SchedulerConfig
from slotwarden.runtime.scheduler.errors import (
    BadConfig,
    BadRequest,
    NoSessionState,
    NotIdle,
    SessionBusy,
    SessionClosed,
    StepFailed,
)

LAYER = TinyMambaConfig(layers=1)
R9 = Actor.request(9)
PROMPT = [3, 1, 4, 1, 5]


def problems() -> list[str]:
    return _counters() + _generations() + _not_idle() + _sampling() + _failed_steps() + _session_state() + _refusals()


def _sched(**settings):
    return build(LAYER, slots=settings.pop("slots", 4), **settings)


def _drive(sched, limit: int = 200) -> list:
    reports = []
    for _ in range(limit):
        if sched.idle:
            break
        reports.append(sched.step())
    return reports


def _counters() -> list[str]:
    out = []
    sched = _sched(max_running=2)
    rids = [sched.submit([i + 1] * (i + 2), max_new_tokens=3) for i in range(4)]
    sched.step()
    sched.abort(rids[3])
    reports = _drive(sched)
    results = [r for rep in reports for r in rep.finished] + list(sched.collect())
    c = sched.counters
    launched = sum(rep.step is not None for rep in reports) + 1  # the first step, above
    length = sum(r.reason == "length" for r in results)
    if (c.steps, c.finished, c.aborts) != (launched, length, 1) or length != 3:
        out.append(f"counters {c} after {launched} launched steps, {length} results 'length', 1 abort")
    sched.config = dataclasses.replace(sched.config, max_running=1)  # the batch builder follows
    for rid in [sched.submit([7, 7], max_new_tokens=2) for _ in range(3)]:
        pass
    sizes = [rep.size for rep in _drive(sched)]
    if max(sizes) != 1:
        out.append(f"max_running=1 set on a built scheduler, yet a step ran {max(sizes)} requests")
    sched.model = sched.model
    return out


def _generations() -> list[str]:
    sched = _sched(slots=2, max_running=3)  # more running than slots: retractions
    reqs = []
    for i in range(6):
        rid = sched.submit([1 + (i * 5 + j) % 8 for j in range(1 + i % 4)], max_new_tokens=4 + (i * 7) % 9)
        reqs.append(sched.requests[rid])
        sched.step()
    sched.run()
    c, got = sched.counters, [r.generation for r in reqs]
    if c.retractions == 0 or sum(got) != c.finished + c.retractions:
        return [f"generations {got} after {c.finished} finishes and {c.retractions} retractions (one bump a leave)"]
    return []


def _not_idle() -> list[str]:
    out = []
    sched = _sched(slots=1, max_running=1)
    sid = sched.open_session()
    sched.submit([1, 2], max_new_tokens=2, session=sid)
    first = sched.run()
    waiting = sched.submit([5, 6], max_new_tokens=2)
    try:
        sched.run(max_steps=20)
        out.append("run() with a request waiting behind a parked session returned")
    except NotIdle as e:
        if f"requests [{waiting}] wait while sessions [{sid}] park slots" not in str(e):
            out.append(f"NotIdle names the wrong parties: {str(e)[:160]}")
    sched.config = dataclasses.replace(sched.config, session_timeout=2)
    results = sched.run()
    if waiting not in results or results[waiting].reason != "length" or len(first) != 1 or sid in sched.sessions:
        out.append(f"after the reaper: results {results}, sessions {list(sched.sessions)}")
    busy = _sched(max_running=2)
    quick = busy.submit([1, 2, 3], max_new_tokens=1)
    busy.submit([1, 2, 3], max_new_tokens=12)
    try:
        busy.run(max_steps=3)
        out.append("run(max_steps=3) of a 12-token request returned")
    except NotIdle:
        pass
    if quick not in busy.run():
        out.append("run() past max_steps lost a result")
    return out


def _outputs(reports, sched) -> dict:
    return {r.rid: r for rep in reports for r in rep.finished} | {r.rid: r for r in sched.collect()}


def _sampling() -> list[str]:
    out = []
    for n, cache in ((3, True), (1, True), (3, False)):
        sched = _sched(max_running=4, slots=6, prefix_cache=cache)
        first = sched.submitted
        ids = sched.submit_n(PROMPT, max_new_tokens=3, n=n, temperature=1.0, seed=11)
        reserved = first + n + (n > 1)
        reports = _drive(sched)
        results = _outputs(reports, sched)
        prefills = sum(rep.size for rep in reports if rep.kind == "prefill")
        want = n + 1 if (cache and n > 1) else n  # the prompt request, then each sibling's last token
        where = f"submit_n(n={n}, prefix cache {'on' if cache else 'off'})"
        if ids != tuple(range(first, first + n)) or sched.submitted != reserved:
            out.append(f"{where}: ids {ids}, next id {sched.submitted}; want {first}.. and next {reserved}")
        if prefills != want:
            out.append(f"{where}: {prefills} requests prefilled, want {want} (the prompt once)")
        if sorted(results) != list(ids) or sched.counters.finished != n:
            out.append(f"{where}: results for {sorted(results)}, {sched.counters.finished} counted finished")
        for i, rid in enumerate(ids):
            alone = _sched()
            rid2 = alone.submit(PROMPT, max_new_tokens=3, temperature=1.0, seed=sibling_seed(11, i))
            if rid in results and alone.run()[rid2].output != results[rid].output:
                out.append(f"{where}: sibling {i}'s tokens are not those of seed sibling_seed(11, {i})")
                break
    return out


def _failed_steps() -> list[str]:
    out = []
    sched = _sched(max_running=4, slots=6, prefix_cache=True)
    plain = sched.submit([2, 2, 2], max_new_tokens=3)
    group = sched.submit_n(PROMPT, max_new_tokens=2, n=2)
    lead = group[-1] + 1
    run = sched.forward.run

    def written_then_raise(batch):
        run(batch)
        raise ValueError("the device fell over")

    sched.forward.run = written_then_raise
    try:
        sched.step()
        out.append("a forward pass that raised after writing: step() returned")
    except StepFailed as e:
        if f"ended requests [{plain}" not in str(e) or f"the prompt request {lead}" not in str(e):
            out.append(f"StepFailed does not name the requests it ended: {str(e)[:200]}")
    sched.forward.run = run
    results = sched.run()
    failed = [r for r in results.values() if r.reason.startswith("step ")]
    if not failed or sched.counters.failures != len(failed) or sorted(results) != sorted([plain, *group]):
        out.append(f"after a failed step: results {sorted(results)}, failures counted {sched.counters.failures}")
    sched.check_audit()

    early = _sched()
    rid = early.submit([1, 2], max_new_tokens=2)

    def raise_unwritten(batch):
        raise KeyError("before the model ran")

    early._forward = raise_unwritten
    try:
        early.step()
    except KeyError:
        pass
    del early._forward
    if early.run().get(rid) is None or early.run().get(rid) is not None and early.counters.failures:
        out.append("a forward pass that raised before writing ended its request")
    return out


def _session_state() -> list[str]:
    out = []
    sched = _sched(max_running=2)
    sid = sched.open_session()
    cases = [(NoSessionState, "no state yet")]
    got = [_raised(lambda: sched.session_state(sid))]
    turn = sched.submit([4, 4, 4], max_new_tokens=4, session=sid)
    output = sched.run()[turn].output
    state = sched.session_state(sid)
    sched.submit([5], max_new_tokens=4, session=sid)
    sched.step()
    cases.append((SessionBusy, "lent to its turn"))
    got.append(_raised(lambda: sched.session_state(sid)))
    sched.abort(sched.submitted - 1)  # the running turn ends mid-way: the session's state is stale
    sched.run()
    cases.append((NoSessionState, "stale"))
    got.append(_raised(lambda: sched.session_state(sid)))
    sched.close_session(sid)
    cases.append((SessionClosed, "closed"))
    got.append(_raised(lambda: sched.session_state(sid)))
    for (kind, words), err in zip(cases, got):
        if not isinstance(err, kind) or words not in str(err):
            out.append(f"session_state: {type(err).__name__} {err}; want {kind.__name__} saying {words!r}")
    if state.tokens != (4, 4, 4) + output[:-1]:  # the last token is fed by the next turn
        out.append(f"the state between turns holds {state.tokens}, not the prompt and output {output} but the last")
    return out


def _refusals() -> list[str]:
    out = []
    cases = [
        (lambda: SchedulerConfig(max_running=0), BadConfig, "bad SchedulerConfig.max_running 0"),
        (lambda: SchedulerConfig(overlap=1), BadConfig, "bad SchedulerConfig.overlap 1"),
        (lambda: build(model="tiny"), BadBuild, "bad build(model='tiny')"),
        (lambda: build(LAYER, config={}), BadBuild, "bad build(config={})"),
        (lambda: build(LAYER, trace=5), BadBuild, "bad build(trace=5)"),
        (lambda: build(LAYER, cls=dict), BadBuild, "the Scheduler class"),
        (lambda: build(LAYER, device="meta"), BadBuild, "the meta device has none"),
        (lambda: build(LAYER, device="no-such-device"), BadBuild, "a device torch knows"),
        (lambda: build(LAYER, device=3.5), BadBuild, "a device name"),
    ]
    sched = _sched()
    pool = sched.pool
    cases += [
        (lambda: sched.submit(torch.tensor([1.0]), 2), BadRequest, "prompt tokens must be integers, not torch.float32"),
        (lambda: sched.submit(torch.zeros(2, dtype=torch.int64, device="meta"), 2), BadRequest, "meta device"),
        (lambda: sched.submit(np.array([1.5]), 2), BadRequest, "prompt tokens must be integers, not float64"),
        (lambda: sched.submit_n([1, 2], 2, n=0), BadRequest, "n must be an int in 1..256, not 0"),
        (lambda: sched.submit([1], 2, temperature=10**400), BadRequest, "temperature must be a finite number >= 0"),
        (lambda: sched.submit([1], 2, temperature=1e-40), BadRequest, "is too small to divide by"),
        (lambda: sched.submit([1], 2, seed="x"), BadRequest, "seed must be an int or None, not 'x'"),
        (lambda: StatePool("config"), BadInput, "bad config 'config': a PoolConfig"),
        (lambda: pool.history(1, limit=-1), BadInput, "a limit is an int >= 0"),
        (lambda: (pool.alloc(1, R9), pool.copy([1], [1, 2], R9)), BadSlotId, "copy of 1 slots into 2"),
    ]
    fits = pool_config(LAYER, 2)
    cases += [
        (lambda: build(LAYER, pool="p"), BadBuild, "bad build(pool='p'): a PoolConfig or None"),
        (lambda: build(LAYER, slots=2, pool=fits), ValueError, "give slots (2) or a pool config (2 slots), not both"),
        (lambda: build(LAYER, pool=fits, device="meta"), PoolMismatch, "device: the pool has 'cpu'"),
        (lambda: build(LAYER, pool=dataclasses.replace(fits, layers=3)), PoolMismatch, "layers: the pool has 3"),
        (lambda: build(LAYER, device="mps"), BadBuild, "mps is not available"),
        (lambda: build(LAYER, pool=dataclasses.replace(fits, device="meta")), BadBuild, "the meta device has none"),
    ]
    for thunk, kind, words in cases:
        err = _raised(thunk)
        if type(err) is not kind or words not in str(err):
            out.append(f"{type(err).__name__}: {str(err)[:120]}; want {kind.__name__} saying {words!r}")
            continue
        back = pickle.loads(pickle.dumps(err))
        if type(back) is not kind or str(back) != str(err):
            out.append(f"{kind.__name__} after pickling: {type(back).__name__} {back}")
    return out


def _raised(thunk):
    try:
        thunk()
    except Exception as e:  # noqa: BLE001 (the error is what is judged)
        return e
    return None
