"""User-facing errors.

Every problem caused by the user's input (a malformed file, an unknown name, a
missing column) is raised as :class:`InputError`. The CLI turns it into one
line on stderr and exit code 2, never a traceback. Messages name the file, the
row where known, and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

# what a terminal acts on instead of showing: C0 and C1 control characters (ESC starts the
# sequences that set the title, clear the screen or rewrite the line), DEL, the Unicode
# line and paragraph separators and the bidirectional overrides that reorder a line
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def shown(text: str, *, one_line: bool = False) -> str:
    """``text`` as a terminal should print it: every control character written out as an
    escape (``\\x1b``), so data (a caption, a server's error body, a file name) can neither
    drive the terminal nor, with ``one_line``, break an error line in two."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100
                        else f"\\u{ord(m[0]):04x}", text)
    return text.replace("\n", "\\n").replace("\t", " ") if one_line else text


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


class UsageError(InputError):
    """A value given to a command or an API call that it cannot take (a wrong type, a number
    out of range, a name that means nothing here): the fix is in the call itself."""


class DataError(InputError):
    """A file or store whose content is not what it should be (not a capaudit store, a
    damaged one, a file that is not the format it claims): the fix is in the data."""


class StoreFault(InputError):
    """A store gave no answer about a location: it did not answer in time, or refused access
    (:class:`AccessRefused`). Not a missing file: a probe (does it exist?) must not take it
    for absence."""


class AccessRefused(StoreFault):
    """A store refused to let a location be read or written (HTTP 401/403, S3 AccessDenied,
    no credentials); the fix is the credentials, never printed."""


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


# The CLI's on/off flags (tests/test_api.py checks the list against the CLI's): the Python
# API takes each as ``name=True`` (``--no-NAME``: ``name=False``); every other flag is a
# keyword with a value (``--split`` -> ``split=``).
SWITCHES = frozenset({
    "align-vocab", "all", "all-images", "allow-few", "allow-partial", "colors", "compile",
    "corrected", "csv",
    "dry-run", "intersections", "json", "keep-work", "lic", "negation", "no-cache",
    "overwrite", "print-json", "replace", "revise", "same-images", "skip-bad-shards",
    "skip-no-image",
    "strict", "version", "write"})


def api_wording(text: str) -> str:
    """An error's text with each CLI flag written as the Python API's keyword: errors are
    raised once, in CLI words (``pass --skip-no-image``); an API call shows them as
    ``pass skip_no_image=True``, ``--split`` as ``split=``, ``--namespace NAME`` as
    ``namespace=NAME`` (a placeholder in capitals), ``--db`` as ``capaudit.open(PATH)``."""
    def keyword(m) -> str:
        flag, after = m.group(1), f" {m.group(2)}" if m.group(2) else ""
        if flag == "db":
            return f"capaudit.open({m.group(2) or 'PATH'})"
        if flag in SWITCHES:
            return flag.replace("-", "_") + "=True" + after
        if flag.startswith("no-") and flag[3:] in SWITCHES:
            return flag[3:].replace("-", "_") + "=False" + after
        return flag.removeprefix("filter.").replace("-", "_") + "=" + after.strip()
    return re.sub(r"(?<![\w/.\-])--([a-z][a-z0-9.\-]*[a-z0-9])(?: ([A-Z][A-Z_]*)\b)?",
                  keyword, text)


def worded_for_api(cls):
    """Class decorator of the Python API: its public methods raise their
    :class:`CapauditError` in API words (:func:`api_wording`)."""
    import functools

    def wrap(method):
        @functools.wraps(method)
        def call(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except CapauditError as exc:
                exc.args = (api_wording(str(exc)),) + exc.args[1:]
                if getattr(exc, "fix", None):
                    exc.fix = api_wording(exc.fix)
                raise
        return call

    for name, value in list(vars(cls).items()):
        if callable(value) and not name.startswith("_"):
            setattr(cls, name, wrap(value))
    return cls
