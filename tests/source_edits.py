"""`broken`: a function edited in place for a test, to build the broken variant a check must
fail on (a mutation survivor's edit, applied to the source of its function)."""

from __future__ import annotations

import inspect
import textwrap


def broken(monkeypatch, owner, name: str, old: str, new: str) -> None:
    """Edit function `name` of `owner` (a module or a class) in place: its source with `old`
    (found once) replaced by `new`, compiled in its module's globals. Every reference to the
    function, imported elsewhere by name or not, runs the edited code."""
    func = vars(owner)[name]
    while hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    source = textwrap.dedent(inspect.getsource(func))
    assert source.count(old) == 1, f"{old!r} is not once in {name}"
    source = "\n".join(line for line in source.replace(old, new).splitlines() if not line.startswith("@"))
    module = inspect.getmodule(func)
    space = dict(vars(module))
    exec(compile(source, module.__file__, "exec"), space)
    monkeypatch.setattr(func, "__code__", space[name].__code__)
