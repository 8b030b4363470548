"""The N-avg and the ranking: normalise, average per criterion and profile, rank, and
summarise the ranking's bootstrap (rank intervals, first places, adjacent flips).

Every function works on values ``[..., sets, columns]``, so the same code scores
the point values and all bootstrap replicates at once.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from capaudit.leaderboard.columns import Column
from capaudit.metrics.base import CRITERIA as CRITERIA_ORDER

__all__ = ["FLIP_WARN", "normalise", "n_avg", "ranks_of", "rank_profile", "tied_ranks",
           "rank_label"]

FLIP_WARN = 0.05


def normalise(values: np.ndarray, higher: np.ndarray) -> np.ndarray:
    """Min-max across sets (axis -2 of [..., sets, columns]); lower-is-better inverted."""
    lo = np.nanmin(values, axis=-2, keepdims=True)
    hi = np.nanmax(values, axis=-2, keepdims=True)
    span = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(span > 0, (values - lo) / np.where(span > 0, span, 1), 0.5)
    return np.where(higher, z, 1 - z)


def n_avg(values: np.ndarray, columns: Sequence[Column], weights: Mapping[str, float]
          ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(profile score [..., sets], {criterion: score [..., sets]}) from values [..., sets, cols]."""
    higher = np.array([c.higher_is_better for c in columns])
    z = normalise(values, higher)
    crit: dict[str, np.ndarray] = {}
    for name in CRITERIA_ORDER:
        idx = [i for i, c in enumerate(columns) if c.criterion == name]
        if idx:
            crit[name] = z[..., idx].mean(axis=-1)
    used = {c: w for c, w in weights.items() if c in crit and w > 0}
    total = sum(used.values())
    score = sum(w * crit[c] for c, w in used.items()) / total if total else \
        np.full(values.shape[:-1], np.nan)
    return score, crit


def ranks_of(score: np.ndarray) -> np.ndarray:
    """1 = best, along the last axis (ties broken by set order)."""
    order = np.argsort(-score, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, score.shape[-1] + 1), axis=-1)
    return ranks


def rank_profile(values, reps, columns, weights, names) -> dict[str, Any]:
    """One profile's score, criterion scores and ranks; with the replicates ``reps`` also each
    set's rank interval, its share of first places and how often adjacent sets flip."""
    score, crit = n_avg(values, columns, weights)
    ranks = ranks_of(score)
    out: dict[str, Any] = {"weights": dict(weights), "score": score.tolist(),
                           "rank": ranks.tolist(),
                           "criteria": {k: v.tolist() for k, v in crit.items()},
                           # weighted criteria with no averaged column: the ranking omits them
                           "left_out": [c for c, w in weights.items() if w > 0 and c not in crit]}
    if reps is None or not len(reps):
        return out
    rs, _ = n_avg(reps, columns, weights)
    # equal scores share a rank in every resample (two copies of a set are never ordered)
    rr = 1 + (rs[..., None, :] > rs[..., :, None]).sum(axis=-1)
    out["rank_interval"] = [[int(np.quantile(rr[:, i], 0.025, method="lower")),
                             int(np.quantile(rr[:, i], 0.975, method="higher"))]
                            for i in range(len(names))]
    out["first_share"] = [float((rr[:, i] == 1).mean()) for i in range(len(names))]
    order = np.argsort(ranks)
    out["flips"] = [{"above": names[a], "below": names[b],
                     "share": float((rs[:, b] > rs[:, a]).mean())}
                    for a, b in zip(order[:-1], order[1:])]
    out["stable"] = all(f["share"] <= FLIP_WARN for f in out["flips"])
    out["tied_rank"] = tied_ranks(out["rank"], out["rank_interval"])
    return out


def tied_ranks(ranks: Sequence[int], intervals: Sequence[Sequence[int]]) -> list[int]:
    """The rank each set is shown with: walking the sets in rank order, a set whose rank
    interval overlaps one of the sets just above it (the group so far) shares their rank,
    so a board never names a winner, or an order, that the resamples do not settle. Ranks
    1-4 with intervals [1, 2], [1, 3], [3, 4], [5, 5] are shown =1, =1, =1, 4."""
    order = sorted(range(len(ranks)), key=lambda i: ranks[i])
    shown = [0] * len(ranks)
    top, reach = 0, -1          # the group's first rank and the worst rank its intervals reach
    for pos, i in enumerate(order):
        lo, hi = intervals[i]
        if pos == 0 or lo > reach:
            top, reach = pos + 1, hi
        else:
            reach = max(reach, hi)
        shown[i] = top
    return shown


def rank_label(profile: Mapping[str, Any], i: int) -> str:
    """A set's rank as shown: ``=1`` when it shares that rank (overlapping rank intervals),
    ``2`` when it holds it alone; the point rank when there is no bootstrap."""
    tied = profile.get("tied_rank")
    if not tied:
        return str(profile["rank"][i])
    shared = sum(1 for t in tied if t == tied[i]) > 1
    return f"={tied[i]}" if shared else str(tied[i])
