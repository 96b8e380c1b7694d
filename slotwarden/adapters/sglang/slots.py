"""`GuardedSlots`: SGLang's `MambaSlotAllocator` with the ownership ledger in front.

It has the allocator's API (`alloc`, `free`, `clear`, the alloc groups, `free_slots`, the
sizes); every move goes through a `GuardedAllocator` (runtime/guarded_allocator.py), attributed
as `who.WHO` says. A refused move raises the model's typed error at SGLang's call, with the
call site and the slot's last moves added as notes, and changes nothing.

Beyond the allocator's calls it keeps what the tree and the sessions need: the tree locks it
has seen (a lock of a slot whose insert is not fenced yet waits for the fence that publishes
it), the records an aborted turn's session gave up, and the steps in flight.
`clear()` is SGLang's flush: legal when no request uses a slot; the tree's slots are evicted,
the sessions' records closed and every slot fenced free before the engine's list is reset.
"""

from __future__ import annotations

import numpy as np

from slotwarden.model.errors import LifecycleError
from slotwarden.model.free import free_rule
from slotwarden.model.vocabulary import NOBODY, Actor, ActorKind, Event, Group, Relation, State
from slotwarden.runtime.guarded_allocator import ANONYMOUS, GuardedAllocator, HeldSlots, acting

from slotwarden.adapters.sglang import records
from slotwarden.adapters.sglang import who as W

_CACHE, _REQUEST = int(ActorKind.CACHE), int(ActorKind.REQUEST)
_CACHED, _CACHING = int(State.CACHED), int(State.CACHING)


class LockedEviction(LifecycleError):
    """The tree frees a slot that a tree lock still holds (its insert not yet fenced)."""


class SiteMismatch(LifecycleError):
    """SGLang's code made a call the adapter's reading of it did not expect (another version)."""


