"""The status of each leaderboard value, as the audit sets it (:mod:`capaudit.audit.result_status`).

Why: the board showed ``n`` but no caveat, so a gap resting on six images of women was
averaged into the N-avg like one resting on 5,000, and a set audited on 20% of its images
(``--allow-partial``) looked like a full-set value. Each cell gets one status:

- ``too-few``: the value (a gap: its smaller group) rests on fewer than ``--min-n``
  images; shown, and its column leaves the N-avg for every set (a note says why), so
  nothing is ranked on it;
- ``partial``: ``--allow-partial`` and an annotation the metric reads covers only part of
  the set's images ("partial: 20 of 100 images");
- ``circular``: scored with the evidence a filter of the set's lineage used
  (:mod:`capaudit.audit.circular`), the independent score in its note; its column leaves
  the N-avg for every set, as a too-few one does;
- ``ok`` otherwise ("" for a cell with no value).

The page data, the Markdown and the terminal table all write a cell's caveat through
:func:`cell_tag`, so they cannot disagree.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from capaudit.audit.result_status import partial_note, too_few_note
from capaudit.leaderboard.columns import DROPPED

__all__ = ["partial_notes", "cell_status", "cell_tag", "too_few_columns", "circular_columns"]


def partial_notes(covs: Mapping[str, object], metrics: Sequence[str],
                  allow_partial: bool) -> dict[str, dict[str, str]]:
    """``{set: {metric: "partial: 20 of 100 images"}}`` under ``--allow-partial`` (the
    least-covered annotation the metric reads), from each set's coverage."""
    out: dict[str, dict[str, str]] = {}
    if not allow_partial:
        return out
    for name, cov in covs.items():
        for m in metrics:
            if note := partial_note(cov, m):
                out.setdefault(name, {})[m] = note
    return out


def cell_status(sets: Sequence[str], columns, values: np.ndarray, n_img: np.ndarray,
                min_n: int | None, partial: Mapping[str, Mapping[str, str]] | None,
                circular: Mapping[str, Mapping[str, str]] | None = None
                ) -> tuple[list[list[str]], list[list[str]]]:
    """(status, note) of every cell ``[sets][columns]``; too-few wins over partial (it is
    the one that keeps a value off the ranking), both notes are kept. ``min_n`` ``None``:
    no count is checked (a board built by hand; ``run_leaderboard`` always passes
    ``--min-n``, 30 unless given)."""
    status = [["" for _ in columns] for _ in sets]
    notes = [["" for _ in columns] for _ in sets]
    for i, s in enumerate(sets):
        for j, c in enumerate(columns):
            if np.isnan(values[i, j]):
                continue
            said = []
            status[i][j] = "ok"
            part = (partial or {}).get(s, {}).get(c.metric)
            if part:
                status[i][j] = "partial"
                said.append(part)
            if min_n is not None and int(n_img[i, j]) < min_n:
                status[i][j] = "too-few"
                said.append(too_few_note(int(n_img[i, j]), min_n))
            if circ := (circular or {}).get(s, {}).get(c.metric):
                status[i][j] = "circular"   # the headline: the value measures nothing new
                said.append(circ)
            notes[i][j] = "; ".join(said)
    return status, notes


def too_few_columns(sets: Sequence[str], columns, status, n_img: np.ndarray,
                    min_n: int | None) -> dict[int, str]:
    """``{column: note}`` of the columns with a too-few value for some set: shown, not ranked."""
    out = {}
    for j, c in enumerate(columns):
        few = [f"{sets[i]}: {int(n_img[i, j]):,}" for i in range(len(sets))
               if status[i][j] == "too-few"]
        if few:
            out[j] = (f"{DROPPED}: {c.name} (too few images, under --min-n "
                      f"{min_n}: {', '.join(few)}; shown, never ranked)")
    return out


def circular_columns(sets: Sequence[str], columns, status) -> dict[int, str]:
    """``{column: note}`` of the columns with a circular value for some set: shown, not
    ranked (the set was filtered with the evidence the column's metric scores against)."""
    out = {}
    for j, c in enumerate(columns):
        hit = [sets[i] for i in range(len(sets)) if status[i][j] == "circular"]
        if hit:
            out[j] = (f"{DROPPED}: {c.name} (circular for {', '.join(hit)}: "
                      "scored with the evidence its filter used; shown, never ranked)")
    return out


def cell_tag(status: str | None, note: str | None) -> str:
    """The caveat written after a value in a cell: ``too-few``, ``partial: 20 of 100
    images``, both (``partial: 20 of 100 images; too-few``: too-few is the headline
    status, the partial coverage must still show), or "" (``ok``, no value)."""
    from capaudit.metrics.present import status_tag

    if status not in ("too-few", "partial", "circular"):
        return ""
    return status_tag(status, (note or "").split("; "))
