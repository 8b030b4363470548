"""Run the upstream audit on one caption set: records once, every metric, intervals.

Why an engine: the CLI, reports, filters and the store all need the same
thing -- "these captions of these images, with these annotations: every metric
with n and a 95% interval, plus one row per caption to query in DuckDB". The
engine builds the per-caption records once (:mod:`capaudit.text.records`,
on ``workers`` processes), runs each registered metric as a pure function of
them, bootstraps all metrics together over images, and assembles a pyarrow
table of per-caption details. A metric whose annotations are missing is
returned with ``skipped`` set to the reason instead of failing the run.

:func:`chair_words` reproduces the reference CHAIR script's per-caption word
lists (generated, ground-truth, hallucinated), for ``capaudit audit words``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from capaudit.audit.bootstrap import bootstrap_intervals
from capaudit.audit.metrics import DEFAULT_METRICS, METRICS
from capaudit.audit.metrics.base import Estimate, MetricContext, MetricResult, MetricSkipped
from capaudit.audit.metrics.chair import caption_hallucinated
from capaudit.audit.metrics.recall import caption_recall
from capaudit.io.annotations import Annotations
from capaudit.text.gender import GENDER_NAMES
from capaudit.text.objects import get_lexicon
from capaudit.text.records import CaptionRecords, build_records
from capaudit.text.singularize import singularize, singularize_corrected
from capaudit.text.tokenize import tokenize_caption

__all__ = ["AuditResult", "audit_captions", "audit_stream", "audit_records", "chair_words",
           "CORRECTED_METRICS"]

CORRECTED_METRICS = ("chair_s", "chair_i", "recall")


@dataclass
class AuditResult:
    results: dict[str, MetricResult]
    details: pa.Table
    records: CaptionRecords | None  # None from audit_stream (records are not kept)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def skipped(self) -> dict[str, str]:
        return {k: r.skipped for k, r in self.results.items() if r.skipped}

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {k: r.to_dict() for k, r in self.results.items()}


def image_id_array(image_ids: Sequence[int | None]) -> np.ndarray:
    """Image ids as int64, ``-1`` for a caption without one (its own bootstrap unit)."""
    return np.fromiter((-1 if i is None else int(i) for i in image_ids), np.int64, len(image_ids))


def point_value(est: Estimate) -> float | None:
    """The metric's value on the whole sample (``None`` when undefined, e.g. 0/0)."""
    value = est.value if est.value is not None else float(est.finalize(est.stats.sum(axis=0)))
    return None if value is None or np.isnan(value) else float(value)


def audit_records(records: CaptionRecords, image_ids: Sequence[int | None] | np.ndarray,
                  annotations: Annotations | None, metrics: list[str] | None = None,
                  n_boot: int = 1000, seed: int = 0, min_images: int = 10,
                  suffix: str = "", workers: int = 1) -> tuple[dict[str, MetricResult], MetricContext]:
    """Metrics (with intervals) over already-built records."""
    ids = image_ids if isinstance(image_ids, np.ndarray) else image_id_array(image_ids)
    if len(ids) != len(records):
        from capaudit.errors import InputError
        raise InputError(f"{len(ids)} image ids for {len(records)} captions")
    ctx = MetricContext(records, ids, annotations, min_images)
    estimates: dict[str, Estimate] = {}
    results: dict[str, MetricResult] = {}
    for name in metrics or DEFAULT_METRICS:
        fn = METRICS.get(name)
        try:
            est = fn(ctx)
        except MetricSkipped as exc:
            results[name + suffix] = MetricResult(None, 0, extra={}, skipped=str(exc))
            continue
        estimates[name + suffix] = est
    cis = bootstrap_intervals(estimates, ctx.n_units, n_boot, seed, workers=workers)
    for name, est in estimates.items():
        value = point_value(est)
        extra = dict(est.extra, mode=records.mode)
        results[name] = MetricResult(value, est.n, *cis[name], extra=extra)
    return results, ctx


