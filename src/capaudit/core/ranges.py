"""Range checks for numeric settings, wherever they come from (CLI, YAML, API, environment).

Why one place: an unchecked number reaches code that trusts it. ``--n-boot
99999999999999999999`` allocated 18 GB before it was stopped, ``--seed -1`` was a NumPy
traceback, ``--limit -1`` judged 39 of 40 captions (a slice), ``--workers 0`` and
``--min-coverage 2`` passed silently. Every numeric setting is checked against its range
once, when the configuration is resolved, and a bad one is one line naming the setting,
the range and the value, before any work starts.
"""

from __future__ import annotations

import math
import os
import re

from capaudit.errors import InputError, UsageError

SEED_MAX = 2**32 - 1     # NumPy's seed range
N_BOOT_MAX = 100_000     # resamples: 100,000 is already far past any stable interval


# options whose range the declaration does not hold (``min=``/``max=`` hold the others):
# --max-cost nan switched the cost cap off (20 paid requests), --min-n -5 was taken
OPTION_RANGES: dict[str, tuple] = {
    "--max-cost": (0, None), "--max-calls": (0, None), "--min-n": (0, None),
    "--lr": (0, None), "--weight-decay": (0, None), "--warmup-steps": (0, None),
    "--grad-accum": (1, None), "--checkpoint-every": (0, None), "--log-every": (1, None),
    "--max-tokens": (1, None), "--beams": (1, None), "--max-length": (1, None),
    "--samples": (0, None),
}

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _span(lo, hi) -> str:
    return (f"from {lo:,} to {hi:,}" if lo is not None and hi is not None
            else f"of at least {lo:,}" if lo is not None
            else f"of at most {hi:,}" if hi is not None else "(finite)")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def number_problem(value, lo=None, hi=None, *, integer: bool = True):
    """``(number, None)`` when ``value`` (a number, or its text: an option, an environment
    variable) is a number (an integer where ``integer``) within ``[lo, hi]``, else ``(None,
    "must be ..., not ...")``. Text has ASCII digits only (Python's ``int('５')`` is 5); a
    float must be finite (``nan`` compares false with every bound, so it passed them all)."""
    number = value
    if isinstance(value, str):
        raw = value.strip()
        number = None
        if (_INTEGER if integer else _DECIMAL).fullmatch(raw):
            number = int(raw) if integer else float(raw)
    ok_type = (isinstance(number, int) if integer else isinstance(number, (int, float))) \
        and not isinstance(number, bool)
    if ok_type and (integer or math.isfinite(number)) and (lo is None or number >= lo) \
            and (hi is None or number <= hi):
        return number, None
    kind = "a whole number" if integer else "a number"
    return None, f"must be {kind} {_span(lo, hi)}, not {_shown(value)}"


def check_number(name: str, value, lo=None, hi=None, *, integer: bool = True,
                 optional: bool = False, flag: str | None = None):
    """The one check of a numeric setting, wherever it comes from (an option's text, YAML,
    the API): the number when :func:`number_problem` finds none, ``None`` when ``optional``
    and absent; else one line naming the setting (and ``flag``, the option that sets it)
    and its range."""
    if value is None and optional:
        return None
    number, problem = number_problem(value, lo, hi, integer=integer)
    if problem:
        who = f"{name} ({flag})" if flag and flag != name else name
        raise UsageError(f"{who} {problem}", fix=f"give {who} a value {_span(lo, hi)}")
    return number


def env_number(env: str, default: float, lo: float, hi: float) -> float:
    """A number from the environment variable ``env`` (``default`` when unset or empty)
    within ``[lo, hi]``: ``inf``, ``nan``, ``-3`` or ``lots`` are one line naming it."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and lo <= value <= hi):
        raise InputError(f"{env}={raw!r} is not a number from {lo:g} to {hi:g}",
                         fix=f"e.g. {env}={default:g}, or unset it")
    return value
