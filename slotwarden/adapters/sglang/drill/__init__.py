"""SGLang 0.5.23's real objects on CPU, driven through their normal sequences and their bug history.

`installed` says whether SGLang and its pinned import-time packages are there; `stubs` serves the
heavy modules SGLang imports at module level (triton, torchvision, tvm_ffi) to SGLang's own files
only; `objects` builds the real pool, radix cache and session; `flow` and `shell` are one
request's steps and the real Scheduler methods; `scenarios` the legal sequences, `replays` the
historical bugs, `census` SGLang's own pool equations. tests/adapters/sglang and verify's adapter
job (slotwarden.verification.adapters) drive them. Import any module but `installed` and `stubs`
only after `stubs.install()`.
"""
