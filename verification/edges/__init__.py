"""verify's checks of the runtime's edges, each a function returning its problems (an empty list
when it holds) and each shown failing on a broken variant in tests/verification/edges/:

- `trace_format`: traces the runtime writes replay clean in `check-trace`, every line and the
  header round-trip through the parser's two paths, and every malformed line is refused naming
  its line and its fault;
- `conversions`: the ledger's id, actor, event, count and step conversions at their bounds
  (int64 and beyond, numpy and torch types): the value named, or a typed refusal naming the
  argument, the value and why, with nothing changed;
- `one_slot`: `apply_one` and `apply_each` agree with `apply` on every lane;
- `words`: refusals name the slot, its state and owner, the event and the actor;
- `scheduler_runs`: `Scheduler.run`, its counters against the steps it made, parallel
  sampling's ids, prefills and results, a failing forward pass and the session reaper;
- `tree_integrity`: the prefix tree's `check()` passes on every tree its operations build and
  flags each broken tree built for one of its invariants.
"""
