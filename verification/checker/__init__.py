"""The bounded exhaustive model checker, its symmetry reduction and its pinned counts."""
