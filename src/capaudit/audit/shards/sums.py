"""Replicate sums per shard: a sharded audit's driver memory independent of the image count.

Why: the hashed Poisson bootstrap (:func:`capaudit.audit.bootstrap.poisson_counts`)
weights every unit by a pure function of ``(seed, unit, replicate)``, so the
replicate sums of a sum-type metric are the sums over shards of each shard's
own replicate sums. Merging the shards' per-image states first (what the driver
otherwise does) costs memory linear in the images (~0.2 KB each with the text
metrics); here each shard turns its saved state into ``[replicates, k]`` sums
(one task per shard, on the same executor) and the driver adds those.

When (:func:`sums_plan`): the bootstrap resolves to ``poisson`` (``auto`` from
``POISSON_MIN_UNITS`` units up) and the shards' image-id ranges do not overlap,
so no image has captions in two shards (img2dataset and DataComp shards
partition their images; ids of captions without one never overlap). Then the
unit count is the sum of the shards' and a caption without an image id hashes
the same position of the bootstrap order as in the per-image merge
(``2**62 + images + its rank``): the values equal the per-image path's up to
the order of floating-point additions (``tests/test_shard_sums.py``).

What (:func:`shard_sums`): a metric whose state is a
:class:`~capaudit.metrics.state.UnitSums` (every ratio-of-sums metric:
CHAIR, recall, length, gender error, the per-caption means) gives its point
column sums, replicate sums, ``n``, raw column sums and totals; the vocabulary
gives its state with each rare token's units as hash keys (a token table, not
a per-image array; past 5M tokens a sketch). Any other state (the recall
disparity's category selection, retrieval ranks, a plugin's) makes the driver
fall back to the per-image merge, and ``meta["merge"]`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capaudit.audit.bootstrap import block_sizes, choose_method, interval, poisson_counts

__all__ = ["SumsJob", "sums_plan", "shard_sums", "finish_sums"]

NOID_BASE = np.int64(1 << 62)   # as bootstrap.unit_hash_keys: no-id units hash past every id


@dataclass
class SumsJob:
    task: object          # the shard's ShardTask (its state file)
    n_images: int         # image ids of the whole audit
    noid_prefix: int      # captions without an image id in the shards before this one
    n_boot: int
    seed: int


def sums_plan(cfg: dict, parts: list[dict]) -> tuple[dict | None, str]:
    """``({"n_units", "n_images", "prefix": [...]}, why)``; ``None`` for the per-image merge."""
    n_units = sum(p["units"] for p in parts)
    if choose_method(cfg.get("bootstrap", "auto"), n_units) != "poisson" or cfg["n_boot"] <= 0:
        return None, "per-image states (exact bootstrap)"
    ranges = sorted((p["id_min"], p["id_max"]) for p in parts if p.get("id_min") is not None)
    if any(b[0] <= a[1] for a, b in zip(ranges, ranges[1:])):
        return None, "per-image states (image ids of two shards overlap)"
    noid = np.cumsum([0] + [p["units"] - p["unit_images"] for p in parts])[:-1]
    return {"n_units": n_units, "n_images": sum(p["unit_images"] for p in parts),
            "prefix": [int(x) for x in noid]}, "replicate sums per shard"


def _hash_keys(units, job: SumsJob) -> np.ndarray:
    pos = np.arange(units.n, dtype=np.int64) - units.n_images + job.noid_prefix + job.n_images
    return np.where(units.keys >= 0, units.keys, NOID_BASE + pos).astype(np.uint64)


def _replicate_sums(stats: list, hk: np.ndarray, n_boot: int, seed: int) -> list[np.ndarray]:
    """``[replicates, k]`` sums of each dense array or :class:`SparseStats` in ``stats``."""
    out = [np.zeros((n_boot, s.shape[1])) for s in stats]
    start = 0
    for b in block_sizes(len(hk), n_boot):
        counts = poisson_counts(hk, np.arange(start, start + b), seed)
        for o, s in zip(out, stats):
            o[start:start + b] = counts @ s if isinstance(s, np.ndarray) else \
                s.resampled_sums(counts)
        start += b
    return out


def _disparity_parts(state, units) -> tuple:
    """The recall disparity's statistics over *all* categories ([units, 4C]) and images per
    gender ([2, C]): sums over disjoint shards; the driver selects the categories."""
    from capaudit.metrics.recall_disparity import disparity_stats, images_by_gender

    ctx = units.context
    inst, _ = ctx.instances
    g = ctx.image_gender
    stats = disparity_stats(inst, g, units.n_caps.copy(), units.index(state.keys), state.cols,
                            state.vals, units.n, np.arange(inst.shape[1]))
    return stats, images_by_gender(inst, g)


def acc_sums(acc, job: SumsJob) -> dict:
    """One shard's ``StreamStats`` as replicate sums (``{"unsupported": name}`` if it cannot)."""
    from capaudit.audit.engine import images_used
    from capaudit.metrics.base import MetricSkipped
    from capaudit.metrics.diversity import Vocabulary
    from capaudit.metrics.recall_disparity import RecallDisparity
    from capaudit.metrics.state import UnitSums

    units = acc.unit_table()
    hk = _hash_keys(units, job)
    out: dict = {"skipped": dict(acc.skipped), "n_captions": acc.n_captions, "metrics": {}}
    dense: dict[str, tuple] = {}
    for name, metric in acc.metrics.items():
        state = acc.states.get(name)
        if name in acc.skipped or state is None:
            continue
        if isinstance(state, Vocabulary):
            if state.sketch is None:
                pos = {t: units.index(np.asarray(p, np.int64)) for t, p in state.postings.items()}
                state.postings = {t: hk[p].astype(np.int64).tolist() for t, p in pos.items()}
            out["metrics"][name] = {"vocab": state}
            continue
        try:
            if isinstance(metric, RecallDisparity):
                stats, n_img = _disparity_parts(state, units)
                dense[name] = (stats, {"n": int(state.totals["n"]), "n_img": n_img,
                                       "n_images": images_used(_Stats(stats))})
                continue
            if not isinstance(state, UnitSums):
                return {"unsupported": name}
            est = metric.finalize(state, units)
        except MetricSkipped as exc:
            out["skipped"][name] = str(exc)
            continue
        if est.boot is not None or est.value is not None or not isinstance(est.stats, np.ndarray):
            return {"unsupported": name}
        dense[name] = (np.asarray(est.stats, np.float64), {
            "n": est.n, "raw": state.values.sum(axis=0), "totals": state.totals,
            "n_images": images_used(est)})   # shards hold disjoint images: counts add
    reps = _replicate_sums([d[0] for d in dense.values()], hk, job.n_boot, job.seed)
    for (name, (stats, rest)), rep in zip(dense.items(), reps):
        out["metrics"][name] = {"point": stats.sum(axis=0), "reps": rep, **rest}
    return out


