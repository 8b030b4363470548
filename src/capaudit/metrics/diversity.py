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

Past ``VOCAB_EXACT_MAX`` distinct tokens (in a chunk, a shard or a merge) the
state becomes a HyperLogLog sketch (:mod:`~capaudit.metrics.hll`,
0.81% relative standard error); the value is then the sketch's estimate, the
interval its 95% error band (+-1.96 x 0.81%; the sampling spread of a
vocabulary that large is far smaller), and ``extra["distinct"]`` (also in the
JSON) says ``hll`` instead of ``exact``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from capaudit.metrics.hll import HLL_REL_ERROR, HyperLogLog
from capaudit.metrics.base import Metric, register_metric
from capaudit.metrics.estimate import Estimate, SparseStats, ratio
from capaudit.metrics.state import UnitSums
from capaudit.metrics.state_types import register_state
from capaudit.text.records import POSTING_CAP

__all__ = ["Vocab", "Length", "Vocabulary", "vocab_estimate"]

VOCAB_EXACT_MAX = 5_000_000  # distinct tokens kept exactly; beyond, a HyperLogLog sketch
ROWS_ELEMS = 1_000_000  # resamples x rare tokens evaluated at once in the vocabulary bootstrap


@register_state
@dataclass
class Vocabulary:
    """Set-valued state: count of every token, and for tokens used by at most
    ``POSTING_CAP`` captions the unit keys of those captions (one per caption)."""

    token_counts: dict[str, int] = field(default_factory=dict)
    postings: dict[str, list[int]] = field(default_factory=dict)
    n: int = 0
    sketch: HyperLogLog | None = None

    def to_sketch(self) -> "Vocabulary":
        """Become a HyperLogLog sketch (the token table and postings are dropped)."""
        if self.sketch is None:
            self.sketch = HyperLogLog().add(self.token_counts)
            self.token_counts, self.postings = {}, {}
        return self

    def merge(self, other: "Vocabulary") -> "Vocabulary":
        """Adds ``other`` into this state (modified and returned)."""
        if self.sketch is not None or other.sketch is not None:
            self.to_sketch()
            self.sketch.merge(other.sketch or HyperLogLog().add(other.token_counts))
            self.n += other.n
            return self
        counts, posts, other_posts = self.token_counts, self.postings, other.postings
        for t, c in other.token_counts.items():
            total = counts.get(t, 0) + c
            counts[t] = total
            if total <= POSTING_CAP:
                lst = posts.get(t)
                if lst is None:
                    posts[t] = list(other_posts[t])  # present: other's count is <= the total
                else:
                    lst.extend(other_posts[t])
            elif t in posts:
                del posts[t]
        self.n += other.n
        return self.to_sketch() if len(counts) > VOCAB_EXACT_MAX else self


@register_metric
class Vocab(Metric):
    name, label = "vocab", "Vocab"
    number_format = "{:,.0f}"        # a count of distinct words
    vocabulary = True                # reads the records' token table
    description = "distinct lowercased tokens (treebank tokenization)"
    direction, criterion = +1, "complexity"
    size_dependent = True

    def update(self, ctx):
        rec = ctx.records
        keys = ctx.unit_keys[ctx.unit]  # unit key per caption
        posts = {t: keys[np.asarray(p, np.int64)].tolist() for t, p in rec.postings.items()}
        state = Vocabulary(dict(rec.token_counts), posts, len(rec))
        return state.to_sketch() if len(state.token_counts) > VOCAB_EXACT_MAX else state

    def finalize(self, state, units):
        if state.sketch is not None:
            return sketch_estimate(state.sketch.estimate(), units.n, state.n)
        # rare tokens (used by <= POSTING_CAP captions): the distinct units using them
        unit_lists = [np.unique(units.index(np.asarray(p, np.int64))) for p in state.postings.values()]
        return vocab_estimate(len(state.token_counts), unit_lists, units.n, state.n)


def vocab_estimate(n_vocab: int, unit_lists: list[np.ndarray], n_units: int, n: int) -> Estimate:
    """The vocabulary estimate from its size and, per rare token, the distinct units using it."""
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
                    {"rare_tokens": len(unit_lists), "distinct": "exact"}, boot=boot,
                    value=float(n_vocab), recentre=True)


def sketch_estimate(value: float, n_units: int, n: int) -> Estimate:
    """The sketched vocabulary: its 'bootstrap' values are the sketch's error distribution
    (normal, relative sd ``HLL_REL_ERROR``, at ``n_boot`` evenly spaced quantiles), so the
    interval is the sketch's 95% error band. They are a ``spread``, not a function of the
    resample counts: the bootstrap runs in blocks of replicates (one replicate a block past
    2M units), and quantiles spaced within a block collapsed to the point value."""
    from scipy.stats import norm

    def spread(n_boot: int) -> np.ndarray:
        q = (np.arange(n_boot) + 0.5) / max(n_boot, 1)
        return value * (1 + HLL_REL_ERROR * norm.ppf(q))

    return Estimate(np.zeros((n_units, 0)), lambda s: np.full(np.shape(s)[:-1], float(value)), n,
                    {"distinct": "hll", "hll_rel_error": float(HLL_REL_ERROR)},
                    value=float(value), spread=spread)


@register_metric
class Length(Metric):
    name, label = "length", "Length"
    description = "mean tokens per caption"
    direction, criterion = 0, "complexity"

    def update(self, ctx):
        rec = ctx.records
        return UnitSums.of(ctx, rec.n_tokens, None, sentences=int(rec.n_sentences.sum(dtype=np.int64)))

    def finalize(self, state, units):
        stats = state.dense(units)
        n = int(stats[:, 1].sum())
        return Estimate(stats, ratio(1.0), n,
                        {"mean_sentences": state.totals["sentences"] / n if n else None})
