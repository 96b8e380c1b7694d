"""slotwarden.verification."""

if __name__ != "slotwarden.verification":  # imported as a bare folder (`import verification` from the repository root)
    raise ImportError(
        f"this folder is the package slotwarden.verification, imported here as {__name__!r}: "
        "use `import slotwarden.verification` (install the project with `pip install -e .`)"
    )
