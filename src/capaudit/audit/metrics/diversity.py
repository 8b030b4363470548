"""Vocabulary diversity and caption length.

``vocab``: distinct lowercased word tokens over all captions (NLTK tokens,
punctuation included, no sentence split -- the reference's numbers).
``length``: mean tokens per caption, a ratio of sums (tokens, captions) per image.

Vocabulary is not a sum over images, so its bootstrap is custom: a token is in
a resample iff one of the images using it is drawn. Tokens used by more than
``POSTING_CAP`` (64) captions are treated as always present -- with at least
13 images (5 captions each at most in COCO) the chance that a resample misses
all of them is below (1 - 13/I)^I ~ e^-13 -- and only rare tokens are checked
exactly from their posting lists. That keeps the interval exact in practice
and costs O(resamples x rare postings). Because a resample holds only ~63%
of the distinct images, resampled vocabularies are biased low; the interval
is therefore their spread re-centred on the observed value (``recentre``).
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, ratio

__all__ = ["vocab", "length"]


@METRICS.register("vocab", version="1")
def vocab(ctx: MetricContext) -> Estimate:
    """Number of distinct lowercased tokens."""
    rec = ctx.records
    n_vocab = len(rec.token_counts)
    rare = rec.postings  # only tokens used by <= POSTING_CAP captions
    n_freq = n_vocab - len(rare)
    if rare:
        unit_lists = [np.unique(ctx.unit[np.asarray(p, np.int64)]) for p in rare.values()]
        lens = np.fromiter((len(u) for u in unit_lists), np.int64, len(unit_lists))
        flat = np.concatenate(unit_lists)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    else:
        flat = starts = None

    def boot(counts: np.ndarray) -> np.ndarray:
        if flat is None:
            return np.full(len(counts), float(n_freq))
        drawn = counts[:, flat] > 0
        return n_freq + np.logical_or.reduceat(drawn, starts, axis=1).sum(axis=1).astype(float)

    return Estimate(np.zeros((ctx.n_units, 0)), lambda s: s[..., 0] * 0 + n_vocab, len(rec),
                    {"rare_tokens": len(rare)}, boot=boot, value=float(n_vocab), recentre=True)


@METRICS.register("length", version="1")
def length(ctx: MetricContext) -> Estimate:
    """Mean number of tokens per caption."""
    rec = ctx.records
    stats = np.stack([ctx.per_unit(rec.n_tokens.astype(np.float64)), ctx.per_unit()], axis=1)
    return Estimate(stats, ratio(1.0), len(rec),
                    {"mean_sentences": float(rec.n_sentences.mean()) if len(rec) else None})
