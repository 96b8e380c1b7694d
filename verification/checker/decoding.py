"""Decoding a key back to a world (`Decoding`, a part of `symmetry.Codec`, reading its fields):
a `plain_key` gives the world it packed, a canonical `key` the representative of its class (ids
given to the sorted blocks in order); an `(EXACT, world)` key gives its world."""

from __future__ import annotations

from slotwarden.model.pool import Pool
from slotwarden.model.vocabulary import NOBODY, Slot
from slotwarden.verification.abstract.world import Request, Session, Step, World, node_of
from slotwarden.verification.checker.packing import BITS, CACHE_OWNED, SLOT_BYTES, SLOT_SETS, value_of


class Decoding:
    """Keys back to worlds, for `symmetry.Codec` (its layout: `places`, `req_block`,
    `ses_block`, `tail`, `cache`, and the memo tables `_req_back`, `_ses_back`, `_slot_back`,
    `_pool_back`)."""

    def world(self, key) -> World:
        """The world a `plain_key` packed; for a `key`, the representative of its class (ids
        given to the sorted blocks in order)."""
        if isinstance(key, tuple):
            return key[1]
        n_steps = key[2]
        end_pool = 3 + SLOT_BYTES * self.slots
        end_pool += 1 + key[end_pool]
        at = end_pool + 2 * n_steps  # the first actor block
        n_slots, rb, sb = self.slots, self.req_block, self.ses_block
        owner = [NOBODY] * n_slots
        borrower = [NOBODY] * n_slots
        requests: list = [None] * len(self.requests)
        sessions: list = [None] * len(self.sessions)
        members: list = [[] for _ in range(n_steps)]
        copies: list = [[] for _ in range(n_steps)]
        locks: list = []
        tail = self.tail
        for is_request, index, actor, offset in self.places:
            b = at + offset
            if is_request:
                plain = key[b : b + rb - tail]
                rec = self._req_back.get((index, plain)) or self._request_back(index, plain)
                requests[index] = rec
                owns, borrows, steps = key[b + rb - tail], key[b + rb - tail + 1], key[b + rb - 1]
                if self.cache:
                    locks += [(actor, k + 1) for k in BITS[key[b + rb - 4]]]
                    for n in range(n_steps):
                        if key[b + rb - 3 + n]:
                            copies[n].append((actor, key[b + rb - 3 + n]))
                for n in BITS[steps]:
                    members[n].append(actor)
            else:
                plain = key[b : b + sb - 2]
                rec = self._ses_back.get((index, plain)) or self._session_back(index, plain)
                sessions[index] = rec
                owns, borrows = key[b + sb - 2], key[b + sb - 1]
            for k in BITS[owns]:
                owner[k] = actor
            for k in BITS[borrows]:
                borrower[k] = actor
        pool_key = (key[3:end_pool], tuple(owner), tuple(borrower), tuple(sorted(locks)) if self.cache else None)
        pool = self._pool_back.get(pool_key) or self._pool_of(pool_key)
        steps = tuple(
            Step(
                key[end_pool + 2 * n] - 8,
                SLOT_SETS[key[end_pool + 2 * n + 1]],
                frozenset(members[n]),
                frozenset(copies[n]),
            )
            for n in range(n_steps)
        )
        return World(pool, tuple(requests), tuple(sessions), key[0] - 8, key[1] - 8, steps, self.nodes, self.drafts)

    def _request_back(self, index: int, plain: bytes) -> Request:
        rid, sid = self.requests[index]
        fields = [value_of(b) for b in plain]
        fields[2], fields[3] = bool(fields[2]), bool(fields[3])  # lent, ran
        found = self._req_back[(index, plain)] = Request(rid, sid, *fields)
        return found

    def _session_back(self, index: int, plain: bytes) -> Session:
        sid, turns = self.sessions[index]
        turn = None if plain[2] == 0 else turns[plain[2] - 1]
        found = self._ses_back[(index, plain)] = Session(sid, value_of(plain[0]), value_of(plain[1]), turn, turns)
        return found

    def _pool_of(self, pool_key: tuple) -> Pool:
        head, owner, borrower, locks = pool_key
        slots = []
        for k in range(self.slots):
            at = SLOT_BYTES * k
            state, fence, readers = self._slot_back[(head[at], head[at + 1], head[at + 2])]
            who = node_of(k + 1) if state in CACHE_OWNED else owner[k]
            slots.append(Slot(state, who, borrower[k], fence, readers))
        found = self._pool_back[pool_key] = Pool(tuple(slots), tuple(head[SLOT_BYTES * self.slots + 1 :]), locks)
        return found
