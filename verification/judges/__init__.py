"""verify's own judges: coverage (`reach`, `allowlist`: which lines of model/, runtime/ and
kernels/ a verify run reaches, and why each one it misses may be missed) and mutation
(`mutation`: how many small edits of the runtime a verify run kills)."""
