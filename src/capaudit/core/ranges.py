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

from capaudit.errors import InputError

SEED_MAX = 2**32 - 1     # NumPy's seed range
N_BOOT_MAX = 100_000     # resamples: 100,000 is already far past any stable interval


def check_number(name: str, value, lo=None, hi=None, *, integer: bool = True,
                 optional: bool = False, flag: str | None = None):
    """``value`` when it is a number (an integer where ``integer``) within ``[lo, hi]``
    (either bound may be ``None``), ``None`` when ``optional`` and absent; else one line.
    ``flag``: the option that sets it (``--n-boot``), named beside the setting."""
    if value is None and optional:
        return None
    ok_type = (isinstance(value, int) if integer else isinstance(value, (int, float))) \
        and not isinstance(value, bool)
    ok = ok_type and (integer or math.isfinite(value)) and (lo is None or value >= lo) \
        and (hi is None or value <= hi)
    if not ok:
        kind = "a whole number" if integer else "a number"
        span = (f"from {lo:,} to {hi:,}" if lo is not None and hi is not None
                else f"of at least {lo:,}" if lo is not None else f"of at most {hi:,}")
        shown = repr(value) if len(repr(value)) <= 30 else repr(value)[:27] + "..."
        who = f"{name} ({flag})" if flag else name
        raise InputError(f"{who} must be {kind} {span}, not {shown}",
                         fix=f"give {who} a value {span}")
    return value


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
