"""The scheduler machines.

- `SchedulerMachine`: requests, sessions, turns (one at a time or a burst from every session),
  aborts, closes and steps with random budgets and pool sizes (so candidates get rolled back,
  requests retracted and decode rows condensed), with and without overlap and padding to
  captured sizes, each example making a random subset of
  the kinds of move (swarm testing); invariants after every step, the idle audit at teardown.
- `CachedSchedulerMachine`: the same with the prefix cache on, follow-ups that share donated
  prefixes and, as a swarm feature, parallel-sampling groups and their aborts.
- `machine_for(cls)` points either at a scheduler subclass (a mutant).
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from slotwarden.model.properties import exclusive, handles_match, quiescent
from slotwarden.model.vocabulary import Actor
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.scheduler.request import Phase, SessionStatus
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.verification.machines import sampling
from slotwarden.verification.machines.shared import MODEL, SESSION_IDS


def marks_broken(rule_body):
    """A rule that raised leaves the scheduler mid-operation: teardown must not pile a second
    error on top of the counterexample."""

    def wrapped(self, *args, **kwargs):
        try:
            return rule_body(self, *args, **kwargs)
        except BaseException:
            self.broken = True
            raise

    wrapped.__name__, wrapped.__doc__ = rule_body.__name__, rule_body.__doc__
    return wrapped


FEATURES = ("plain", "sessions", "abort", "close")
"""Swarm testing: each example enables a random subset of these kinds of move (with neither
kind of request enabled, both are). The simplest example, which Hypothesis draws most, has
both kinds of request and no aborts or closes, so sessions live long enough to lend slots."""


def _scheduler_draws(slots: list, features: tuple = FEATURES) -> dict:
    """The scheduler machines' set-up draws; `slots` in order of preference (Hypothesis draws
    the first far more often), `features` the kinds of move an example may make."""
    return dict(
        slots=st.sampled_from(slots),
        overlap=st.booleans(),
        budget=st.sampled_from([3, 4, 5, 8, 32]),
        chunk=st.sampled_from([16, 2, 4, 1]),
        max_running=st.sampled_from([4, 3, 2, 1]),
        retract_after=st.sampled_from([1, 2, None]),
        features=st.sets(st.sampled_from(features)),
    )


class SchedulerMachine(RuleBasedStateMachine):
    """Random workloads on a small scheduler; invariants after every rule, audit at teardown.
    Each example draws its pool, budgets and the kinds of move it makes (swarm testing)."""

    broken = False
    spec_k = 0  # the drafts each submitted request verifies (`speculative.Speculating` draws it)

    scheduler_cls: type = Scheduler
    settings_override: dict = {}

    # Hypothesis draws the first value of a list (its simplest) far more often than the others:
    # each list starts with a value that lets candidates collide (two slots, a budget two
    # candidates overrun, chunks longer than one token, room for several running requests)
    @initialize(**_scheduler_draws([2, 1, 3, 4]))
    def setup(self, slots, overlap, budget, chunk, max_running, retract_after, features):
        settings = dict(
            overlap=overlap, token_budget=budget, chunk_size=chunk, max_running=max_running, retract_after=retract_after
        )
        # padding moves no slot: tied to the budget's draw (even: padded), the examples' moves stay
        # those of an unpadded machine, and the launches gain pad rows beside the persistent rows
        settings["pad_to_captured"] = budget % 2 == 0
        settings.update(self.settings_override)
        self.sched = build(MODEL, slots=slots, cls=self.scheduler_cls, **settings)
        self.sched._next_sid = SESSION_IDS.start  # request ids count from 0: keep the two kinds apart
        features = set(features)
        self.features = features if {"plain", "sessions"} & features else features | {"plain", "sessions"}

    def _has(self, feature: str) -> bool:
        return hasattr(self, "sched") and feature in self.features

    @precondition(lambda self: self._has("plain"))
    @rule(n=st.integers(1, 6), new=st.integers(1, 4), first=st.integers(0, 63))
    @marks_broken
    def submit(self, n, new, first):
        self.sched.submit([(first + i) % 64 for i in range(n)], new, spec_k=self.spec_k)

    @precondition(lambda self: self._has("sessions"))
    @rule()
    @marks_broken
    def open_session(self):
        self.sched.open_session()

    @precondition(lambda self: self._has("sessions"))
    @rule(data=st.data(), n=st.integers(1, 4), new=st.integers(1, 4))
    @marks_broken
    def submit_turn(self, data, n, new):
        """The next turn of an open session (a new one if none is open, or now and then)."""
        open_ = [s.sid for s in self.sched.sessions.values() if s.status is SessionStatus.OPEN]
        if not open_ or not data.draw(st.integers(0, 3), label="existing session?"):
            open_ = [self.sched.open_session()]
        sid = data.draw(st.sampled_from(open_), label="session")
        self.sched.submit([(sid + i) % 64 for i in range(n)], new, session=sid, spec_k=self.spec_k)

    @precondition(lambda self: self._has("sessions") and len(self.sched.sessions) > 1)
    @rule(n=st.integers(1, 4), new=st.integers(1, 4))
    @marks_broken
    def turn_burst(self, n, new):
        """Every open session sends its next turn at once (their lent slots compete for one batch)."""
        for s in list(self.sched.sessions.values()):
            if s.status is SessionStatus.OPEN:
                self.sched.submit([(s.sid + i) % 64 for i in range(n)], new, session=s.sid)

    @precondition(lambda self: self._has("abort") and self.sched.submitted)
    @rule(data=st.data())
    @marks_broken
    def abort(self, data):
        """Any request handed out: live, or ended (then nothing to do)."""
        self.sched.abort(data.draw(st.sampled_from(list(range(self.sched.submitted)))))

    @precondition(lambda self: self._has("close") and self.sched.opened > SESSION_IDS.start)
    @rule(data=st.data())
    @marks_broken
    def close(self, data):
        """Any session handed out: open, closing, or closed (then nothing to do)."""
        self.sched.close_session(data.draw(st.sampled_from(list(range(SESSION_IDS.start, self.sched.opened)))))

    @rule(times=st.integers(1, 4))
    @marks_broken
    def step(self, times):
        for _ in range(times):
            self.sched.step()

    @invariant()
    def every_slot_accounted_for(self):
        if not hasattr(self, "sched"):
            return
        sched, ledger = self.sched, self.sched.pool.ledger
        audit = sched.pool.audit()
        assert audit.free_list_ok and not audit.problems, audit.problems
        records = tuple(ledger.record(i) for i in range(1, sched.pool.capacity + 1))
        assert all(exclusive(r) for r in records)
        window = lambda r: list(r.window.slots) if r.window is not None else []  # noqa: E731
        for r in sched.requests.values():
            held = ledger.held_by(Actor.request(r.rid)).tolist()
            assert sorted(held) == sorted([r.slot] + window(r) if r.phase is Phase.RUNNING else []), (
                f"request {r.rid} handle {r.slot}, window {window(r)}, pool {held}"
            )
        for s in sched.sessions.values():
            held = ledger.held_by(Actor.session(s.sid)).tolist()
            assert held == ([s.slot] if s.slot is not None else []), f"session {s.sid} handle {s.slot}, pool {held}"
        handles = {
            Actor.request(r.rid): [r.slot] + window(r) if r.phase is Phase.RUNNING else []
            for r in sched.requests.values()
        }
        handles.update({Actor.session(s.sid): [] if s.slot is None else [s.slot] for s in sched.sessions.values()})
        assert handles_match(records, handles), f"a held slot nobody has a handle on: {records}"

    @invariant()
    @marks_broken  # a teardown after a failed invariant must not hide it
    def one_turn_per_session(self):
        """No request is queued or running twice, and a session has at most one turn queued or
        running: its next turn starts only once the last one ended."""
        if not hasattr(self, "sched"):
            return
        active = list(self.sched.waiting) + list(self.sched.running)
        assert len({id(r) for r in active}) == len(active), f"a request is queued twice: {[r.rid for r in active]}"
        turns = [r.session for r in active if r.session is not None]
        assert len(turns) == len(set(turns)), f"a session has two turns in flight: sessions {sorted(turns)}"

    @invariant()
    @marks_broken  # a teardown after a failed invariant must not hide it
    def idle_only_when_nothing_is_left(self):
        """An idle scheduler has no request left to run: a queued turn always gets to start."""
        if hasattr(self, "sched") and self.sched.idle:
            stuck = sorted(r.rid for r in self.sched.requests.values() if not r.done)
            assert not stuck, f"idle, yet requests {stuck} were never run (their sessions wait for them)"

    def teardown(self):
        if not hasattr(self, "sched") or self.broken:
            return
        for sid in list(self.sched.sessions):
            self.sched.close_session(sid)
        stalled = 0  # steps in a row that ran nothing (a fence in between may free slots)
        for _ in range(5000):
            if self.sched.idle:
                self.sched.flush_cache()  # the prefix cache (if on) gives back every slot it holds
                self.sched.step()  # fences what is left and audits
                break
            ran = self.sched.step().kind != "idle" or self.sched.inflight is not None or self.sched.running
            stalled = 0 if ran else stalled + 1
            if stalled == 3:
                break  # stuck: requests wait for slots nobody gives back; the audit says why
        self.sched.check_audit()
        assert self.sched.idle, f"requests {[r.rid for r in self.sched.waiting]} wait for slots that never come free"
        assert quiescent(tuple(self.sched.pool.ledger.record(i) for i in range(1, self.sched.pool.capacity + 1)))


GROUP_FEATURES = FEATURES + ("groups",)
"""The cached machine's kinds of move: also parallel-sampling groups (`Scheduler.submit_n`)."""