def audit_captions(image_ids: Sequence[int | None], captions: Sequence[str],
                   annotations: Annotations | None, metrics: list[str] | None = None,
                   mode: str = "reference", n_boot: int = 1000, seed: int = 0, workers: int = 2,
                   min_images: int = 10, corrected: bool = False) -> AuditResult:
    """Audit one caption set.

    ``corrected=True`` adds ``chair_s_corrected``, ``chair_i_corrected`` and
    ``recall_corrected`` (object mentions in corrected mode) beside the
    ``mode`` values.
    """
    if len(image_ids) != len(captions):
        from capaudit.errors import InputError
        raise InputError(f"{len(image_ids)} image ids for {len(captions)} captions")
    captions = list(captions)
    ids = image_id_array(image_ids)
    records = build_records(captions, mode=mode, workers=workers)
    results, ctx = audit_records(records, ids, annotations, metrics, n_boot, seed, min_images,
                                 workers=workers)
    if corrected and mode != "corrected":
        wanted = [m for m in (metrics or DEFAULT_METRICS) if m in CORRECTED_METRICS]
        if wanted:
            rec2 = build_records(captions, mode="corrected", workers=workers)
            res2, _ = audit_records(rec2, ids, annotations, wanted, n_boot, seed, min_images,
                                    suffix="_corrected", workers=workers)
            results.update(res2)
    return AuditResult(results, build_details(ctx), records,
                       {"mode": mode, "n_boot": n_boot, "seed": seed, "n_captions": len(captions),
                        "n_images": int(len(ctx.images))})


def audit_stream(rows: Iterable[tuple[int | None, str]], annotations: Annotations | None,
                 metrics: list[str] | None = None, mode: str = "reference", n_boot: int = 1000,
                 seed: int = 0, workers: int = 2, min_images: int = 10,
                 chunk_size: int = 50_000, details_sink: Callable[[pa.Table], Any] | None = None,
                 corrected: bool = False,
                 on_progress: Callable[[int], Any] | None = None) -> AuditResult:
    """Like :func:`audit_captions` for an iterable of ``(image_id, caption)`` too big to hold.

    Captions are analysed ``chunk_size`` at a time; of each chunk only what the
    metrics need is kept (:class:`~capaudit.audit.metrics.stream.StreamStats`:
    per-image sufficient statistics merged by image id, the vocabulary,
    counters), so memory is bounded by the number of images and the
    vocabulary, not by the number of captions. Values and intervals are
    identical to :func:`audit_captions` on the same input and seed.

    Per-caption details: each chunk's table (as :func:`build_details`, with
    ``caption_index`` counted over the whole stream) is passed to
    ``details_sink`` and dropped. Without a sink no details are built: the
    returned :class:`AuditResult` then has an empty ``details`` table (same
    columns). ``records`` is always ``None`` (they are not kept).
    ``on_progress(n)`` is called after each chunk with the captions it held.
    """
    from capaudit.audit.metrics.stream import StreamStats

    names = list(metrics or DEFAULT_METRICS)
    for name in names:
        METRICS.get(name)  # unknown names fail before any work
    extra = [m for m in names if m in CORRECTED_METRICS] if corrected and mode != "corrected" else []
    acc = StreamStats(mode, annotations, min_images)
    acc2 = StreamStats("corrected", annotations, min_images) if extra else None
    batch_ids: list[int | None] = []
    batch: list[str] = []
    done = 0

    def flush():
        nonlocal done
        ids = image_id_array(batch_ids)
        records = build_records(batch, mode=mode, workers=workers)
        ctx = MetricContext(records, ids, annotations, min_images)
        acc.add(records, ctx)
        if details_sink is not None:
            tbl = build_details(ctx)
            tbl = tbl.set_column(0, "caption_index",
                                 pa.array(np.arange(done, done + len(records), dtype=np.int64)))
            details_sink(tbl)
        del ctx, records
        if acc2 is not None:
            rec2 = build_records(batch, mode="corrected", workers=workers)
            acc2.add(rec2, MetricContext(rec2, ids, annotations, min_images))
        done += len(batch)
        if on_progress is not None:
            on_progress(len(batch))
        batch.clear()
        batch_ids.clear()

    for iid, cap in rows:
        batch_ids.append(iid)
        batch.append(cap)
        if len(batch) >= chunk_size:
            flush()
    if batch:
        flush()
    results = _stream_results(acc, names, n_boot, seed, workers, "")
    if acc2 is not None:
        results.update(_stream_results(acc2, extra, n_boot, seed, workers, "_corrected"))
    empty = build_details(MetricContext(build_records([], mode=mode, workers=1),
                                        np.zeros(0, np.int64), annotations, min_images))
    return AuditResult(results, empty, None,
                       {"mode": mode, "n_boot": n_boot, "seed": seed, "n_captions": acc.n_captions,
                        "n_images": int(sum(1 for i in acc.slot_image if i >= 0)),
                        "streamed": True, "chunk_size": chunk_size})


