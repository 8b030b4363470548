"""Vocabulary diversity and caption length.

``vocab``: distinct lowercased word tokens over all captions (NLTK tokens,
punctuation included, no sentence split -- the reference's numbers).
``length``: mean tokens per caption, a ratio of sums (tokens, captions) per image.

Vocabulary is not a sum over images, so its bootstrap is custom: a token is in
a resample iff one of the images using it is drawn. Tokens used by more than
``POSTING_CAP`` (64) captions are treated as always present -- with at least
13 images (5 captions each at most in COCO) the chance that a resample misses
all of them is below (1 - 13/I)^I ~ e^-13 -- and only rare tokens are checked
exactly from their posting lists (one sparse product of the draw counts with
the units x rare-tokens presence matrix). That keeps the interval exact in
practice and costs O(resamples x rare postings). Because a resample holds only ~63%
of the distinct images, resampled vocabularies are biased low; the interval
is therefore their spread re-centred on the observed value (``recentre``).
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, SparseStats, ratio

__all__ = ["vocab", "length", "vocab_estimate"]

ROWS_ELEMS = 1_000_000  # resamples x rare tokens evaluated at once in the vocabulary bootstrap


@METRICS.register("vocab", version="1")
def vocab(ctx: MetricContext) -> Estimate:
    """Number of distinct lowercased tokens."""
    rec = ctx.records
    # rare tokens (used by <= POSTING_CAP captions): the units of the captions using them
    unit_lists = [np.unique(ctx.unit[np.asarray(p, np.int64)]) for p in rec.postings.values()]
    return vocab_estimate(len(rec.token_counts), unit_lists, ctx.n_units, len(rec))


def vocab_estimate(n_vocab: int, unit_lists: list[np.ndarray], n_units: int, n: int) -> Estimate:
    """The vocabulary estimate from its size and, per rare token, the distinct units using it.

    Shared by :func:`vocab` and the streaming audit
    (:mod:`capaudit.audit.metrics.stream`), which keeps only these.
    """
    n_freq = n_vocab - len(unit_lists)
    if unit_lists:
        # presence matrix [units, rare tokens]: a token is in a resample iff the
        # draw counts of its units sum to more than zero
        lens = np.fromiter((len(u) for u in unit_lists), np.int64, len(unit_lists))
        flat = np.concatenate(unit_lists)
        tok = np.repeat(np.arange(len(unit_lists)), lens)
        presence = SparseStats(flat, tok, np.ones(len(flat)), (n_units, len(unit_lists)))
    else:
        presence = None

    step = max(1, ROWS_ELEMS // max(len(unit_lists), 1))  # bounds the [resamples, rare tokens] product

    def boot(counts: np.ndarray) -> np.ndarray:
        if presence is None:
            return np.full(len(counts), float(n_freq))
        out = np.empty(len(counts))
        for a in range(0, len(counts), step):
            out[a:a + step] = (presence.resampled_sums(counts[a:a + step]) > 0).sum(axis=1)
        return n_freq + out

    return Estimate(np.zeros((n_units, 0)), lambda s: s[..., 0] * 0 + n_vocab, n,
                    {"rare_tokens": len(unit_lists)}, boot=boot, value=float(n_vocab), recentre=True)


@METRICS.register("length", version="1")
def length(ctx: MetricContext) -> Estimate:
    """Mean number of tokens per caption."""
    rec = ctx.records
    stats = np.stack([ctx.per_unit(rec.n_tokens.astype(np.float64)), ctx.per_unit()], axis=1)
    return Estimate(stats, ratio(1.0), len(rec),
                    {"mean_sentences": float(rec.n_sentences.mean()) if len(rec) else None})
