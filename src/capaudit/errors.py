"""User-facing errors.

Every problem caused by the user's input (a malformed file, an unknown name, a
missing column) is raised as :class:`InputError`. The CLI turns it into one
line on stderr and exit code 2, never a traceback. Messages name the file, the
row where known, and the fix.
"""

from __future__ import annotations

from pathlib import Path


class CapauditError(Exception):
    """Base class of the errors capaudit reports to the user in one line."""

    exit_code = 2


class InputError(CapauditError):
    """Bad input: the message says which file/row and how to fix it."""

    def __init__(self, message: str, *, path: str | Path | None = None, row: int | None = None,
                 fix: str | None = None):
        parts = []
        if path is not None:
            parts.append(str(path) + (f", row {row}" if row is not None else ""))
        parts.append(message)
        text = ": ".join(parts)
        if fix:
            text += f" (fix: {fix})"
        super().__init__(text)
        self.path, self.row, self.fix = path, row, fix


class MissingExtraError(CapauditError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, what: str = ""):
        what = f" for {what}" if what else ""
        super().__init__(
            f"the package '{package}' is needed{what}; install it with: "
            f"pip install 'capaudit[{extra}]'"
        )


def require(module: str, extra: str, what: str = ""):
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on environment
        raise MissingExtraError(module.split(".")[0], extra, what) from exc