class GuardedSlots:
    """Wraps `raw` (a `MambaSlotAllocator`, every slot free) with the lifecycle's ledger."""

    def __init__(self, raw, *, trace=None, fills: bool = False):
        self.raw = raw
        self.guarded = GuardedAllocator(raw, unattributed="trust", trace=trace, fills=fills)
        self.guard, self.ledger = self.guarded.guard, self.guarded.ledger
        lc = self.ledger.lifecycle
        self._uses = np.array([lc.spec(s).group is Group.BATCH_OWNED for s in State]) | self.ledger.lent
        # the events that can free a slot at once: only they need the engine told (the guard's fire)
        self._freeing = frozenset(r.event for r in lc.rules if lc.spec(r.dest).group is Group.FREE)
        self.locks: dict[int, list] = {}  # id(TreeLock) -> [lock, actor, slot or None, published]
        self.yielded: dict[int, tuple] = {}  # id(ReqKvInfo) -> (record, session actor)
        self.unattributed = 0  # allocs no call site named (owned by ANONYMOUS)
        self.done: dict[int, bool] = {}  # launched step -> whether its results were processed

    def __getattr__(self, name):  # `size`, `device` and the rest of the allocator's API
        if name in ("raw", "guarded", "guard", "ledger"):
            raise AttributeError(name)
        return getattr(self.raw, name)

    # -- SGLang's allocator API -------------------------------------------------------------
    @property
    def free_slots(self):
        return self.raw.free_slots

    def available_size(self) -> int:
        return self.raw.available_size()

    def schedulable_available_size(self) -> int:
        return self.raw.schedulable_available_size()

    def alloc_group_begin(self, num_reqs: int) -> None:
        """SGLang prefetches slots for the round; they stay FREE in the ledger until `alloc`
        hands one out, and the unused ones go back through the engine's own `free`."""
        self.raw.alloc_group_begin(num_reqs)

    def alloc_group_end(self) -> None:
        self.raw.alloc_group_end()

    def alloc(self, need_size: int):
        who = W.WHO.get()
        actor = self._alloc_actor(who, need_size)
        with acting(actor):
            ids = self._noted(lambda: self.guarded.alloc(need_size), who)
        if ids is not None and who.admit and ids.numel():
            self.fire(Event.ADMIT, ids, actor)
        return ids

    def free(self, free_index) -> None:
        if getattr(free_index, "numel", None) is not None and free_index.numel() == 0:
            return
        who = W.WHO.get()
        self._noted(lambda: self._free(free_index, who), who)

    def clear(self) -> None:
        """SGLang's flush (after the tree's reset): see the module docstring."""
        self.fence()
        led = self.ledger
        state = led.cols.state
        used = np.flatnonzero(self._uses[state[1:]]) + 1
        if used.size:
            s = int(used[0])
            raise HeldSlots(
                f"clear while {used.size} slots are used by requests: slot {s} is "
                f"{led.record(s).state.name}\n" + led.recorder.explain(used[:1])
            )
        for lock, actor, slot, published in list(self.locks.values()):
            if published:
                self.fire(Event.UNLOCK, [slot], actor)
        self.locks.clear()
        self._each(Event.EVICT, ActorKind.CACHE)
        self._each(Event.CLOSE, ActorKind.SESSION)
        self.guard.fence()
        left = np.flatnonzero(state[1:] != int(State.FREE)) + 1
        if left.size:
            s = int(left[0])
            raise HeldSlots(f"clear while a step on the device may use slot {s} ({led.record(s).state.name})")
        self.yielded.clear()
        self.raw.clear()

    # -- moves the hooks make ---------------------------------------------------------------
    def fire(self, event: Event, ids, actor: Actor, target: int = NOBODY) -> None:
        """`actor` moves `ids` (a list, an array or an index tensor) by `event`, checked whole."""
        ids = np.asarray(_as_list(ids), dtype=np.int64)
        if event in self._freeing:
            self.guard.fire(event, ids, actor, target)
        else:  # nothing becomes free: the engine's list is not concerned
            self.ledger.apply(event, ids, actor, target)

    def state(self, slot: int) -> State:
        return State(int(self.ledger.cols.state[slot]))

    def check_batch(self, reqs) -> None:
        """Refuse (`IllegalStep`, naming the row, its slot, the slot's holder and the `Req`'s
        actor) a batch whose rows may not write the state slots they index: row i is `reqs[i]`,
        writing `req.kv.mamba_pool_idx` (what the forward gathers by `get_mamba_indices`).
        Requests without a state slot (no `kv` record yet) are not rows. Changes nothing."""
        rows = [
            (int(r.kv.mamba_pool_idx), W.ident(r)) for r in reqs if getattr(r.kv, "mamba_pool_idx", None) is not None
        ]
        if rows:
            ids, actors = zip(*rows)
            self.guarded.check_step(np.array(ids, dtype=np.int64), np.array(actors, dtype=np.int64))

    def filled(self, batch, outside: bool = False) -> None:
        """What SGLang fills before a batch's kernels run (`ModelRunner`, for an extend): the
        slots of `mamba_clear_indices` zeroed, those of `mamba_cow_dst_indices` copied from
        `mamba_cow_src_indices` (`outside`: from int8 checkpoints, another index space). The
        step check then refuses a row whose slot holds only a previous tenant's state."""
        if self.guard.fills is None:  # no first reads judged: nothing to keep
            return
        clear = getattr(batch, "mamba_clear_indices", None)
        if clear is not None and len(clear):
            self.guarded.zeroed(clear)  # a device sync where the indices are on the device
        dst = getattr(batch, "mamba_cow_dst_indices", None)
        if dst is not None and len(dst):
            self.guarded.copied(dst, None if outside else getattr(batch, "mamba_cow_src_indices", None))

    def tracked(self, batch) -> None:
        """A checked batch's step copies each tracking row's state into its track slot
        (`mamba_track_indices`, where `mamba_track_mask` says, -1 for none): they are filled
        as copies of the rows' slots. The track slots are no rows of the write set yet: their
        holders are not checked."""
        tracks = getattr(batch, "mamba_track_indices", None)
        if self.guard.fills is None or tracks is None or not len(tracks):
            return
        mask = getattr(batch, "mamba_track_mask", None)
        at = tracks.tolist()  # a device sync where the indices are on the device
        on = [True] * len(at) if mask is None else mask.tolist()
        pairs = [
            (int(t), int(r.kv.mamba_pool_idx))
            for t, m, r in zip(at, on, batch.reqs)
            if m and 0 < t <= self.ledger.capacity and r.kv.mamba_pool_idx is not None
        ]
        if pairs:
            dst, src = zip(*pairs)
            self.guarded.copied(np.array(dst, dtype=np.int64), np.array(src, dtype=np.int64))

    def copied(self, dst, src=None) -> None:
        """SGLang copied slots `src` into `dst` (None: from outside this pool, a load-back's
        host state): filled as copies (`LedgerGuard.copied`)."""
        self.guarded.copied(dst, src)

    def launch(self) -> int:
        """A step goes to the device: releases from now wait for its results to be processed."""
        box: list[int] = []
        step = self.guard.launch(lambda: self.done.get(box[0], True))
        box.append(step)
        self.done[step] = False
        return step

    def fence(self, step: int | None = None) -> None:
        """Results of `step` (None: every step) are processed: its releases free, its inserts
        published, and the locks waiting for them taken."""
        for s in list(self.done):
            if step is None or s <= step:
                self.done.pop(s)
        self.guard.fence(None)
        self._publish()

    def lock(self, lock, slot: int | None) -> None:
        """A tree lock was taken on a node whose Mamba value is `slot` (None: a tombstone)."""
        actor = Actor.request(W.fresh())
        entry = [lock, actor, slot, False]
        self.locks[id(lock)] = entry
        if slot is not None and self.state(slot) != State.CACHING:
            self.fire(Event.LOCK, [slot], actor)
            entry[3] = True

    def unlock(self, lock) -> None:
        entry = self.locks.pop(id(lock), None)
        if entry is not None and entry[3]:
            self.fire(Event.UNLOCK, [entry[2]], entry[1])

    # -- internals ---------------------------------------------------------------------------
    def _alloc_actor(self, who: W.Who, n) -> Actor:
        if who.mode is W.Mode.ACTOR:
            return who.actor
        if who.mode is W.Mode.QUEUE and who.queue:
            actor, want = who.queue.pop(0)
            if want != n:
                raise SiteMismatch(f"{who.site}: SGLang asked alloc({n}) where the adapter expected alloc({want})")
            return actor
        if who.mode is not W.Mode.PASS:
            self.unattributed += 1
        return Actor.request(ANONYMOUS)

    def _free(self, free_index, who: W.Who) -> None:
        if who.mode is W.Mode.ACTOR:
            with acting(who.actor):
                return self.guarded.free(free_index)
        if who.mode is W.Mode.PASS:
            with acting(None):
                return self.guarded.free(free_index)
        ids = self.ledger.checked_ids(free_index, "free", who.actor)
        if who.mode is W.Mode.TREE:
            return self._evict(free_index, ids)
        if who.mode is W.Mode.SWAP and self.ledger.lent[self.ledger.cols.state[ids]].all():
            return self._swap_out(free_index, ids)
        for actor, group in self._holders(ids):  # checked whole first: all or none
            with acting(actor):
                self.guarded.free(free_index if len(group) == ids.size else _tensor(group, free_index))

    def _holders(self, ids: np.ndarray) -> list:
        """The free's groups by the request that uses each slot (a borrower, or the owning
        request), each checked against the declaration before any is applied."""
        c, led = self.ledger.cols, self.ledger
        state = c.state[ids]
        holder = np.where(led.owner_kinds[state] == _REQUEST, c.owner[ids], NOBODY)
        holder = np.where(led.lent[state], c.borrower[ids], holder)
        known = holder[holder != NOBODY]
        holder = np.where(holder == NOBODY, known[0] if known.size else ANONYMOUS, holder)
        if (holder == holder[0]).all():
            return [(Actor.request(int(holder[0])), ids)]
        groups = [(Actor.request(h), ids[holder == h]) for h in np.unique(holder).tolist()]
        for actor, group in groups:
            for s in group.tolist():
                free_rule(led.record(s), actor, led.lifecycle, s)
        return groups

    def _swap_out(self, free_index, ids: np.ndarray) -> None:
        """A lazy boundary replaced lent track slots of a session's record (SGLang empties the
        entries right after): each goes back to its session by its borrower's declared return,
        and the session releases it (CLOSE: free at the fence of the steps that may use it)."""
        c = self.ledger.cols
        owner, borrower = c.owner[ids], c.borrower[ids]
        if not ((owner == owner[0]).all() and (borrower == borrower[0]).all()):
            raise SiteMismatch(f"a lazy track boundary frees slots {ids.tolist()} of several records at once")
        state = State(int(c.state[ids[0]]))
        self.fire(
            records.into_session(self.ledger.lifecycle, state, Relation.BORROWER), ids, Actor.request(int(borrower[0]))
        )
        with acting(Actor.session(int(owner[0]))):
            self.guarded.free(free_index)

    def _evict(self, free_index, ids: np.ndarray) -> None:
        c, led = self.ledger.cols, self.ledger
        kinds = led.owner_kinds[c.state[ids]]
        bad = np.flatnonzero(kinds != _CACHE)
        if bad.size:
            s = int(ids[bad[0]])
            free_rule(led.record(s), Actor.cache(max(int(c.owner[s]), 0)), led.lifecycle, s)  # raises
        waiting = {e[2] for e in self.locks.values() if not e[3]}
        held = [s for s in ids.tolist() if s in waiting] if waiting else []
        if held:
            raise LockedEviction(
                f"the tree frees slot {held[0]} (node {int(c.owner[held[0]])}), which a tree "
                "lock holds\n" + led.recorder.explain(np.array(held[:1]))
            )
        owners = c.owner[ids]
        if (owners == owners[0]).all():
            self.ledger.apply(Event.EVICT, ids, Actor.cache(int(owners[0])))
        else:
            self.ledger.apply_each(Event.EVICT, ids, owners.copy())
        self.guard.fence()  # released: free at the fence of the steps that may use them

    def _each(self, event: Event, kind: ActorKind) -> None:
        c = self.ledger.cols
        kinds = self.ledger.owner_kinds[c.state]
        ids = np.flatnonzero(kinds[1:] == int(kind)) + 1
        if ids.size:
            self.ledger.apply_each(event, ids, c.owner[ids].copy())

    def _publish(self) -> None:
        for entry in self.locks.values():
            if not entry[3] and entry[2] is not None and self.state(entry[2]) == State.CACHED:
                self.fire(Event.LOCK, [entry[2]], entry[1])
                entry[3] = True

    def _noted(self, call, who: W.Who):
        try:
            return call()
        except LifecycleError as exc:
            exc.add_note(f"at SGLang's {who.site or 'allocator call (attributed to the slot holder)'}")
            slot = getattr(exc, "slot_id", None)
            if isinstance(slot, int) and 1 <= slot <= self.ledger.capacity:
                exc.add_note(self.ledger.recorder.explain(np.array([slot])))
            raise


def _as_list(ids):
    if isinstance(ids, (list, np.ndarray)):
        return ids
    return ids.reshape(-1).tolist()  # a device sync for CUDA ids: once per session or tree move


def _tensor(group: np.ndarray, like):
    import torch

    return torch.from_numpy(group).to(like.device)
