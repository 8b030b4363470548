"""N-avg leaderboard over caption sets, with a bootstrap of the whole ranking.

LOTUS ranks captioners by a *normalised average*: each metric min-max
normalised across the compared sets (1 = best set, 0 = worst; lower-is-better
metrics inverted), averaged within each criterion, then the criteria averaged
with a profile's weights. Here every step also runs on bootstrap resamples:

* **Joint resampling.** The sets describe the same images, so one resample of
  images (the union of the sets' images) is applied to every set at once: each
  set's per-image statistics (:class:`~capaudit.metrics.estimate.Estimate`)
  are lifted onto the union's units and all go through one
  :func:`~capaudit.audit.bootstrap.bootstrap_values` call. The whole N-avg and
  ranking is recomputed on each resample: a set's rank interval (2.5-97.5%),
  its share of first places, and for each pair adjacent in the ranking how often
  their order flips. A flip rate above 5% is reported as a warning.
* **Bias gaps.** For every metric, the value on images of men and of women (of
  light and dark skin) comes from the same statistics restricted to that group's
  images; the gap column is |a - b| (lower is better). ``gender_word_recall``
  and ``skin_tone_word_recall`` give LOTUS's |Rec_F - Rec_M| and |Rec_dark -
  Rec_light|. ``vocab`` (size-dependent) and ``recall_disparity`` (already a
  gap) have no gap column.
* **Missing metrics** (not computed for some set: no CLIP model, a judge metric
  not run), and metrics computed but with no value for some set (computed for no
  caption of it), drop out of the average for every set, with a note naming why:
  never a 0.5 standing in for a value. Equal values across sets normalise to 0.5.
* **n.** ``n`` holds the images each value rests on (a gap: its smaller group), shown
  beside every value in the terminal, the Markdown and the page.

The parts: :mod:`.units` (each set's estimates, lifted onto the union of the
sets' images), :mod:`.columns` (which metrics and gaps are averaged),
:mod:`.ranking` (the N-avg, the ranks and their bootstrap summary); this module
evaluates every column on every set and its resamples and assembles the board.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from capaudit.audit.bootstrap import bootstrap_values, interval
from capaudit.audit.engine import images_used, point_value
from capaudit.leaderboard.cells import cell_estimates, cell_table
from capaudit.leaderboard.columns import (DROPPED, GROUPINGS, NOTHING_RANKED, Column,
                                          board_columns, left_out_reasons)
from capaudit.leaderboard.profiles import Catalogue
from capaudit.leaderboard.ranking import FLIP_WARN, n_avg, normalise, rank_profile
from capaudit.leaderboard.status import cell_status, cell_tag, circular_columns, too_few_columns
from capaudit.leaderboard.units import ImageUnion, SetEval
from capaudit.metrics.base import CRITERIA as CRITERIA_ORDER
from capaudit.metrics.estimate import Estimate

# SetEval, Column, GROUPINGS, n_avg and normalise are imported from here by the runner and tests
__all__ = ["SetEval", "Leaderboard", "build_leaderboard", "n_avg", "GROUPINGS", "Column",
           "normalise"]


@dataclass
class Leaderboard:
    sets: list[str]
    columns: list[Column]
    values: np.ndarray                      # [sets, columns] point values
    n: np.ndarray                           # [sets, columns] images each value rests on
    ci: np.ndarray                          # [sets, columns, 2]
    groups: dict[str, dict[str, dict[str, Any]]]   # set -> column -> {group: value, n...}
    profiles: dict[str, dict[str, Any]]     # profile -> scores, ranks, intervals, flips
    notes: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    status: list[list[str]] = field(default_factory=list)        # [sets][columns] (.status)
    status_notes: list[list[str]] = field(default_factory=list)  # why, "" when ok
    # set -> column -> what stands behind a value ("hits: girl on ×2" for nsfw_words)
    cell_notes: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # the page writes each value in its metric's number format (vocab: a whole count)
        cols = [{**c.__dict__, "decimals": _decimals(c.metric)} for c in self.columns]
        return {"sets": self.sets, "columns": cols,
                "values": _nan_none(self.values), "ci": _nan_none(self.ci),
                "n": self.n.astype(int).tolist(),
                "status": self.status, "status_notes": self.status_notes,
                "tags": [[cell_tag(st, why) for st, why in zip(*row)]   # the page's caveats
                         for row in zip(self.status, self.status_notes)],
                "cell_notes": self.cell_notes,
                "groups": self.groups, "profiles": self.profiles, "notes": self.notes,
                "meta": self.meta}


def _nan_none(a: np.ndarray):
    return [(_nan_none(x) if isinstance(x, np.ndarray) else
             (None if x is None or np.isnan(x) else float(x))) for x in a]



def build_leaderboard(sets: Sequence[SetEval], cat: Catalogue, annotations,
                      n_boot: int = 1000, seed: int = 0, workers: int = 1,
                      profiles: Sequence[str] | None = None, intersections: bool = False,
                      min_n: int | None = None, partial: dict | None = None,
                      circular: dict | None = None, unranked: str | None = None) -> Leaderboard:
    """Values, gaps, criterion scores and profile rankings with their bootstrap.
    ``intersections``: also each metric on every gender x skin-tone cell, with its images;
    ``min_n`` / ``partial`` / ``circular``: each value's status (:mod:`.status`), too-few
    and circular ones unranked; ``unranked``: why no profile ranks the sets (each on its own
    images: ``audit leaderboard --all-images``), said first in the notes and ``meta``."""
    notes: list[str] = []
    columns = board_columns(sets, cat, annotations, notes)
    union = ImageUnion(sets)
    ests: dict[tuple, Estimate] = {}
    group_ns: dict[tuple, int] = {}
    masks = {(by, g): union.group_mask(getattr(annotations, by), g)
             for by, gs in GROUPINGS.items() if getattr(annotations, by, None) for g in gs}
    for s in sets:
        for c in columns:
            est = s.estimates[c.metric]
            if c.by is None:
                ests[(s.name, c.name, None)] = union.lift(s, est)
            else:
                for g in GROUPINGS[c.by]:
                    lifted = union.lift(s, est, masks[(c.by, g)])
                    ests[(s.name, c.name, g)] = lifted
                    group_ns[(s.name, c.name, g)] = int((lifted.stats[:, -1] > 0).sum())  # images
    if intersections:   # every gender x skin-tone cell, in the same joint resamples
        ests.update(cell_estimates(sets, columns, union, annotations))
    keyed = {"\t".join(map(str, k)): e for k, e in ests.items()}
    boots = bootstrap_values(keyed, union.n, n_boot, seed, workers) if n_boot > 0 else {}
    S, C = len(sets), len(columns)
    values = np.full((S, C), np.nan)
    n_img = np.zeros((S, C), np.int64)
    reps = np.full((max(n_boot, 0), S, C), np.nan)
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for i, s in enumerate(sets):
        for j, c in enumerate(columns):
            if c.by is None:
                e = ests[(s.name, c.name, None)]
                values[i, j] = _point(e)
                n_img[i, j] = images_used(s.estimates[c.metric])
                if boots:
                    reps[:, i, j] = boots["\t".join((s.name, c.name, "None"))]
                continue
            a, b = GROUPINGS[c.by]
            pa_, pb = _point(ests[(s.name, c.name, a)]), _point(ests[(s.name, c.name, b)])
            values[i, j] = abs(pa_ - pb)
            n_img[i, j] = min(group_ns[(s.name, c.name, a)], group_ns[(s.name, c.name, b)])
            info = {a: pa_, b: pb, f"n_{a}": group_ns[(s.name, c.name, a)],
                    f"n_{b}": group_ns[(s.name, c.name, b)], "signed_gap": pa_ - pb}
            if boots:
                ra = boots["\t".join((s.name, c.name, a))]
                rb = boots["\t".join((s.name, c.name, b))]
                reps[:, i, j] = np.abs(ra - rb)
                info["signed_ci"] = list(interval(ra - rb, pa_ - pb))
            groups.setdefault(s.name, {})[c.name] = info
    ci = _intervals(reps, values, [[ests.get((s.name, c.name, None)) for c in columns]
                                   for s in sets]) if boots else np.full((S, C, 2), np.nan)
    if intersections:
        cells = cell_table(ests, boots, min_n)
        for s in sets:
            groups.setdefault(s.name, {})["intersections"] = cells.get(s.name, {})
    names = [s.name for s in sets]
    status, why, keep = _statuses(names, columns, values, n_img, notes, min_n, partial, circular)
    ranked = [columns[j] for j in keep]
    prof_out = {p: rank_profile(values[:, keep], reps[..., keep] if boots else None, ranked,
                                 cat.weights(p), [s.name for s in sets])
                for p in (profiles or cat.profiles) if unranked is None}
    left_out = left_out_reasons(cat, columns, sets)
    for p, r in prof_out.items():
        r["left_out"] = {c: left_out.get(c, "no averaged metric") for c in r["left_out"]}
    notes += profile_notes(prof_out, names)
    return Leaderboard(names, columns, values, n_img, ci, groups, prof_out,
                       _board_notes(notes, unranked),
                       {"n_boot": n_boot, "seed": seed, "union_images": int(len(union.images)),
                        "catalogue": cat.source, "criteria_order": list(CRITERIA_ORDER),
                        "min_n": min_n, "unranked": unranked}, status, why,
                       _cell_notes(sets, columns))


def _board_notes(notes: list[str], unranked: str | None) -> list[str]:
    """The notes, the reason first when nothing is ranked (``--all-images``); then nothing is
    averaged, so which columns a ranking would drop from the average is beside the point."""
    if unranked is None:
        return list(dict.fromkeys(notes))
    return list(dict.fromkeys([unranked] + [n for n in notes if DROPPED not in n
                                            and not n.startswith(NOTHING_RANKED)]))


def _intervals(reps: np.ndarray, values: np.ndarray, ests: list[list]) -> np.ndarray:
    """[sets, columns, 2] 95% intervals of the values from their replicates (NaN: none)."""
    ci = np.full(values.shape + (2,), np.nan)
    for i, row in enumerate(ests):
        for j, e in enumerate(row):
            lo, hi = interval(reps[:, i, j], values[i, j], bool(e is not None and e.recentre))
            ci[i, j] = [np.nan if lo is None else lo, np.nan if hi is None else hi]
    return ci


def _statuses(names, columns, values, n_img, notes, min_n, partial, circular):
    """(status, notes, averaged columns): each cell's status (:mod:`.status`), and the
    columns the N-avg keeps (none with a too-few or circular value)."""
    status, why = cell_status(names, columns, values, n_img, min_n, partial, circular)
    keep = _averaged(columns, values, names, notes, {**too_few_columns(
        names, columns, status, n_img, min_n), **circular_columns(names, columns, status)})
    return status, why, keep


def _decimals(metric: str) -> int:
    """Decimal places of the metric's number format (``"{:,.0f}"`` -> 0; 2 by default)."""
    from capaudit.metrics.spec import number_format

    m = re.search(r"\.(\d+)f", number_format(metric))
    return int(m.group(1)) if m else 2


