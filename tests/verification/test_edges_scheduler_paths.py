"""verify's edge check "scheduler paths" (verification/edges/scheduler_paths.py) holds on the
runtime as it is and fails on each mutation survivor it was written for: the mutant's edit
applied to the source of its function (`broken`), or to the attribute where it is read."""

from __future__ import annotations

import dataclasses

import pytest
from source_edits import broken

from slotwarden.runtime.config import PoolConfig
from slotwarden.runtime.radix import node
from slotwarden.runtime.radix.cache import CacheStats, PrefixCache
from slotwarden.runtime.radix.tree import RadixTree
from slotwarden.runtime.scheduler import contract, rows
from slotwarden.runtime.scheduler.admission import BatchBuilder
from slotwarden.runtime.scheduler.forward import Forward
from slotwarden.runtime.scheduler.request import Request
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.runtime.scheduler.signals import Deferred
from slotwarden.verification.edges import scheduler_paths
from slotwarden.verification.edges.job import problems_of

VARIANTS = {  # mutant -> (owner, function, old, new, words of a problem)
    "cache.py NumberReplacer:16 (a hit counted twice)": (
        PrefixCache,
        "copy",
        'self.tally["hits"] += 1',
        'self.tally["hits"] += 2',
        "cache stats after",
    ),
    "cache.py Is_IsNot:2 (session turns counted as lookups)": (
        PrefixCache,
        "copy",
        "if req.session is None:",
        "if req.session is not None:",
        "cache stats after",
    ),
    "node.py NumberReplacer:8 (a bad edge named by 5 tokens)": (
        node,
        "check_node",
        "{child.edge[:4]}",
        "{child.edge[: 5]}",
        "a child with a bad edge is named in other words",
    ),
    "tree.py GtE_Is:0 (a lock bound compared by identity)": (
        RadixTree,
        "lock",
        "x.locks >= self.max_readers",
        "x.locks is self.max_readers",
        "readers took lock 301",
    ),
    "tree.py FalseWithTrue:1 (a slotless node left published)": (
        RadixTree,
        "_take_slot",
        "x.slot, x.published = None, False",
        "x.slot, x.published = None, True",
        "left it slot None, published True",
    ),
    "admission.py AddNot:20 (a kept slot zeroed)": (
        BatchBuilder,
        "take_slot",
        "if req.unzeroed:  # a second fault",
        "if not req.unzeroed:  # a second fault",
        "the session's state is not the fault-free one",
    ),
    "admission.py FalseWithTrue:9 (a retracted request left lent)": (
        BatchBuilder,
        "_requeue",
        "Phase.WAITING, None, False, None",
        "Phase.WAITING, None, True, None",
        "lent True: a handle it lost",
    ),
    "admission.py TrueWithFalse:6 (a victim that frees no slot)": (
        BatchBuilder,
        "make_room",
        "needs_slot=True",
        "needs_slot=False",
        "its retraction frees none",
    ),
    "contract.py AddNot:3 (a returned step report read as a dict)": (
        contract,
        "returned",
        "if isinstance(out, dict):",
        "if not isinstance(out, dict):",
        "a SIGINT during step() raised AttributeError",
    ),
    "forward.py TrueWithFalse:2, :1 before the verify branch (a decode step never written)": (
        Forward,
        "run",
        "self.written = True\n",  # the decode branch's (the prefill's has a comment)
        "self.written = False\n",
        "raised ValueError, not StepFailed",
    ),
    "rows.py Mul_BitOr:1 (captured sizes 1, 3, ...)": (
        rows,
        "captured_sizes",
        "sizes.append(sizes[-1] * 2)",
        "sizes.append(sizes[-1] | 2)",
        "captured sizes by max_running",
    ),
    "scheduler.py Delete_Not:10 (a refused finish recorded)": (
        Scheduler,
        "_finish",
        "lambda: not self._holds(req)",
        "lambda:  self._holds(req)",
        "a fault in the pool's finish before it moved",
    ),
    "scheduler.py USub_UAdd:0 (a group's prompt request feeds one token)": (
        Scheduler,
        "submit_n",
        "prompt[:-1]",
        "prompt[:+1]",
        "cache stats after",
    ),
    "signals.py NumberReplacer:6 (the handler never restored)": (
        Deferred,
        "leave",
        "self.depth -= 1",
        "self.depth -= 2",
        "not Python's default",
    ),
    "signals.py TrueWithFalse:1 (a SIGINT noted as none)": (
        Deferred,
        "_note",
        "self.pending = True",
        "self.pending = False",
        "a SIGINT during step() was never raised",
    ),
}


def test_the_check_holds():
    assert problems_of(scheduler_paths) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_check_fails_on_each_survivor(variant, monkeypatch):
    owner, name, old, new, words_ = VARIANTS[variant]
    broken(monkeypatch, owner, name, old, new)
    found = problems_of(scheduler_paths)
    assert any(words_ in p for p in found), found


def test_a_default_of_nine_heads_is_a_problem(monkeypatch):  # config.py NumberReplacer:4
    names = [f.name for f in dataclasses.fields(PoolConfig) if f.default is not dataclasses.MISSING]
    defaults = list(PoolConfig.__init__.__defaults__)
    defaults[names.index("heads")] = 9
    monkeypatch.setattr(PoolConfig.__init__, "__defaults__", tuple(defaults))
    assert any("the default PoolConfig has shapes" in p for p in problems_of(scheduler_paths))


def test_a_hit_rate_that_is_no_property_is_a_problem(monkeypatch):  # cache.py RemoveDecorator:0
    monkeypatch.setattr(CacheStats, "hit_rate", CacheStats.hit_rate.fget)
    assert any("hit_rate is <bound method" in p for p in problems_of(scheduler_paths))


def test_requests_compared_by_field_are_a_problem(monkeypatch):  # request.py FalseWithTrue:0 (eq=True)
    def eq(a, b):
        if type(b) is not type(a):
            return NotImplemented
        return [getattr(a, f.name) for f in dataclasses.fields(a)] == [
            getattr(b, f.name) for f in dataclasses.fields(b)
        ]

    monkeypatch.setattr(Request, "__eq__", eq)
    monkeypatch.setattr(Request, "__hash__", None)
    assert any("two requests made alike compare equal" in p for p in problems_of(scheduler_paths))
