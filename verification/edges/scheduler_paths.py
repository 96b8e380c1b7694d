"""The scheduler's and the prefix cache's side paths, each against what its contract says:
- `PoolConfig`'s default shape is the engines' (8 heads of 64 x 128, conv 256 x 3, bf16/fp32);
- cache stats: every plain request admitted is one lookup (session turns none), each hit one,
  a group's prompt request prefills the prompt but its last token; `hit_rate` is a float;
- the tree refuses a lock past a bound above 256; a node evicted with two children keeps no
  slot and is no longer published or matched; a child's bad edge is named by its first 4 tokens;
- a SIGINT during `step()` is raised at its boundary, the step's results kept, the handler back;
- a decode forward pass that fails after writing ends its requests (`StepFailed`);
- a head of queue short of a slot retracts a request whose retraction frees one (not a turn
  on its session's lent slot); the retracted request waits with no handle (no slot, not lent);
- a fault raised by the pool's admit or finish before it moved leaves the scheduler usable, and
  the run ends with the tokens and session state of a fault-free run;
- decode batches pad to 1, 2, 4, ... then `max_running`; requests compare by identity.
"""

from __future__ import annotations

import signal
import threading

import torch

from slotwarden.kernels.layer import TinyMambaConfig
from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.radix.errors import LockRefused, TreeBroken
from slotwarden.runtime.radix.tree import RadixTree
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.errors import StepFailed
from slotwarden.runtime.scheduler.request import Request
from slotwarden.runtime.scheduler.rows import captured_sizes

LAYER = TinyMambaConfig(layers=1)
PROMPT = (3, 1, 4, 1, 5)
BOUND = 300  # a lock bound past CPython's cached ints
CAPTURED = ((3, (1, 2, 3)), (4, (1, 2, 4)), (5, (1, 2, 4, 5)), (6, (1, 2, 4, 6)))
TURNS = (((1, 2), 2), ((3,), 2))  # a session's two turns: prompt, budget
PLAIN = ((4, 5, 6), 2)


def problems() -> list[str]:
    return (
        _defaults()
        + _cache_counts()
        + _tree_bound()
        + _evicted_inner()
        + _edge_words()
        + _sigint()
        + _decode_failure()
        + _victim()
        + _pool_faults()
        + _captured()
        + _identity()
    )


def _sched(**settings):
    return build(LAYER, slots=settings.pop("slots", 4), **settings)


def _defaults() -> list[str]:
    c = PoolConfig(num_slots=2, layers=3)
    got = (c.ssm_shape(), c.conv_shapes(), c.conv_dtype, c.ssm_dtype)
    want = ((3, 3, 8, 64, 128), [(3, 3, 256, 3)], torch.bfloat16, torch.float32)
    if got != want:
        return [f"the default PoolConfig has shapes and dtypes {got}, not the engines' {want}"]
    return []


def _cache_counts() -> list[str]:
    out = []
    sched = _sched(slots=6, max_running=4, prefix_cache=True)
    sid = sched.open_session()
    sched.submit([2, 2], max_new_tokens=2, session=sid)  # a session turn looks nothing up
    sched.submit_n(list(PROMPT), max_new_tokens=3, n=3)
    sched.run()
    s = sched.prefix.stats()
    cut = len(PROMPT) - 1  # the prompt request feeds all but the last token; each sibling copies that
    got = (s.lookups, s.hits, s.tokens_saved, s.prompt_tokens)
    want = (4, 3, 3 * cut, cut)
    if got != want:
        out.append(
            f"cache stats after a session turn and 3 samples of a {len(PROMPT)}-token prompt: lookups, hits, "
            f"tokens saved, prompt tokens {got}, want {want}"
        )
    rate = s.hit_rate
    if not isinstance(rate, float) or rate != s.hits / s.lookups:
        out.append(f"CacheStats.hit_rate is {rate!r}, not the float hits / lookups")
    return out


