"""The prefix cache: a radix tree of recurrent-state slots, and the scheduler's use of it."""
