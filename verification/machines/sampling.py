"""Parallel sampling as the cached scheduler machines see it, from their own record of each group.

- seeds: sibling i of a group submitted with `seed` samples with `sibling_seed(seed, i)`, and
  the siblings' seeds are pairwise distinct;
- publication: while the group's prompt request is live, or its donated state not yet published,
  no sibling holds a slot, runs, or is prefilled;
- once: a sibling's first prefill (before any retraction) starts after the prompt (it copied the
  prompt state) whenever that state is published in the tree with room for one more reader.
The prefills are watched at the model (`watch`): a sibling fed from the start while its prompt
state was there for it to copy prefills the prompt a second time.
"""

from __future__ import annotations

from typing import NamedTuple

from slotwarden.kernels.sample import sibling_seed
from slotwarden.runtime.radix.errors import UnknownNode
from slotwarden.runtime.scheduler.request import Phase


class Group(NamedTuple):
    siblings: tuple  # the sibling requests, in order
    lead: object  # the group's prompt request (None: the cache off, or a one-token prompt)
    seed: int
    prompt: tuple


def group_of(sched, rids, seed: int, prompt) -> Group:
    """The group `submit_n` just made (`rids`, from `seed`), read once from the scheduler's tables."""
    siblings = tuple(sched.requests[rid] for rid in rids)
    lead = sched.requests.get(rids[-1] + 1) if len(rids) > 1 else None
    return Group(siblings, lead if lead is not None and lead.shared else None, seed, tuple(prompt))


def published(group: Group, sched) -> bool:
    """Whether the siblings may go on: the prompt request ended and what it donated is published."""
    lead = group.lead
    return lead is None or lead.done and (lead.donated is None or lead.donated not in sched.prefix.unpublished)


def problems(group: Group, sched) -> list:
    """What breaks the seeds or the wait for publication in `group` now."""
    out = []
    seeds = [s.seed for s in group.siblings]
    want = [sibling_seed(group.seed, i) for i in range(len(group.siblings))]
    if seeds != want or len(set(seeds)) != len(seeds):
        out.append(f"siblings {[s.rid for s in group.siblings]} sample with seeds {seeds}, not {want}")
    if not published(group, sched):
        for s in group.siblings:
            if s.done and s.finish_reason != "length":
                continue  # aborted while it waited (the prefills are watched for one that ran)
            if s.phase is not Phase.WAITING or s.slot is not None or s.cached is not None or s.output:
                out.append(
                    f"sibling {s.rid} is {s.phase.name} (slot {s.slot}) before its prompt request "
                    f"{group.lead.rid}'s state is published"
                )
    return out


class Watched:
    """The layer, with every prefill chunk checked against the groups (`machine.sampled`); what
    breaks the rules goes to `machine.prefill_problems` (raising here would fail the step)."""

    def __init__(self, model, machine):
        self._model, self._machine = model, machine

    def __getattr__(self, name):
        return getattr(self._model, name)

    def prefill(self, chunks, slots, *state):
        self._check(chunks, slots)
        return self._model.prefill(chunks, slots, *state)

    def prefill_logits(self, chunks, slots, *state):
        self._check(chunks, slots)
        return self._model.prefill_logits(chunks, slots, *state)

    def _check(self, chunks, slots) -> None:
        machine = self._machine
        sched = machine.sched
        by_slot = {r.slot: r for r in sched.running}
        for chunk, slot in zip(chunks, slots.tolist()):
            req = by_slot.get(slot)
            for group in machine.sampled:
                if req is not None and any(req is s for s in group.siblings):
                    machine.prefill_problems += prefill_problems(group, req, len(chunk), sched)


def prefill_problems(group: Group, req, n: int, sched) -> list:
    """A sibling fed `n` tokens from `req.fed`: not before publication, nor the prompt again."""
    if not published(group, sched):
        return [f"sibling {req.rid} is prefilled before its prompt request {group.lead.rid}'s state is published"]
    lead, tree = group.lead, sched.prefix.tree if sched.prefix is not None else None
    if lead is None or lead.donated is None or req.generation or req.fed or len(group.prompt) < 2:
        return []
    try:
        node = tree.info(lead.donated)
    except UnknownNode:  # evicted before the sibling came: it prefills the prompt (no room to keep it)
        return []
    room = tree.max_readers is None or node.locks < tree.max_readers
    if node.published and room:
        return [
            f"sibling {req.rid} prefills its prompt from the start ({n} tokens), though its group's prompt "
            f"state (node {node.id}) is published for it to copy"
        ]
    return []


def watch(machine) -> None:
    """Check every prefill of `machine.sched` against its groups (`machine.sampled`)."""
    machine.sampled, machine.prefill_problems = [], []
    machine.sched.model = Watched(machine.sched.model, machine)
