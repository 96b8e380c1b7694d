"""slotwarden.runtime."""

if __name__ != "slotwarden.runtime":  # imported as a bare folder (`import runtime` from the repository root)
    raise ImportError(
        f"this folder is the package slotwarden.runtime, imported here as {__name__!r}: "
        "use `import slotwarden.runtime` (install the project with `pip install -e .`)"
    )