def _tree_bound() -> list[str]:
    tree = RadixTree(max_readers=BOUND)
    node = tree.insert((1, 2), 1).node
    tree.publish(node)
    for rid in range(BOUND):
        tree.lock(node, rid)
    try:
        tree.lock(node, BOUND)
    except LockRefused as e:
        if f"at the bound of {BOUND} locks" not in str(e):
            return [f"the lock past the bound {BOUND} is refused in other words: {e}"]
        return []
    return [f"a tree bound to {BOUND} readers took lock {BOUND + 1} ({tree.info(node).locks} held)"]


def _evicted_inner() -> list[str]:
    out = []
    for how in ("evict", "drop_unpublished"):
        tree = RadixTree()
        inner = tree.insert((1, 2), 1).node
        for i, tokens in enumerate(((1, 2, 3), (1, 2, 4))):
            tree.publish(tree.insert(tokens, 2 + i).node)
        if how == "evict":
            tree.publish(inner)
            tree.evict(inner)
        else:
            tree.drop_unpublished(inner)
        info = tree.info(inner)
        if info.slot is not None or info.published:
            out.append(f"{how} of a node with two children left it slot {info.slot}, published {info.published}")
        try:
            tree.check()
        except TreeBroken as e:
            out.append(f"after {how} of a node with two children, check() raised: {e}")
        if tree.match((1, 2)).node is not None:
            out.append(f"after {how} of a node with two children, its prefix still matches")
    return out


def _edge_words() -> list[str]:
    tree = RadixTree()
    child = tree.insert((1, 2, 3, 4, 5, 6), 1).node
    tree._nodes[child].edge = (9, 2, 3, 4, 5, 6)  # the child's edge no longer starts with its token
    try:
        tree.check()
    except TreeBroken as e:
        if f"child {child} under token 1 has edge (9, 2, 3, 4) and parent 0" not in str(e):
            return [f"a child with a bad edge is named in other words: {e}"]
        return []
    return ["check() passed a child whose edge does not start with its token"]


