"""verify's checks of the runtime's edges, each a function returning its problems (empty when
it holds), each shown failing on broken variants in tests/verification/test_edges.py:
- `trace_format`: runtime traces replay clean, round-trip, and bad lines are refused in words;
- `conversions`: ids, actors, targets, counts and steps at their bounds (int64 and beyond,
  numpy and torch types): converted, or refused in words with nothing changed;
- `one_slot`, `batch_lanes`, `free_lanes`: every lane agrees, frees follow the free rule;
- `words`: refusals name slot, state, owner, event and actor; errors pickle;
- `scheduler_runs`: `run`, counters against the steps made, parallel sampling's ids, seeds
  and prefills, failed forward passes, the session reaper and `session_state`; the admission
  plan (`admission_plan`) decides as the loop alone would;
- `audits`: faults built for them flagged; `documents`: docs/ is what the rules generate;
  `ledger_paths` (test_edges_ledger.py): the ledger's side paths, configs;
- `tree_integrity`: the prefix tree's `check()` passes on built trees, flags broken ones;
  `write_set`, `guard_step`: the pool's and the drop-in's step checks = the model's;
  `declarations` (test_edges_model.py): malformed declarations and abstract moves refused."""
