"""Run the upstream audit on one caption set: records once, every metric, intervals.

Why an engine: the CLI, reports, filters and the store all need the same
thing -- "these captions of these images, with these annotations: every metric
with n and a 95% interval, plus one row per caption to query in DuckDB".

There is one path, the streaming one (:func:`audit_stream`): captions are
analysed a chunk at a time (:mod:`capaudit.text.records`, on ``workers``
processes); each registered metric's accumulator turns the chunk into its
mergeable state (:class:`~capaudit.metrics.stream.StreamStats`); at the
end every metric is finalized over the whole audit's images and all are
bootstrapped together. An in-memory audit (:func:`audit_captions`) is a
single chunk. Per-caption details (core columns plus each metric's declared
``details``) are built per chunk and handed to a sink. A metric whose
annotations are missing is returned with ``skipped`` set to the reason.

:func:`chair_words` reproduces the reference CHAIR script's per-caption word
lists (generated, ground-truth, hallucinated), for ``capaudit audit words``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from capaudit.audit.bootstrap import PARTS, bootstrap_intervals
from capaudit.metrics import default_metrics
from capaudit.metrics.category_pairs import category_lists
from capaudit.metrics.context import MetricContext
from capaudit.metrics.estimate import Estimate, MetricResult, SparseStats
from capaudit.metrics.spec import CORRECTED_SUFFIX, corrected_metrics
from capaudit.metrics.stream import StreamStats
from capaudit.io.annotation_files import Annotations
from capaudit.core.arrays import from_numpy, strings
from capaudit.text.gender import GENDER_NAMES
from capaudit.text.objects import get_lexicon
from capaudit.text.records import build_records
from capaudit.text.singularize import singularize, singularize_corrected
from capaudit.text.tokenize import tokenize_caption

__all__ = ["AuditResult", "audit_captions", "audit_stream", "accumulate", "finish_audit", "stream_results", "build_details",
           "chair_words"]

CHUNK_TEXT = 2 << 20  # caption characters analysed at a time at most (see accumulate)


@dataclass
class AuditResult:
    results: dict[str, MetricResult]
    details: pa.Table
    records: None = None  # kept for callers of the old in-memory path; records are not kept
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


def audit_captions(image_ids: Sequence[int | None], captions: Sequence[str],
                   annotations: Annotations | None, metrics: list[str] | None = None,
                   mode: str = "reference", n_boot: int = 1000, seed: int = 0, workers: int = 2,
                   min_images: int = 10, corrected: bool = False,
                   config: dict | None = None) -> AuditResult:
    """Audit one caption set held in memory: :func:`audit_stream` on a single chunk.

    ``corrected=True`` adds ``<metric>_corrected`` (object mentions in corrected
    mode) beside the ``mode`` values of every metric whose spec has ``corrected``.
    """
    if len(image_ids) != len(captions):
        from capaudit.errors import InputError
        raise InputError(f"{len(image_ids)} image ids for {len(captions)} captions")
    parts: list[pa.Table] = []
    res = audit_stream(zip(image_ids, captions), annotations, metrics, mode, n_boot, seed, workers,
                       min_images, chunk_size=max(len(captions), 1), details_sink=parts.append,
                       corrected=corrected, config=config)
    if parts:
        res.details = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    res.meta.pop("streamed", None)
    res.meta.pop("chunk_size", None)
    return res


def audit_stream(rows: Iterable[tuple[int | None, str]], annotations: Annotations | None,
                 metrics: list[str] | None = None, mode: str = "reference", n_boot: int = 1000,
                 seed: int = 0, workers: int = 2, min_images: int = 10,
                 chunk_size: int = 50_000, details_sink: Callable[[pa.Table], Any] | None = None,
                 corrected: bool = False,
                 on_progress: Callable[[int], Any] | None = None,
                 config: dict | None = None) -> AuditResult:
    """Audit an iterable of ``(image_id, caption)``, ``chunk_size`` captions at a time.

    Of each chunk only the metrics' mergeable states are kept (per-image
    sufficient statistics, the vocabulary, counters), so memory is bounded by
    the number of images and the vocabulary, not by the number of captions.
    Values and intervals do not depend on ``chunk_size``.

    Per-caption details: each chunk's table (:func:`build_details`, with
    ``caption_index`` counted over the whole stream) is passed to
    ``details_sink`` and dropped. Without a sink no details are built: the
    returned :class:`AuditResult` then has an empty ``details`` table (same
    columns). ``on_progress(n)`` is called after each chunk with its captions.
    ``config`` (the resolved audit settings) is given to every metric's context.
    """
    acc, acc2 = accumulate(rows, annotations, metrics, mode, workers, min_images, chunk_size,
                           details_sink, corrected, on_progress, config)
    res = finish_audit(acc, acc2, n_boot, seed, workers)
    res.meta["chunk_size"] = chunk_size
    return res


def finish_audit(acc: StreamStats, acc2: StreamStats | None, n_boot: int, seed: int,
                 workers: int) -> AuditResult:
    """The :class:`AuditResult` of merged states (one chunk's, a file's or many shards')."""
    results, units = stream_results(acc, n_boot, seed, workers)
    if acc2 is not None:
        results.update(stream_results(acc2, n_boot, seed, workers, CORRECTED_SUFFIX)[0])
    empty = MetricContext(build_records([], mode=acc.mode, workers=1), np.zeros(0, np.int64),
                          acc.annotations, acc.min_images, captions=[], config=acc.config)
    return AuditResult(results, build_details(empty, acc), None,
                       {"mode": acc.mode, "n_boot": n_boot, "seed": seed,
                        "n_captions": acc.n_captions, "n_images": units.n_images,
                        "streamed": True})


def accumulate(rows: Iterable[tuple[int | None, str]], annotations: Annotations | None,
               metrics: list[str] | None = None, mode: str = "reference", workers: int = 2,
               min_images: int = 10, chunk_size: int = 50_000,
               details_sink: Callable[[pa.Table], Any] | None = None, corrected: bool = False,
               on_progress: Callable[[int], Any] | None = None, config: dict | None = None,
               offset: int = 0) -> tuple[StreamStats, StreamStats | None]:
    """The mergeable states of ``rows`` (the ``mode`` one, and the corrected-mode one when
    ``corrected``), ``chunk_size`` captions at a time, without finalizing.

    A chunk also ends at :data:`CHUNK_TEXT` characters of captions: what analysing a chunk
    holds grows with its text (about 5 bytes per character), so 50,000 captions of
    ShareGPT4V length held ~200 MB more than 50,000 COCO ones (#24). At 4 M characters the
    chunk was still the part of an 810k-caption audit's peak that a 40k one lacks (~20 MB
    of it); at 2 M a 40k file of short captions is still one chunk. Values do not depend
    on where chunks end.

    ``offset`` numbers the first caption (captions without an image are units
    ``-(offset + index + 1)``): disjoint parts of one audit (shards) take
    disjoint offset ranges so their states merge (:meth:`StreamStats.merge`).
    """
    names = list(metrics or default_metrics())
    acc = StreamStats(names, mode, annotations, min_images, config)   # unknown names fail here
    extra = corrected_metrics(names) if corrected and mode == "reference" else []
    acc2 = StreamStats(extra, "corrected", annotations, min_images, config) if extra else None
    batch_ids: list[int | None] = []
    batch: list[str] = []
    done, text = offset, 0
    vocabulary = any(m.vocabulary for m in [*acc.metrics.values(), *(acc2.metrics.values()
                                                                     if acc2 else [])])

    def flush():
        nonlocal done, text
        ids = image_id_array(batch_ids)
        records = build_records(batch, mode=mode, workers=workers, vocabulary=vocabulary)
        ctx = MetricContext(records, ids, annotations, min_images, offset=done, captions=batch,
                            config=config)
        acc.add(ctx)
        if details_sink is not None:
            details_sink(build_details(ctx, acc))
        del ctx, records
        if acc2 is not None:
            rec2 = build_records(batch, mode="corrected", workers=workers, vocabulary=vocabulary)
            acc2.add(MetricContext(rec2, ids, annotations, min_images, offset=done,
                                   captions=batch, config=config))
        done += len(batch)
        if on_progress is not None:
            on_progress(len(batch))
        batch_ids.clear()
        batch.clear()
        text = 0

    for iid, cap in rows:
        batch_ids.append(iid)
        batch.append(cap)
        text += len(cap) if isinstance(cap, str) else 0
        if len(batch) >= chunk_size or text >= CHUNK_TEXT:
            flush()
    if batch:
        flush()
    # the batches' Arrow buffers stay in pyarrow's pool after the stream: ~17 MB at 810k
    # captions that the bootstrap's numpy blocks cannot reuse (#24, peak memory)
    pa.default_memory_pool().release_unused()
    return acc, acc2


def stream_results(acc: StreamStats, n_boot: int, seed: int, workers: int, suffix: str = ""):
    """``({name + suffix: MetricResult}, units)``: finalize every metric, bootstrap them
    together over the units, in the order the metrics were asked for."""
    ests, skipped, units = acc.estimates()
    estimates = {name + suffix: est for name, est in ests.items()}
    method, used = acc.config.get("bootstrap", "exact"), {}
    cis = bootstrap_intervals(estimates, units.n, n_boot, seed, workers=workers, keys=units.keys,
                              method=method, used=used)
    results: dict[str, MetricResult] = {}
    for name in acc.metrics:
        if name in skipped:
            results[name + suffix] = MetricResult(None, 0, extra={}, skipped=skipped[name])
            continue
        est = estimates[name + suffix]
        results[name + suffix] = MetricResult(point_value(est), est.n, *cis[name + suffix],
                                              extra=dict(est.extra, mode=acc.mode,
                                                         bootstrap=used[name + suffix]),
                                              n_images=images_used(est))
        if name + suffix + PARTS in cis:   # intervals of the sub-values (Estimate.parts)
            results[name + suffix].extra["parts_ci"] = cis[name + suffix + PARTS]
    return results, units


def images_used(est) -> int:
    """Images (bootstrap units) a value rests on: those with a non-zero statistic (an image
    without a labelled gender adds nothing to the gender error); every unit for a value
    that is no sum of per-image statistics (the vocabulary)."""
    stats = est.stats
    if isinstance(stats, SparseStats):
        return int(len(np.unique(stats.units[stats.vals != 0])))
    stats = np.asarray(stats)
    if stats.ndim != 2 or stats.shape[1] == 0:
        return int(len(stats))
    return int(np.count_nonzero(np.any(stats != 0, axis=1)))


def build_details(ctx: MetricContext, acc: StreamStats) -> pa.Table:
    """One row per caption: what every metric saw (for DuckDB queries).

    Core columns, then each metric's declared ``details`` columns (nulls when
    the metric is skipped).
    """
    rec, n = ctx.records, len(ctx.records)
    caps, cats = ctx.mentioned_pairs
    cols: dict[str, Any] = {
        "caption_index": from_numpy(ctx.offset + np.arange(n, dtype=np.int64)),
        "image_id": from_numpy(ctx.caption_image, valid=ctx.has_image),
        "n_tokens": from_numpy(rec.n_tokens),
        "n_sentences": from_numpy(rec.n_sentences),
        "mentioned": category_lists(caps, cats, n, ctx.categories),
        "gender": pa.DictionaryArray.from_arrays(from_numpy(rec.gender.astype(np.int8)),
                                                 strings(list(GENDER_NAMES))),
    }
    for name, metric in acc.metrics.items():
        got = {} if name in acc.skipped else metric.caption_details(ctx)
        for col, typ in type(metric).details.items():
            cols[col] = got[col] if col in got else pa.nulls(n, typ)
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
