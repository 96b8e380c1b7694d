"""The bug history, the cache's history, seeded code bugs and declaration mutants."""
