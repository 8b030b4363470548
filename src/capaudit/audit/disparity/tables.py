"""Disparity tables: each set's and metric's gap per grouping, with its 95% interval as text.

Used by the Markdown report (:func:`disparity_markdown`) and the terminal table
of ``audit compare --disparity`` (:func:`disparity_rows`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from capaudit.audit.disparity.gaps import Disparity

__all__ = ["disparity_rows", "disparity_markdown"]



def disparity_rows(disparities: dict[str, dict[str, Disparity]]
                   ) -> tuple[list[str], list[list[str]]]:
    """(gap headers, rows of [set, metric, gap per grouping]) with 95% intervals as text, the
    images of the smaller group and the gap's status when not ok ("(too-few)")."""
    from capaudit.metrics.present import short_status

    bys = list(dict.fromkeys(by for per in disparities.values() for by in per))
    if not bys:
        return [], []
    heads = [next(per[by] for per in disparities.values() if by in per).diff_key for by in bys]
    metrics = list(dict.fromkeys(m for per in disparities.values() for d in per.values()
                                 for m in d.results))
    rows = []
    for name, per in disparities.items():
        for metric in metrics:
            cells = []
            for by in bys:
                d = per.get(by)
                r = d.results.get(metric, {}).get(d.diff_key) if d else None
                cells.append("-" if r is None or r.value is None else
                             f"{r.value:+.2f}" + ("" if r.ci_low is None else
                                                   f" [{r.ci_low:+.2f}, {r.ci_high:+.2f}]")
                             # a gap rests on the images of its smaller group
                             + ("" if r.n_images is None else f" n={r.n_images:,}")
                             + (f" ({short_status(r)})" if short_status(r) else ""))
            rows.append([name, metric, *cells])
    return [h.replace("-", " − ") for h in heads], rows


def disparity_markdown(disparities: dict[str, dict[str, Disparity]]) -> list[str]:
    """Report lines: per set and metric, each grouping's gap with its 95% interval."""
    heads, rows = disparity_rows(disparities)
    if not heads:
        return []
    return (["| set | metric | " + " | ".join(heads) + " |", "|---|---|" + "---:|" * len(heads)]
            + ["| " + " | ".join(r) + " |" for r in rows])