@dataclass
class _Stats:
    """An estimate-shaped holder of per-unit statistics (for :func:`images_used`)."""

    stats: object


def shard_sums(job: SumsJob) -> dict:
    """The executor's second pass over one shard: its saved state as replicate sums."""
    from capaudit.audit.shards.task import load_task_state

    acc, acc2 = load_task_state(job.task)
    return {"acc": acc_sums(acc, job), "acc2": acc_sums(acc2, job) if acc2 is not None else None}


def _merge_into(total: dict, part: dict) -> None:
    from capaudit.metrics.state import _add_totals

    total["n_captions"] += part["n_captions"]
    total["skipped"].update(part["skipped"])
    for name, m in part["metrics"].items():
        have = total["metrics"].get(name)
        if have is None:
            total["metrics"][name] = m
        elif "vocab" in m:
            have["vocab"] = have["vocab"].merge(m["vocab"])
        else:
            for k in ("point", "reps", "raw", "n_img", "n_images"):
                if k in m:
                    have[k] = have[k] + m[k]
            have["n"] += m["n"]
            if "totals" in m:
                have["totals"] = _add_totals(have["totals"], m["totals"])


def _vocab_result(state, n_units: int, n_boot: int, seed: int):
    from capaudit.metrics.diversity import sketch_estimate, vocab_estimate

    if state.sketch is not None:
        est = sketch_estimate(state.sketch.estimate(), n_units, state.n)
        return est, est.spread(n_boot)
    # rare tokens' units (hash keys) as positions in the distinct units using rare tokens
    lists = [np.asarray(p, np.int64) for p in state.postings.values()]
    uniq, inv = np.unique(np.concatenate(lists) if lists else np.zeros(0, np.int64),
                          return_inverse=True)
    cuts = np.cumsum([len(p) for p in lists], dtype=np.int64)[:-1]
    unit_lists = [np.unique(x) for x in np.split(inv, cuts)] if lists else []
    est = vocab_estimate(len(state.token_counts), unit_lists, len(uniq), state.n)
    sizes = block_sizes(len(uniq), n_boot)
    starts = np.cumsum([0] + sizes[:-1])
    vals = [est.boot(poisson_counts(uniq.astype(np.uint64), np.arange(a, a + b), seed))
            for a, b in zip(starts, sizes)]
    return est, np.concatenate(vals)


