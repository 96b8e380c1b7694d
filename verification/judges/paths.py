"""Where the judges read and write: the checkout and its committed reports."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: model/, runtime/, kernels/ and verification/ lie in it (pyproject's package-dir)."""

REPORTS = ROOT / "verification" / "reports"
