"""Text of a comparison's cells, shared by the terminal table and the report.

One place decides how a value reads ("77.21 [76.13, 78.34] n=1,000", "n/a", "not
computed (use --lic)", "0.00 [0.00, 0.00] n=6 (too-few)") and which mark it carries,
so the terminal and report.md/html never disagree; the value itself is written by
:mod:`capaudit.metrics.present`, as everywhere else.
"""

from __future__ import annotations

from capaudit.metrics.lic import LIC_NOT_COMPUTED
from capaudit.metrics.present import short_status, status_text, value_text
from capaudit.metrics.spec import arrow, label


def header(metric: str) -> str:
    """Column label with its direction (↑ higher is better, ↓ lower is better)."""
    return label(metric) + arrow(metric)


def fmt_value(metric: str, r, ci: bool = True) -> str:
    """A metric value with its 95% interval and n, and its status when not ``ok``."""
    if r is None:
        return "-"
    if r.skipped:
        return LIC_NOT_COMPUTED if r.skipped == LIC_NOT_COMPUTED else "n/a"
    text = value_text(metric, r, ci)
    status = short_status(r)
    return f"{text} ({status})" if status and text != "-" else text


def cell(cmp, name: str, metric: str, ci: bool = True) -> tuple[str, str | None]:
    """(text, mark) of one cell; mark is "best", "worst", "flag" or None."""
    text = fmt_value(metric, cmp.result(name, metric), ci)
    if (name, metric) in cmp.flags:
        return text, "flag"
    if cmp.best.get(metric) == name:
        return text, "best"
    if cmp.worst.get(metric) == name:
        return text, "worst"
    return text, None


def counts(cmp, name: str) -> tuple[str, str]:
    """(captions, images) a set was scored on, as text."""
    b = cmp.basis
    if b is None:
        meta = cmp.results[name].meta
        return tuple(f"{meta[k]:,}" if meta.get(k) is not None else "-"
                     for k in ("n_captions", "n_images"))
    empty = b.empty.get(name)   # a filtered set on its parent's captions: say how many are
    return (f"{b.captions[name]:,}" + (f" ({empty:,} empty)" if empty else ""),
            f"{b.images[name]:,}")


def notes(cmp) -> list[str]:
    """Lines to read with the table: basis, what the marks mean, flags and skips."""
    lines = list(cmp.basis.describe()) if cmp.basis else []
    lines.append("best/worst marked only where the 95% interval overlaps no other set's")
    if cmp.unmarked:
        lines.append("not marked, intervals overlap: " + ", ".join(
            f"{label(m)} ({what})" for m, what in cmp.unmarked.items()))
    for m, why in getattr(cmp, "unranked", {}).items():
        lines.append(f"{label(m)} not ranked: {why}")
    for (n, m), why in cmp.flags.items():
        lines.append(f"{n} {label(m)}: {why}; not ranked")
    for n in cmp.names:  # every caveat of a value, in full, once
        for m, r in cmp.results[n].results.items():
            if not r.skipped and r.status != "ok" and r.notes and (n, m) not in cmp.flags:
                lines.append(f"{n} {label(m)}: {status_text(r)}")
    for n in cmp.names:
        for m, r in cmp.results[n].results.items():
            if r.skipped and r.skipped != LIC_NOT_COMPUTED:
                lines.append(f"{n} {label(m)} not computed: {r.skipped}")
    if any(r.skipped == LIC_NOT_COMPUTED for n in cmp.names
           for r in cmp.results[n].results.values()):
        lines.append("LIC not computed: add --lic (and --lic-reference HUMAN_SET) to train "
                     "the leakage classifiers")
    lic_one = [m for m in ("lic_m", "lic_d", "lic") if any(
        (r := cmp.result(n, m)) is not None and not r.skipped and r.ci_low is None
        for n in cmp.names)]
    if lic_one:
        lines.append("LIC from one classifier seed: no interval (use --lic-seeds 2 or more)")
    lines += [line for got in getattr(cmp, "file_scores", {}).values() for line in got["lines"]]
    sources = getattr(cmp.annotations, "sources", None)
    if sources:  # the most recent stored source of a kind is used: say which one it was
        lines.append("annotations: " + ", ".join(f"{k} {v}" for k, v in sources.items()))
    return lines


def fmt_cost(row: dict) -> str:
    """One line: what filtering cost, both sets scored on the parent's images."""
    text = (f"{row['set']} vs parent {row['parent']}: {row['captions']:,} of "
            f"{row['parent_captions']:,} captions kept")
    if row.get("on_parent"):
        text += "; on the parent's images (a dropped caption counts as empty)"
    if "recall" in row:
        text += f": recall {row['recall'][0]:.2f} -> {row['recall'][1]:.2f}"
    for m in ("length", "chair_s", "gender_error"):
        if m in row:
            text += f"; {m} {row[m][0]:.2f} -> {row[m][1]:.2f}"
    return text
