"""verify's checks of the runtime's edges, each a function returning its problems (empty when
it holds), each shown failing on broken variants in tests/verification/test_edges*.py:
- `trace_format`: traces replay clean and round-trip; bad lines refused in words;
- `conversions`: ids, actors, targets, counts and steps at their bounds: converted, or refused;
- `one_slot`, `batch_lanes`, `free_lanes`, `free_paths`: every lane agrees, frees follow the
  free rule, the usual free skips the general path; `ledger_paths`, `ledger_fast_paths`,
  `ledger_records`: the ledger's side and fast paths, its records, tables and configs;
- `words`, `step_words`: refusals name slot, state, owner, event and actor; errors pickle;
- `scheduler_runs`, `scheduler_paths`, `admission_plan`: counters against the steps made,
  sampling, failed passes, faults and signals at the step's boundary, the cache's tally;
- `audits`: faults built for them flagged; `documents`: docs/ is what the rules generate;
- `tree_integrity`: the prefix tree's `check()` passes on built trees, flags broken ones;
- `write_set`, `guard_step`: the pool's and the drop-in's step checks = the model's;
- `declarations`: malformed declarations and abstract moves refused."""
