"""Streaming audit state: per-image sufficient statistics merged chunk by chunk.

Why: every metric's statistics are sums per bootstrap unit (an image), so an
audit of a caption stream needs, across chunks, only those sums (merged by
image id: an image's captions may span chunks), the vocabulary (token ->
captions using it, and for rare tokens the units using them) and a few
counters -- memory bounded by the number of images and the vocabulary, not by
the number of captions. :class:`StreamStats` keeps exactly that;
:meth:`StreamStats.add` takes one chunk (its records and its
:class:`~capaudit.audit.metrics.base.MetricContext`), :meth:`StreamStats.estimates`
builds, at the end, the same :class:`~capaudit.audit.metrics.base.Estimate`
each registered metric builds on the whole input.

Identity with the in-memory audit (``tests/test_engine_stream.py``): units are
ordered as :class:`MetricContext` orders them (image ids sorted, then captions
without an image id in input order), integer statistics are exact whatever the
order of summation, and the one fractional statistic (per-caption recall) is
summed per image in caption order (``np.add.at``), as ``np.bincount`` does on
the whole input -- so values and bootstrap intervals are bit-identical.

A caption without an image id is a unit of its own, so such captions cost a
few bytes each (a unit slot), unlike captions of images.
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import Estimate, MetricContext, MetricSkipped, ratio
from capaudit.audit.metrics.chair import caption_hallucinated
from capaudit.audit.metrics.diversity import vocab_estimate
from capaudit.audit.metrics.recall import caption_recall
from capaudit.audit.metrics.recall_disparity import disparity_estimate
from capaudit.io.annotations import Annotations
from capaudit.text.objects import get_lexicon
from capaudit.text.records import POSTING_CAP, CaptionRecords

__all__ = ["StreamStats", "STREAM_METRICS"]

STREAM_METRICS = ("vocab", "length", "recall", "gender_error", "recall_disparity", "chair_s", "chair_i")

# per-slot accumulator columns
_COLS = ("n_caps", "tokens", "recall_sum", "gender_err", "chair_flag", "chair_hall", "chair_ment")


class _UnitRecords:
    """What :class:`MetricContext` reads of records when its 'captions' are the units."""

    def __init__(self, mode: str, n: int):
        self.mode, self._n = mode, n

    def __len__(self) -> int:
        return self._n

    @property
    def categories(self) -> list[str]:
        return get_lexicon(self.mode).categories


class StreamStats:
    """Sufficient statistics of every metric over the chunks seen so far."""

    def __init__(self, mode: str, annotations: Annotations | None, min_images: int = 10):
        self.mode = mode
        self.annotations = annotations or Annotations()
        self.min_images = min_images
        self.n_cat = len(get_lexicon(mode).categories)
        self.slot_of: dict[int, int] = {}       # image id -> slot
        self.slot_image: list[int] = []         # slot -> image id (-1: a caption without one)
        self.acc = np.zeros((0, len(_COLS)), np.float64)
        self.n_slots = 0
        self.n_captions = 0
        self.n_sentences = 0
        self.token_counts: dict[str, int] = {}
        self.postings: dict[str, list[int]] = {}  # rare token -> slots of the captions using it
        self.confusion = np.zeros((3, 3), np.int64)  # [image label, prediction]
        self.chair_hall_total = 0
        self.hit_keys = np.zeros(0, np.int64)     # slot * C + category (recall-disparity hits)
        self.hit_vals = np.zeros(0, np.int64)
        self._pending: list[np.ndarray] = []
        self._pending_n = 0

    # ---- accumulation --------------------------------------------------
    def _slots(self, n_new: int) -> None:
        need = self.n_slots + n_new
        if need > len(self.acc):
            grown = np.zeros((max(need, 2 * len(self.acc), 1024), len(_COLS)), np.float64)
            grown[:self.n_slots] = self.acc[:self.n_slots]
            self.acc = grown

    def _unit_slots(self, ctx: MetricContext) -> np.ndarray:
        """Global slot of every unit of the chunk (new slots for new images)."""
        n_img = len(ctx.images)
        self._slots(ctx.n_units)
        out = np.empty(ctx.n_units, np.int64)
        get, slot_of, slot_image = self.slot_of.get, self.slot_of, self.slot_image
        for u, iid in enumerate(ctx.images.tolist()):
            s = get(iid)
            if s is None:
                s = slot_of[iid] = self.n_slots
                slot_image.append(iid)
                self.n_slots += 1
            out[u] = s
        k = ctx.n_units - n_img  # captions without an image id: a fresh unit each, in order
        out[n_img:] = self.n_slots + np.arange(k)
        slot_image.extend([-1] * k)
        self.n_slots += k
        return out

    def add(self, records: CaptionRecords, ctx: MetricContext) -> None:
        """Merge one chunk (``ctx`` built on ``records`` with the same annotations)."""
        n = len(records)
        if n == 0:
            return
        unit_slot = self._unit_slots(ctx)
        cap_slot = unit_slot[ctx.unit]
        acc, S = self.acc, self.n_slots
        col = {c: i for i, c in enumerate(_COLS)}

        def add_int(name: str, values=None, mask=None) -> None:  # integer values: order-free
            idx = cap_slot if mask is None else cap_slot[mask]
            w = None if values is None else (values if mask is None else values[mask])
            acc[:S, col[name]] += np.bincount(idx, weights=w, minlength=S)

        self.n_captions += n
        self.n_sentences += int(records.n_sentences.sum(dtype=np.int64))
        add_int("n_caps")
        add_int("tokens", records.n_tokens.astype(np.float64))
        has = ctx.has_image
        ann = self.annotations
        if ann.instances is not None:
            r = caption_recall(ctx)
            m = ~np.isnan(r)
            # fractional: summed per image in caption order, exactly as bincount does
            np.add.at(acc[:, col["recall_sum"]], cap_slot[m], r[m])
        if ann.gender:
            label = ctx.image_gender[ctx.unit]
            label[~has] = 0
            pred = records.gender
            err = ((label > 0) & (pred > 0) & (pred != label)).astype(np.float64)
            add_int("gender_err", err)
            np.add.at(self.confusion, (label.astype(np.int64), pred.astype(np.int64)), 1)
            if ann.instances is not None:
                inst, _ = ctx.instances
                g_unit = ctx.image_gender
                caps, cats = ctx.mentioned_pairs
                u = ctx.unit[caps]
                ok = (g_unit[u] > 0) & inst[u, cats]
                keys = unit_slot[u[ok]] * self.n_cat + cats[ok]
                self._pending.append(keys)
                self._pending_n += len(keys)
                if self._pending_n > 4 * max(len(self.hit_keys), 1_000_000):
                    self._merge_hits()
        if ann.chair_gt is not None:
            flag = caption_hallucinated(ctx).astype(np.float64)
            add_int("chair_flag", flag, has)
            h = ctx.hallucinated
            hall = np.bincount(ctx.mention_caption[h], minlength=n).astype(np.float64)
            ment = np.diff(records.m_offsets).astype(np.float64)
            add_int("chair_hall", hall, has)
            add_int("chair_ment", ment, has)
        # vocabulary: distinct tokens and, for tokens used by <= POSTING_CAP captions, their units
        counts, posts = self.token_counts, self.postings
        chunk_posts = records.postings
        for t, c in records.token_counts.items():
            total = counts.get(t, 0) + c
            counts[t] = total
            if total <= POSTING_CAP:
                p = chunk_posts[t]  # present: the chunk's count is <= the total
                lst = posts.get(t)
                slots = cap_slot[np.asarray(p, np.int64)].tolist()
                if lst is None:
                    posts[t] = slots
                else:
                    lst.extend(slots)
            elif t in posts:
                del posts[t]

    def _merge_hits(self) -> None:
        if not self._pending:
            return
        keys = np.concatenate([self.hit_keys, *self._pending])
        vals = np.concatenate([self.hit_vals, np.ones(self._pending_n, np.int64)])
        self.hit_keys, inv = np.unique(keys, return_inverse=True)
        self.hit_vals = np.bincount(inv, weights=vals, minlength=len(self.hit_keys)).astype(np.int64)
        self._pending, self._pending_n = [], 0

    # ---- estimates -----------------------------------------------------
    def _order(self) -> tuple[np.ndarray, np.ndarray]:
        """(slot of every unit in MetricContext order, unit of every slot)."""
        img = np.asarray(self.slot_image, np.int64)
        with_img = np.flatnonzero(img >= 0)
        order = np.concatenate([with_img[np.argsort(img[with_img], kind="stable")],
                                np.flatnonzero(img < 0)])
        unit_of_slot = np.empty(self.n_slots, np.int64)
        unit_of_slot[order] = np.arange(self.n_slots)
        return order, unit_of_slot

    def context(self) -> MetricContext:
        """A context whose 'captions' are the units (image ids sorted, then the others)."""
        order, _ = self._order()
        ids = np.asarray(self.slot_image, np.int64)[order]
        return MetricContext(_UnitRecords(self.mode, len(ids)), ids, self.annotations,
                             self.min_images)

    def estimates(self, metrics: list[str]) -> tuple[dict[str, Estimate], dict[str, str], int]:
        """``({name: Estimate}, {name: skip reason}, n_units)`` for the metrics asked for."""
        self._merge_hits()
        order, unit_of_slot = self._order()
        ctx = self.context()  # units: ctx.unit == arange
        U = ctx.n_units
        a = {c: self.acc[order, i] for i, c in enumerate(_COLS)}
        has = ctx.has_image
        out: dict[str, Estimate] = {}
        skipped: dict[str, str] = {}

        def chair_missing() -> int:
            _, present = ctx.chair_gt
            return int(a["n_caps"][has & ~present].sum())

        for name in metrics:
            try:
                if name == "vocab":
                    unit_lists = [np.unique(unit_of_slot[np.asarray(p, np.int64)])
                                  for p in self.postings.values()]
                    out[name] = vocab_estimate(len(self.token_counts), unit_lists, U, self.n_captions)
                elif name == "length":
                    stats = np.stack([a["tokens"], a["n_caps"]], axis=1)
                    mean_s = self.n_sentences / self.n_captions if self.n_captions else None
                    out[name] = Estimate(stats, ratio(1.0), self.n_captions,
                                         {"mean_sentences": mean_s})
                elif name == "recall":
                    inst, _ = ctx.instances
                    den = np.where(has & (inst.sum(axis=1) > 0), a["n_caps"], 0.0)
                    n = int(den.sum())
                    out[name] = Estimate(np.stack([a["recall_sum"], den], axis=1), ratio(), n,
                                         {"skipped_captions": self.n_captions - n})
                elif name == "gender_error":
                    g = ctx.image_gender
                    den = np.where(g > 0, a["n_caps"], 0.0)
                    names = ("neutral", "male", "female")
                    confusion = {f"{names[x]}->{names[y]}": int(self.confusion[x, y])
                                 for x in (1, 2) for y in (0, 1, 2)}
                    out[name] = Estimate(np.stack([a["gender_err"], den], axis=1), ratio(),
                                         int(den.sum()), {"confusion": confusion})
                elif name == "recall_disparity":
                    inst, _ = ctx.instances
                    g = ctx.image_gender
                    C = self.n_cat
                    hu = unit_of_slot[self.hit_keys // C] if len(self.hit_keys) else np.zeros(0, np.int64)
                    hc = self.hit_keys % C
                    n = int(a["n_caps"][(g > 0) & has].sum())
                    out[name] = disparity_estimate(ctx.categories, inst, g, a["n_caps"].copy(), hu, hc,
                                                   self.hit_vals.astype(np.float64), U,
                                                   self.min_images, n)
                elif name == "chair_s":
                    ctx.chair_gt
                    den = np.where(has, a["n_caps"], 0.0)
                    out[name] = Estimate(np.stack([a["chair_flag"], den], axis=1), ratio(),
                                         int(den.sum()), {"captions_without_gt": chair_missing()})
                elif name == "chair_i":
                    ctx.chair_gt
                    stats = np.stack([a["chair_hall"], a["chair_ment"]], axis=1)
                    out[name] = Estimate(stats, ratio(), int(a["chair_ment"].sum()),
                                         {"captions": int(a["n_caps"][has].sum()),
                                          "hallucinated_mentions": int(a["chair_hall"].sum()),
                                          "captions_without_gt": chair_missing()})
                else:
                    raise ValueError(f"metric '{name}' has no streaming form "
                                     f"(streamable: {', '.join(STREAM_METRICS)})")
            except MetricSkipped as exc:
                skipped[name] = str(exc)
        return out, skipped, U
