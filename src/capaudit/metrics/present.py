"""The one presenter of a :class:`~capaudit.metrics.estimate.MetricResult`.

Why one: the terminal table, report.md/html, the leaderboard page and markdown, the JSON
and ``to_pandas()`` all used to format values on their own, and a caveat (six labelled
images, 20% annotation coverage, a value that is 0 by construction) shown in one was
missing in the others. Every view writes a value through :func:`value_text` (value,
interval and ``n=`` images, in the metric's number format) and its caveat through
:func:`status_text`, so they cannot disagree.
"""

from __future__ import annotations

import math

from capaudit.metrics.estimate import MetricResult
from capaudit.metrics.spec import number_format

__all__ = ["value_text", "interval_text", "n_text", "status_text", "short_status", "status_tag",
           "signed", "is_degenerate"]


def interval_text(metric: str, r: MetricResult) -> str:
    """``[low, high]`` in the metric's number format ("" without an interval)."""
    if r.ci_low is None or r.ci_high is None:
        return ""
    f = number_format(metric)
    return f"[{f.format(r.ci_low)}, {f.format(r.ci_high)}]"


def n_text(r: MetricResult) -> str:
    """``n=6``: the images the value rests on (the metric's own count when not known)."""
    n = r.n_images if r.n_images is not None else r.n
    return f"n={n:,}"


def value_text(metric: str, r: MetricResult | None, ci: bool = True, n: bool = True) -> str:
    """``0.00 [0.00, 0.00] n=6``; ``-`` without a value (:func:`status_text` says why)."""
    if r is None or r.skipped or r.value is None:
        return "-"
    parts = [number_format(metric).format(r.value)]
    if ci and (iv := interval_text(metric, r)):
        parts.append(iv)
    if n:
        parts.append(n_text(r))
    return " ".join(parts)


def status_text(r: MetricResult | None) -> str:
    """The caveat of a value: "" when ``ok``, else its status with its notes."""
    if r is None:
        return ""
    if r.skipped:
        return r.state
    if r.status == "ok" and not r.notes:
        return ""
    return "; ".join(r.notes) if r.notes else r.status


def is_degenerate(r: MetricResult) -> bool:
    """A zero-width interval (six zeros bootstrap to [0, 0]): it separates from nothing."""
    return r.ci_low is not None and r.ci_high is not None and r.ci_low == r.ci_high


def short_status(r: MetricResult | None) -> str:
    """The caveat in a table cell: the status word, or the partial note ("partial: 20 of 100
    images"), both when a partial value also has another status ("partial: 20 of 100
    images; too-few"), "" when ``ok``; the full notes go under the table
    (:func:`status_text`)."""
    if r is None or r.skipped or r.status == "ok":
        return ""
    return status_tag(r.status, r.notes)


def signed(x: float | None, fmt: str = "{:.2f}") -> str:
    """A gap with its sign, ``−0.57`` / ``+1,379`` in ``fmt``; ``–`` when it has no value
    (never ``+nan``): the leaderboard, its terminal table and the card write gaps so."""
    if x is None or x != x:
        return "–"
    negative = x < 0 or (x == 0 and math.copysign(1.0, x) < 0)
    return ("−" if negative else "+") + fmt.format(abs(x))


def status_tag(status: str, notes) -> str:
    """The caveat of a status and its notes, for a value's cell in every view (this one,
    the leaderboard's :func:`~capaudit.leaderboard.status.cell_tag`, the page through it):
    the status word, the partial note ("partial: 20 of 100 images"), or both."""
    part = next((t for t in notes if t.startswith("partial")), None)
    if status == "partial":
        return part or "partial"
    word = status.replace("-", " ") if status == "by-construction" else status
    if status == "circular":   # the independent score beside it, short: "independent: 12.22 n=30"
        ind = next((t for t in notes if t.startswith("independent: ")), None)
        word += f"; {ind.split(' under ')[0].split(' (')[0]}" if ind else ""
    return f"{part}; {word}" if part else word