def _stream_results(acc, names: list[str], n_boot: int, seed: int, workers: int,
                    suffix: str) -> dict[str, MetricResult]:
    """Intervals and results from streamed statistics, as :func:`audit_records` does."""
    ests, skipped, n_units = acc.estimates(names)
    results: dict[str, MetricResult] = {}
    for name in names:
        if name in skipped:
            results[name + suffix] = MetricResult(None, 0, extra={}, skipped=skipped[name])
    estimates = {name + suffix: est for name, est in ests.items()}
    cis = bootstrap_intervals(estimates, n_units, n_boot, seed, workers=workers)
    for name, est in estimates.items():
        results[name] = MetricResult(point_value(est), est.n, *cis[name],
                                     extra=dict(est.extra, mode=acc.mode))
    return results


def _list_column(caps: np.ndarray, cats: np.ndarray, n: int, names: list[str]) -> pa.Array:
    offsets = np.searchsorted(caps, np.arange(n + 1)).astype(np.int32)
    values = pa.DictionaryArray.from_arrays(pa.array(cats.astype(np.int32)), pa.array(names))
    return pa.ListArray.from_arrays(pa.array(offsets), values.cast(pa.string()))


def build_details(ctx: MetricContext) -> pa.Table:
    """One row per caption: what every metric saw (for DuckDB queries)."""
    rec, n = ctx.records, len(ctx.records)
    caps, cats = ctx.mentioned_pairs
    cols: dict[str, Any] = {
        "caption_index": pa.array(np.arange(n, dtype=np.int64)),
        "image_id": pa.array(ctx.caption_image, mask=~ctx.has_image),
        "n_tokens": pa.array(rec.n_tokens),
        "n_sentences": pa.array(rec.n_sentences),
        "mentioned": _list_column(caps, cats, n, ctx.categories),
    }
    try:
        h = ctx.hallucinated
        hk = np.unique(ctx.mention_caption[h] * ctx.n_cat + rec.m_cat[h])
        cols["hallucinated"] = _list_column(hk // ctx.n_cat, hk % ctx.n_cat, n, ctx.categories)
        cols["chair_s"] = pa.array(caption_hallucinated(ctx), mask=~ctx.has_image)
    except MetricSkipped:
        cols["hallucinated"] = pa.nulls(n, pa.list_(pa.string()))
        cols["chair_s"] = pa.nulls(n, pa.bool_())
    cols["gender"] = pa.DictionaryArray.from_arrays(pa.array(rec.gender.astype(np.int8)),
                                                    pa.array(list(GENDER_NAMES)))
    try:
        r = caption_recall(ctx)
        cols["recall"] = pa.array(r, mask=np.isnan(r))
    except MetricSkipped:
        cols["recall"] = pa.nulls(n, pa.float64())
    return pa.table(cols)


def chair_words(captions: Sequence[str], image_ids: Sequence[int],
                chair_gt: Mapping[int, frozenset[str]] | Mapping[int, set[str]],
                mode: str = "reference") -> list[dict[str, Any]]:
    """Per caption, the reference CHAIR script's word lists.

    ``mscoco_generated_words``: category of every mention, in caption order;
    ``mscoco_gt_words``: the image's ground truth; ``mscoco_hallucinated_words``:
    ``[word, category]`` for mentions not in it; ``words``: the singularized
    tokens after the double-word merge; ``metrics``: per-caption CHAIRs,
    CHAIRi and the script's Recall (ground-truth coverage).
    """
    lex = get_lexicon(mode)
    sg = singularize if mode == "reference" else singularize_corrected
    out = []
    for cap, iid in zip(captions, image_ids):
        sents, _ = tokenize_caption(cap)
        sing = [sg(t) for s in sents for t in s]
        found = lex.find(sing)
        gt = set(chair_gt.get(iid, ()))
        gen = [lex.categories[c] for _, c, _ in found]
        hall = [[lex.words[w], lex.categories[c]] for w, c, _ in found if lex.categories[c] not in gt]
        covered = {g for g in gen if g in gt}
        out.append({
            "image_id": iid, "caption": cap,
            "mscoco_hallucinated_words": hall,
            "mscoco_gt_words": sorted(gt),
            "mscoco_generated_words": gen,
            "hallucination_idxs": [t for w, c, t in found if lex.categories[c] not in gt],
            "words": [w for w, _ in lex.merge_words(sing)],
            "metrics": {"CHAIRs": int(bool(hall)),
                        "CHAIRi": len(hall) / len(gen) if gen else 0.0,
                        "Recall": len(covered) / len(gt) if gt else 0.0},
        })
    return out
