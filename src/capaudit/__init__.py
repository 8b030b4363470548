"""capaudit: audit image-caption datasets for gender bias and object hallucination.

The Python API (:mod:`capaudit.api`) is reached from here without importing the
CLI or any heavy package: ``store = capaudit.open("audit.duckdb")``.
"""

from __future__ import annotations

from typing import Any

# the one place of the version: pyproject.toml reads it (tool.setuptools.dynamic)
__version__ = "0.1.0"

__all__ = ["__version__", "open", "demo_file", "AuditStore", "ResultTable", "CapauditError",
           "InputError"]

from capaudit.errors import CapauditError, InputError  # noqa: E402


def __getattr__(name: str) -> Any:
    """``capaudit.open`` and the API classes load :mod:`capaudit.api` on first use."""
    if name in ("open", "demo_file", "AuditStore", "ResultTable"):
        from capaudit import api

        return getattr(api, name)
    raise AttributeError(f"module 'capaudit' has no attribute {name!r}")