def _averaged(columns: Sequence[Column], values: np.ndarray, names: list[str],
              notes: list[str], too_few: dict[int, str] | None = None) -> list[int]:
    """Indices of the columns the N-avg uses: a column without a value for some set (a
    metric computed for none of its captions), or with a value resting on too few images
    (``too_few``: column -> note), is shown, left out and named in ``notes``."""
    keep = []
    for j, c in enumerate(columns):
        empty = [names[i] for i in range(len(names)) if np.isnan(values[i, j])]
        if j in (too_few or {}) and not empty:
            c.averaged = False
            notes.append(too_few[j])
        elif empty:
            c.averaged = False
            notes.append(f"{DROPPED}: {c.name} (no value for "
                         f"{', '.join(empty)}: computed for no caption)")
        else:
            keep.append(j)
    if columns and not keep:
        notes.append(f"{NOTHING_RANKED} no column has a value for every set on enough images "
                     "(the N-avg is empty, the ranks below are the sets' order)")
    return keep


def _cell_notes(sets: Sequence[SetEval], columns: Sequence[Column]) -> dict[str, dict[str, str]]:
    """What stands behind a value, shown beside it: the NSFW entries matched (and those set
    aside for want of context) with their counts, so a reviewer reads "tied up ×3"."""
    from capaudit.metrics.nsfw import hits_text

    out: dict[str, dict[str, str]] = {}
    for s in sets:
        for c in columns:
            if c.by is None and c.metric == "nsfw_words":
                text = hits_text(s.estimates[c.metric].extra)
                if text:
                    out.setdefault(s.name, {})[c.name] = text
    return out


def profile_notes(profiles: dict[str, dict[str, Any]], names: Sequence[str]) -> list[str]:
    """Per profile: the criteria its ranking leaves out and why, the sets shown tied (rank
    intervals overlap), and each adjacent pair that flips in more than 5% of resamples."""
    notes: list[str] = []
    for p, r in profiles.items():
        for crit, why in r.get("left_out", {}).items():
            notes.append(f"profile {p}: criterion {crit} left out of the ranking ({why})")
        tied = r.get("tied_rank") or []
        for rank in sorted(set(tied)):
            group = [names[i] for i in sorted(range(len(names)), key=lambda i: r["rank"][i])
                     if tied[i] == rank]
            if len(group) > 1:
                notes.append(f"profile {p}: {', '.join(group)} tied at rank {rank} (their rank "
                             "intervals overlap: the resamples do not order them)")
        for f in r.get("flips", []):
            if f["share"] > FLIP_WARN:
                notes.append(f"profile {p}: {f['above']} above {f['below']} flips in "
                             f"{100 * f['share']:.0f}% of resamples (the order is not settled)")
    return notes


def _point(e: Estimate) -> float:
    v = point_value(e)
    return np.nan if v is None else v
