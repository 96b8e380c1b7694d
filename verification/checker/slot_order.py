"""The slots' canonical order: the renaming of slot ids that the symmetric key applies before
it sorts the actors' blocks (`SlotOrder`, a part of `symmetry.Codec`, reading its fields).

Slot ids are names: every slot id in a world is renamed together (the pool's records and free
list, handles, a copy's source, the slots of a step in flight, the lock record, the cache node a
slot names). Alloc takes the head of the free list, which the renaming carries along; only a
fence reads a slot id's number, appending the slots it frees in id order, and those are free
slots that nothing else names, whose orders are themselves renamings of each other. So the
quotient is exact for every property that reads no slot number, whatever order is chosen; this
one makes renamed worlds meet.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import NOBODY
from slotwarden.verification.checker.packing import NOONE, OutOfRange
from slotwarden.verification.abstract.world import World

TIED = "tied"  # the renaming memo's mark: the slots' order reads who holds them (not memoised)


class SlotOrder:
    """The canonical slot renaming of `symmetry.Codec` (which sets `slots`, `req_index`,
    `ses_index`, `req_class` and `req_turns`, and `_renamings`, the memo of the renamings that
    read no holder)."""

    def slot_renaming(self, world: World) -> tuple:
        """The renaming of slot ids (old id -> new id, index 0 unused) that puts the slots in
        a canonical order: sorted by what each slot is (state, fence, readers, the steps in
        flight using it) and by who holds it, described without ids (an actor's kind, class
        and position, its phase or status, and whether its handle names the slot); the free
        slots last among equals, in free-list order; remaining ties by id. Any order gives an
        exact renaming (the key stays sound); this one makes renamed worlds meet."""
        slots = world.pool.slots
        n = self.slots
        if len(slots) != n:
            raise OutOfRange(world.pool)
        # what the order reads unless holders are tied: the slots, the free list, the steps' slots
        memo = (slots, world.pool.free, tuple([st.slots for st in world.steps]))
        known = self._renamings.get(memo)
        if known is not None and known is not TIED:
            return known
        used = [0] * (n + 1)
        for b, st in enumerate(world.steps):
            for i in st.slots:
                if type(i) is int and 0 < i <= n:
                    used[i] |= 1 << b
        place = {i: p for p, i in enumerate(world.pool.free)}
        # a slot's description starts with what it is; who holds it is described only when two
        # slots are alike and one of them is held (else nobody's description is the same order)
        held: dict = {}  # what a slot is -> whether a slot so described is held
        tied = known is TIED
        for k, s in enumerate(slots if not tied else ()):
            what = (s.state, s.fence, s.readers, used[k + 1])
            mine = s.owner != NOBODY or s.borrower != NOBODY
            if what in held:
                if mine or held[what]:
                    tied = True
                    break
                continue
            held[what] = mine
        if not tied:
            sig = [
                (int(s.state), s.fence, s.readers, used[k + 1], place.get(k + 1, -1), k) for k, s in enumerate(slots)
            ]
        else:
            self._renamings[memo] = TIED
            found: dict = {}  # session index -> its description (`_session_part`)
            describe = self._holder
            sig = []
            for k, s in enumerate(slots):
                owner = NOONE if s.owner == NOBODY else describe(world, s.owner, k + 1, found)
                borrower = NOONE if s.borrower == NOBODY else describe(world, s.borrower, k + 1, found)
                sig.append((int(s.state), s.fence, s.readers, used[k + 1], owner, borrower, place.get(k + 1, -1), k))
        sig.sort()
        new = [0] * (n + 1)
        for at, t in enumerate(sig):
            new[t[-1] + 1] = at + 1
        new = tuple(new)
        if not tied:
            self._renamings[memo] = new
        return new

    def _holder(self, world: World, actor: int, slot: int, found: dict) -> tuple:
        """Who holds a slot, with no id: (0,) not a request or a session (the cache); a
        request's class, phase and flags, whether its handle and source name the slot, and (a
        turn) its session as `_session_part` says; a session as `_session_part` says, and
        whether its handle names the slot."""
        r = self.req_index.get(actor)
        if r is not None:
            rec = world.requests[r]
            sid = rec.session
            unit = (
                ()
                if sid is None or sid not in self.ses_index
                else self._session_part(world, self.ses_index[sid], found)
            )
            src = 0 if rec.src is None else 1 + (rec.src == slot)
            return (1, self.req_class[r], rec.phase, rec.lent, rec.ran, rec.handle == slot, src, unit)
        j = self.ses_index.get(actor)
        if j is None:
            return (0,)
        return (2, world.sessions[j].handle == slot, self._session_part(world, j, found))

    def _session_part(self, world: World, j: int, found: dict) -> tuple:
        """A session with no id: its turns' count, its status, its turn in flight as a position,
        and each turn's phase and flags."""
        try:
            return found[j]
        except KeyError:
            pass
        rec = world.sessions[j]
        turn = 0 if rec.turn is None else 1 + rec.turns.index(rec.turn) if rec.turn in rec.turns else -1
        reqs = world.requests
        turns = tuple((reqs[i].phase, reqs[i].lent, reqs[i].ran) for i in self.req_turns[j])
        out = found[j] = (len(rec.turns), rec.status, turn, turns)
        return out
