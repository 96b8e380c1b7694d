"""slotwarden.model."""

if __name__ != "slotwarden.model":  # imported as a bare folder (`import model` from the repository root)
    raise ImportError(
        f"this folder is the package slotwarden.model, imported here as {__name__!r}: "
        "use `import slotwarden.model` (install the project with `pip install -e .`)"
    )
