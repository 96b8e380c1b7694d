"""Whether SGLang 0.5.23 and its pinned import-time packages (requirements/sglang.txt) are installed.

`missing()` names what is absent, read from package metadata only (importing nothing), so that a
machine without them skips tests/adapters/sglang (and verify's adapter job) with the pip commands,
while a broken import on a machine that has them fails loudly instead of skipping. Outside a
checkout (no requirements/ folder) only sglang's own version is checked.
"""

from __future__ import annotations

import importlib.metadata
import os

SGLANG_VERSION = "0.5.23"
_REQUIREMENTS = os.path.join(os.path.dirname(__file__), *[".."] * 4, "requirements", "sglang.txt")
INSTALL = (
    f"pip install --no-deps sglang=={SGLANG_VERSION} && "
    "pip install -r requirements/sglang.txt -c requirements/torch.txt (what `make test` runs)"
)


def _pins() -> list[tuple[str, str]]:
    if not os.path.exists(_REQUIREMENTS):
        return []
    with open(_REQUIREMENTS) as f:
        lines = [line.split("#")[0].strip() for line in f]
    return [tuple(line.split("==")) for line in lines if "==" in line]


def missing() -> list[str]:
    """Each required distribution that is absent or at another version, as `name==wanted (have)`."""
    wrong = []
    for name, wanted in [("sglang", SGLANG_VERSION), *_pins()]:
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = "absent"
        if have != wanted:
            wrong.append(f"{name}=={wanted} ({have})")
    return wrong


def skip_reason() -> str | None:
    wrong = missing()
    if not wrong:
        return None
    return f"SGLang's real objects are not installed ({', '.join(wrong[:4])}): {INSTALL}"