def finish_sums(parts: list[dict], acc, plan: dict, n_boot: int, seed: int,
                suffix: str = "") -> dict:
    """``{name + suffix: MetricResult}`` from the shards' replicate sums, in shard order."""
    from capaudit.audit.engine import point_value
    from capaudit.metrics.base import MetricResult, MetricSkipped
    from capaudit.metrics.state import UnitSums, Units

    total = {"n_captions": 0, "skipped": dict(acc.skipped), "metrics": {}}
    for part in parts:
        _merge_into(total, part)
    one = UnitSums(np.array([-1], np.int64), np.ones((1, 1)))
    pseudo_units = Units(one, acc.mode, acc.annotations, acc.min_images, acc.config)
    results = {}
    for name, metric in acc.metrics.items():
        m, why = total["metrics"].get(name), total["skipped"].get(name)
        try:
            if why:
                raise MetricSkipped(why)
            n_images = None if m is None else m.get("n_images")
            if m is not None and "vocab" in m:
                est, vals = _vocab_result(m["vocab"], plan["n_units"], n_boot, seed)
                value, n, n_images = point_value(est), est.n, plan["n_units"]
            elif m is not None and "n_img" in m:
                est, vals = _disparity_result(m, pseudo_units.context.categories, acc.min_images)
                value, n = point_value(est), m["n"]
            else:
                state = metric.update(_empty(acc)) if m is None else \
                    UnitSums(one.keys, m["raw"][None, :], m["totals"])
                est = metric.finalize(state, pseudo_units)   # extra, finalize function
                value, n = (None, 0) if m is None else (point_value(_with(est, m["point"])), m["n"])
                vals = np.asarray(est.finalize(m["reps"]), np.float64) if m else np.full(n_boot, np.nan)
        except MetricSkipped as exc:
            results[name + suffix] = MetricResult(None, 0, extra={}, skipped=str(exc))
            continue
        lo, hi = interval(vals, value, est.recentre)
        results[name + suffix] = MetricResult(value, n, lo, hi, extra=dict(
            est.extra, mode=acc.mode, bootstrap="poisson"), n_images=n_images)
    return results


def _disparity_result(m: dict, categories: list[str], min_images: int):
    """``(estimate, replicate values)`` of the recall disparity from summed all-category
    statistics: the categories are chosen on the merged image counts, as on the whole
    sample."""
    from capaudit.audit.bootstrap import part_intervals
    from capaudit.metrics.base import Estimate
    from capaudit.metrics.recall_disparity import (
        below_min_images,
        category_diffs,
        disparity_fin,
        disparity_table,
        kept_categories,
        kept_columns,
    )

    keep = kept_categories(m["n_img"], min_images)
    cols = kept_columns(keep, len(categories))
    point = m["point"][cols]
    fin = disparity_fin(len(keep))
    reps = m["reps"][:, cols]
    est = Estimate(point[None, :], fin, m["n"],
                   {"m": len(keep), "min_images": min_images,
                    "per_category": disparity_table(categories, keep, m["n_img"], point),
                    "below_min_images": below_min_images(categories, keep, m["n_img"]),
                    "parts_ci": part_intervals(category_diffs(len(keep))(reps))},
                   recentre=True)
    return est, fin(reps)


def _with(est, point: np.ndarray):
    est.stats = point[None, :]
    return est


def _empty(acc):
    from capaudit.metrics.stream import _empty_context

    return _empty_context(acc)
