"""Engine adapters: slotwarden's guard installed inside a real serving engine.

Each adapter wraps the engine's own methods at their call sites and names, for every slot move,
who makes it, from the engine's own objects. `slotwarden.adapters.sglang` is the first.
"""