def _sigint() -> list[str]:
    """A SIGINT raised during `step()`, with Python's default handler in place (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _interrupted_step()
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted_step() -> list[str]:
    out = []
    sched = _sched()
    rid = sched.submit([1, 2], max_new_tokens=1)
    run = sched.forward.run

    def interrupted(batch):
        got = run(batch)
        signal.raise_signal(signal.SIGINT)
        return got

    sched.forward.run = interrupted
    try:
        sched.step()
        out.append("a SIGINT during step() was never raised")
    except KeyboardInterrupt as e:
        if not getattr(e, "at_boundary", False):
            out.append(f"a SIGINT during step() was raised inside it, not at its boundary: {e!r}")
    except Exception as e:  # noqa: BLE001 (what the interrupted call raised is what is judged)
        out.append(f"a SIGINT during step() raised {type(e).__name__}: {e}")
    finally:
        del sched.forward.run
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        out.append(f"after step(), the SIGINT handler is {signal.getsignal(signal.SIGINT)}, not Python's default")
    kept = [r.rid for r in sched.collect()]
    if kept != [rid]:
        out.append(f"the results of the interrupted step kept in the outbox are {kept}, not [{rid}]")
    if sched.broken is not None:
        out.append(f"a SIGINT at the boundary broke the scheduler: {sched.broken}")
    return out


def _decode_failure() -> list[str]:
    sched = _sched()
    rid = sched.submit([1, 2, 3], max_new_tokens=4)
    sched.step()  # the prefill: its last token makes the first output
    run = sched.forward.run

    def written_then_raise(batch):
        run(batch)
        raise ValueError("the device fell over")

    sched.forward.run = written_then_raise
    try:
        report = sched.step()
        return [f"a decode forward pass that raised after writing: step() returned a {report.kind} step"]
    except StepFailed as e:
        if f"ended requests [{rid}]" not in str(e):
            return [f"StepFailed of a decode step does not name request {rid}: {str(e)[:160]}"]
    except Exception as e:  # noqa: BLE001 (what the failed step raised is what is judged)
        return [f"a decode forward pass that raised after writing raised {type(e).__name__}, not StepFailed"]
    finally:
        del sched.forward.run
    reasons = [r.reason for r in sched.collect() if r.rid == rid]
    if len(reasons) != 1 or not reasons[0].startswith("step "):
        return [f"the request of a failed decode step ended with {reasons}, not one 'step N failed'"]
    return []


def _victim() -> list[str]:
    out = []
    sched = _sched(slots=2, max_running=4, retract_after=1)
    sid = sched.open_session()
    sched.submit([1, 2], max_new_tokens=1, session=sid)
    sched.run()  # the session parks its slot
    turn = sched.submit([3], max_new_tokens=20, session=sid)  # on the lent slot, the most tokens left
    plain = sched.submit([4, 5], max_new_tokens=8)  # on the other slot
    sched.step()  # both prefill and make a token
    late = sched.submit([6, 7], max_new_tokens=2)  # no free slot for it
    report = sched.step()
    if report.retracted != (plain,):
        out.append(
            f"request {late}, short of a slot, retracted {list(report.retracted)}, not request {plain} "
            f"(turn {turn} runs on its session's lent slot: its retraction frees none)"
        )
    req = sched.requests.get(plain)
    if req is not None and (req.slot is not None or req.lent):
        out.append(f"the retracted request {plain} waits with slot {req.slot}, lent {req.lent}: a handle it lost")
    results = sched.run()
    if sorted(results) != sorted([turn, plain, late]) or any(r.reason != "length" for r in results.values()):
        out.append(f"after the retraction, results {results}")
    return out


def _arm(pool, name: str) -> None:
    """Pool call `name` raises once, before it moves anything."""

    def once(*args, **kwargs):
        del vars(pool)[name]
        raise RuntimeError(f"a fault in the pool's {name}")

    setattr(pool, name, once)


def _faulted_step(sched) -> str:
    """Step until a step raises (a fault armed); what it raised, in words ('' for a RuntimeError)."""
    for _ in range(20):
        try:
            sched.step()
        except RuntimeError as e:
            return "" if type(e) is RuntimeError else f"{type(e).__name__}: {str(e)[:160]}"
    return "no step raised the armed fault"


def _workload(faults: bool) -> tuple:
    """A session's two turns, then a plain request; with `faults`, the pool's admit of the second
    turn and its finish of the plain request each raise once. Outputs, session state, problems."""
    sched, problems = _sched(slots=2), []
    sid = sched.open_session()
    first = sched.submit(list(TURNS[0][0]), TURNS[0][1], session=sid)
    outputs = [sched.run()[first].output]
    for (tokens, budget), call in ((TURNS[1], "admit"), (PLAIN, "finish")):
        if faults:
            _arm(sched.pool, call)
        rid = sched.submit(list(tokens), budget, session=sid if call == "admit" else None)
        if faults:
            what = _faulted_step(sched)
            if what or sched.broken is not None:
                problems.append(f"a fault in the pool's {call} before it moved: {what or sched.broken}")
                return outputs, None, problems
        outputs.append(sched.run()[rid].output)
        if call == "admit":
            state = sched.session_state(sid)
    return outputs, state, problems


def _pool_faults() -> list[str]:
    want, clean, _ = _workload(faults=False)
    got, state, out = _workload(faults=True)
    if out:
        return out
    if got != want:
        out.append(f"after faults in the pool's admit and finish, outputs {got}, fault-free {want}")
    if not (torch.equal(state.conv, clean.conv) and torch.equal(state.ssm, clean.ssm)):
        out.append("after a fault in the pool's admit of a session turn, the session's state is not the fault-free one")
    return out


def _captured() -> list[str]:
    got = [(m, captured_sizes(m)) for m, _ in CAPTURED]
    if tuple(got) != CAPTURED:
        return [f"captured sizes by max_running {got}, want {list(CAPTURED)}"]
    return []


def _identity() -> list[str]:
    a, b = Request(0, [1], 1), Request(0, [1], 1)
    try:
        distinct = a != b and len({a, b}) == 2
    except TypeError as e:
        return [f"a Request is not hashable: {e}"]
    if not distinct:
        return ["two requests made alike compare equal: requests are compared by identity"]
    return []