class CachedSchedulerMachine(SchedulerMachine):
    """The scheduler machine with the prefix cache on, pools of 3 slots drawn first (a
    copy-on-write needs two: the cached source and the fresh copy), and follow-ups: a plain
    request continuing an earlier one once its answer came back, as a chat client does, so
    that it matches the prefix the earlier one donated. With the `groups` feature, also
    parallel-sampling groups (n of 2..3 samples of one prompt, greedy or sampled), whose
    siblings wait for the prompt state their group's hidden prompt request donates, and the
    aborts of a group: one sibling, all of them (which ends the prompt request too), or the
    prompt request by its id, at whatever point of its life the group has reached."""

    settings_override = {"prefix_cache": True}

    @initialize(**_scheduler_draws([3, 2, 4, 1], GROUP_FEATURES))
    def setup(self, slots, overlap, budget, chunk, max_running, retract_after, features):
        SchedulerMachine.setup(self, slots, overlap, budget, chunk, max_running, retract_after, features)
        self.bases = []  # plain requests submitted, in order (the scheduler forgets ended ones)
        self.groups = []  # (sibling ids, the prompt request's id) of every group submitted
        sampling.watch(self)  # `sampled`: every group as submitted; its prefills checked at the model

    @precondition(lambda self: self._has("plain"))
    @rule(n=st.integers(1, 6), new=st.integers(1, 4), first=st.integers(0, 63))
    @marks_broken
    def submit(self, n, new, first):
        rid = self.sched.submit([(first + i) % 64 for i in range(n)], new, spec_k=self.spec_k)
        self.bases.append(self.sched.requests[rid])

    @precondition(lambda self: hasattr(self, "sched") and self.bases)
    @rule(data=st.data(), extra=st.integers(0, 63), new=st.integers(1, 4))
    @marks_broken
    def follow_up(self, data, extra, new):
        """A plain request continuing an earlier one (the latest first): the scheduler steps
        until the earlier one ended (a few steps at most); then its prompt, its output, one
        more token."""
        base = data.draw(st.sampled_from(self.bases[::-1]), label="continues")
        for _ in range(12):
            if base.done:
                break
            self.sched.step()
        rid = self.sched.submit(list(base.prompt) + list(base.output) + [extra], new)
        self.bases.append(self.sched.requests[rid])

    @precondition(lambda self: self._has("groups"))
    @rule(
        n=st.integers(2, 3),
        size=st.integers(2, 9),
        new=st.integers(1, 4),
        first=st.integers(0, 63),
        temperature=st.sampled_from([0.0, 1.0]),
    )
    @marks_broken
    def submit_group(self, n, size, new, first, temperature):
        """n samples of one prompt (of two tokens or more: the group has a prompt request,
        whose prefill may take several steps); the siblings are plain requests that
        follow-ups may continue."""
        prompt = [(first + i) % 64 for i in range(size)]
        rids = self.sched.submit_n(prompt, new, n, temperature=temperature, seed=first)
        self.groups.append((rids, rids[-1] + 1))  # the prompt request takes the id after the siblings'
        self.sampled.append(sampling.group_of(self.sched, rids, first, prompt))
        self.bases.extend(self.sched.requests[rid] for rid in rids)

    @precondition(lambda self: self._has("groups") and self.groups)
    @rule(data=st.data(), which=st.sampled_from(["sibling", "siblings", "prompt"]))
    @marks_broken
    def abort_group(self, data, which):
        """Abort part of a group (the latest first): one sibling, every sibling (the last one's
        abort ends the prompt request too, if it still runs or waits), or the prompt request
        itself; now, or once the prompt request runs (with overlap, or a prefill of several
        steps, it is still running then). An ended request: nothing to do."""
        siblings, prompt = data.draw(st.sampled_from(self.groups[::-1]), label="group")
        lead = self.sched.requests.get(prompt)
        if lead is not None and data.draw(st.booleans(), label="once the prompt request runs"):
            for _ in range(8):  # a few steps at most: it takes a slot as soon as one is free
                if lead.phase is not Phase.WAITING:
                    break
                self.sched.step()
        if which == "sibling":
            siblings = [data.draw(st.sampled_from(siblings), label="sibling")]
        for rid in siblings if which != "prompt" else [prompt]:
            self.sched.abort(rid)

    @invariant()
    @marks_broken  # a teardown after a failed invariant must not hide it
    def siblings_wait_for_their_prompt(self):
        """A sibling whose group's prompt request is live holds nothing and is not running (it
        copies the prompt's state once published); a live prompt request has a live sibling
        (aborting the last one ends it)."""
        if not hasattr(self, "sched"):
            return
        for r in self.sched.requests.values():
            lead = r.awaits
            if lead is not None and not lead.done:
                assert r.phase is Phase.WAITING and r.slot is None and r.cached is None, (
                    f"request {r.rid} is {r.phase.name} holding slot {r.slot} (match {r.cached}) before "
                    f"its group's prompt request {lead.rid} ended"
                )
            if r.shared:
                assert any(not s.done for s in r.siblings), (
                    f"prompt request {r.rid} is {r.phase.name}, yet every sibling of its group has ended"
                )

    @invariant()
    @marks_broken  # a teardown after a failed invariant must not hide it
    def groups_sample_apart(self):
        """Each group as the machine submitted it (`sampling.py`): seeds `sibling_seed(seed, i)`,
        distinct; no sibling admitted or prefilled before its prompt state is published; none
        prefilling the prompt again while that state is there to copy."""
        if not hasattr(self, "sched"):
            return
        found = [p for g in self.sampled for p in sampling.problems(g, self.sched)] + self.prefill_problems
        assert not found, "; ".join(found[:3])

    @invariant()
    @marks_broken  # a teardown after a failed invariant must not hide it
    def tree_intact(self):
        """The prefix tree's own integrity check (`RadixTree.check`): no slotless leaf or pass-through
        left behind, parents and prefix lengths agree, the slot index matches the nodes."""
        if hasattr(self, "sched") and self.sched.prefix is not None:
            self.sched.prefix.tree.check()


def machine_for(scheduler_cls: type, **settings) -> type:
    """`SchedulerMachine` driving `scheduler_cls` (a mutant), with `settings` fixed (with the
    prefix cache on: `CachedSchedulerMachine`, follow-ups included)."""
    base = CachedSchedulerMachine if settings.get("prefix_cache") else SchedulerMachine
    return type(
        f"{scheduler_cls.__name__}Machine",
        (base,),
        {"scheduler_cls": scheduler_cls, "settings_override": {**base.settings_override, **settings}},
    )
