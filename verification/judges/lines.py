"""Line sets as the coverage reports store them: ranges ("3-5,9")."""

from __future__ import annotations


def ranges(lines) -> str:
    """[1, 2, 3, 5] -> "1-3,5"."""
    out: list[str] = []
    lines = sorted(lines)
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j + 1] == lines[j] + 1:
            j += 1
        out.append(str(lines[i]) if i == j else f"{lines[i]}-{lines[j]}")
        i = j + 1
    return ",".join(out)


def numbers(text: str) -> set[int]:
    """ "1-3,5" -> {1, 2, 3, 5}."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out
