"""The gender x skin-tone cells of the leaderboard (``--intersections``), with intervals.

Why: a cell of 17 to 23 images printed as a bare value (``0.52 (n=23)``) was read like one
of 5,000. Each cell's estimate is lifted onto the union's units with the cell's images
(:class:`~capaudit.leaderboard.units.ImageUnion`) and goes through the board's one joint
bootstrap, so every cell carries a 95% interval; a cell under ``--min-n`` images is marked
``too-few`` as every other board value is.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from capaudit.metrics.estimate import Estimate, SparseStats

__all__ = ["cell_estimates", "cell_table", "CELL_KEY", "number_text"]

CELL_KEY = "cell"   # the third part of a cell estimate's key: (set, metric, "cell", "female, dark")


def cell_estimates(sets, columns, union, annotations) -> dict[tuple, Estimate]:
    """``{(set, metric, CELL_KEY, "female, dark"): estimate on that cell's images}`` for every
    plain column whose statistics can be restricted to a group of images."""
    from capaudit.leaderboard.columns import GROUPINGS

    if not (annotations.gender and annotations.skin_tone):
        return {}
    masks = {(g, t): union.group_mask(annotations.gender, g) &
             union.group_mask(annotations.skin_tone, t)
             for g in GROUPINGS["gender"] for t in GROUPINGS["skin_tone"]}
    out: dict[tuple, Estimate] = {}
    for s in sets:
        for c in columns:
            est = s.estimates[c.metric]
            if c.by is not None or est.boot is not None or est.spread is not None or \
                    isinstance(est.stats, SparseStats):
                continue
            for (g, t), mask in masks.items():
                out[(s.name, c.metric, CELL_KEY, f"{g}, {t}")] = union.lift(s, est, mask)
    return out


def cell_table(ests: Mapping[tuple, Estimate], boots: Mapping[str, np.ndarray],
               min_n: int | None) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``{set: {metric: {"female, dark": {"value", "images", "ci", "status"}}}}``: each cell's
    point value, the images it rests on, its 95% interval from the joint resamples (None
    without a bootstrap or a value) and its status (``too-few`` under ``min_n`` images)."""
    from capaudit.audit.bootstrap import interval
    from capaudit.audit.engine import point_value
    from capaudit.audit.result_status import too_few_note

    out: dict[str, dict] = {}
    for key, e in ests.items():
        if len(key) != 4 or key[2] != CELL_KEY:
            continue
        name, metric, _, cell = key
        v = point_value(e)
        images = int((e.stats[:, -1] > 0).sum())
        ci = None
        reps = boots.get("\t".join(map(str, key)))
        if reps is not None and v is not None:
            lo, hi = interval(reps, v, bool(e.recentre))
            ci = None if lo is None else [float(lo), float(hi)]
        few = min_n is not None and images < min_n
        out.setdefault(name, {}).setdefault(metric, {})[cell] = {
            "value": v, "images": images, "ci": ci,
            "status": "" if v is None else ("too-few" if few else "ok"),
            "note": too_few_note(images, min_n) if few and v is not None else ""}
    return out


def number_text(x, ci=None, n=None, fmt="{:.2f}") -> str:
    """``0.57 [0.10, 7.59] n=1,204``: a board value with its interval and the images it rests
    on, as every view of the board writes it."""
    if x is None:
        return "–"
    s = fmt.format(x)
    if ci and ci[0] is not None:
        s += f" [{fmt.format(ci[0])}, {fmt.format(ci[1])}]"
    if n is not None:
        s += f" n={n:,}"
    return s


def cell_text(cell: Mapping[str, Any], fmt: str = "{:.2f}") -> str:
    """``0.52 [0.31, 0.70] n=23 too-few``: one cell as the terminal and the Markdown show it."""
    if cell.get("value") is None:
        return f"– n={cell['images']:,}"
    return (number_text(cell["value"], cell.get("ci"), cell["images"], fmt)
            + (" too-few" if cell.get("status") == "too-few" else ""))


def cells_markdown(groups: Mapping[str, Any], sets: Sequence[str]) -> list[str]:
    """The intersections as Markdown tables (one per set), each cell with its interval."""
    from capaudit.metrics.spec import number_format

    out: list[str] = []
    for name in sets:
        cells = (groups.get(name) or {}).get("intersections") or {}
        if not cells:
            continue
        heads = list(next(iter(cells.values())))
        out += ["", f"{name}: gender × skin tone (95% interval; n = images of the cell; "
                    "too-few: under --min-n):", "",
                "| metric | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
        for metric, row in cells.items():
            out.append(f"| {metric} | " + " | ".join(
                cell_text(row[h], number_format(metric)) for h in heads) + " |")
    return out
