"""The ``gender-balance`` filter: resample images so woman and man images are balanced.

``gender-balance``
    Images are labelled woman / man (from ``demographics``, else from the
    caption's predicted gender); ``by="overall"`` undersamples the majority
    gender at random (``seed``) to the minority's count; ``by="object"``
    greedily removes majority-gender images of the most imbalanced object until
    every object with at least ``min_images`` labelled images is within
    ``tolerance`` of parity (or no removal helps), preferring images whose other
    objects are imbalanced the same way. Objects are the image's
    ``instances``/``chair_gt`` categories, else the caption's mentions. All
    captions of a removed image are dropped (logged ``drop``); images without a
    label are kept. The summary holds the per-object man/woman counts before
    and after (``cooccurrence``).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Iterable, Iterator, Mapping

from capaudit.errors import InputError
from capaudit.filters.declared import DEFAULTS
from capaudit.filters.base import CaptionDoc, CaptionResult, Decision, Filter, FilterContext
from capaudit.filters.gender import load_gender_labels

__all__ = ["GenderBalanceFilter", "BalanceCounts", "cooccurrence"]


def cooccurrence(image_gender: Mapping[int, str], image_objects: Mapping[int, Iterable[str]],
                 keep: set[int] | None = None) -> dict[str, dict]:
    """Per object: man / woman image counts and the man share, over ``keep`` (default: all)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for iid, g in image_gender.items():
        if keep is not None and iid not in keep:
            continue
        for o in image_objects.get(iid, ()):
            counts[o][g] += 1
    out = {}
    for o, c in sorted(counts.items()):
        m, w = c["male"], c["female"]
        out[o] = {"man": m, "woman": w, "man_share": round(m / (m + w), 4) if m + w else None}
    return out


class GenderBalanceFilter(Filter):
    """Undersample so woman and man images are balanced, overall or per co-occurring object."""

    name = "gender-balance"
    version = "1"
    defaults: Mapping = DEFAULTS["gender-balance"]  # declared in capaudit.filters.declared

    def __init__(self, labels: Mapping[int, str] | None = None,
                 objects: Mapping[int, Iterable[str]] | None = None, **options):
        super().__init__(**options)
        if self.options["by"] not in ("overall", "object"):
            raise InputError(f"unknown --by '{self.options['by']}'", fix="use overall or object")
        self.labels = labels
        self.objects = objects
        self._store = None

    def setup(self, context: FilterContext | None = None) -> None:
        self._store = context.store if context else None
        if self.labels is None and self.options["demographics"] is not None:
            self.labels = load_gender_labels(self.options["demographics"], self._store)
        if self.objects is None and self.options["by"] == "object":
            from capaudit.filters.evidence import evidence_files, load_evidence

            files = evidence_files(self.options)
            kind = next((k for k in ("instances", "chair-gt") if files[k]), None)
            if kind:
                ev = load_evidence(kind, files[kind], self._store)
                self.objects = {i: sorted(v) for i, v in ev.items()}

    def counts(self) -> "BalanceCounts":
        """An empty gathering of what this filter's decision reads of the captions."""
        mentions = self.options["object_mode"] if self.options["by"] == "object" and \
            self.objects is None else None
        return BalanceCounts(votes=self.labels is None, mentions=mentions)

    def _image_labels(self, counts: "BalanceCounts") -> tuple[dict[int, str], str]:
        if self.labels is not None:
            ids = counts.images
            return {i: g for i, g in self.labels.items() if i in ids and g in ("male", "female")}, \
                "demographics"
        # no labels: the captions' predicted gender, image labelled when its captions agree
        return {i: next(iter(v)) for i, v in counts.votes.items()
                if len(v) == 1 and next(iter(v)) in ("male", "female")}, "caption words"

    def _image_objects(self, counts: "BalanceCounts") -> tuple[dict[int, set], str]:
        if self.objects is not None:
            return {i: set(v) for i, v in self.objects.items()}, "annotations"
        return counts.mentions, "caption mentions"

    def _select(self, labels: dict[int, str], objects: dict[int, set]) -> set[int]:
        """Image ids to remove."""
        rng = random.Random(self.options["seed"])
        by_g = {g: sorted(i for i, x in labels.items() if x == g) for g in ("male", "female")}
        if self.options["by"] == "overall":
            n = min(len(by_g["male"]), len(by_g["female"]))
            big = "male" if len(by_g["male"]) > n else "female"
            return set(rng.sample(by_g[big], len(by_g[big]) - n))
        tol, min_n = float(self.options["tolerance"]), int(self.options["min_images"])
        counts: dict[str, Counter] = defaultdict(Counter)
        for i, g in labels.items():
            for o in sorted(objects.get(i, ())):   # not a set's order: one per seed, any process
                counts[o][g] += 1
        alive = set(labels)
        removed: set[int] = set()
        exhausted: set[str] = set()
        order = sorted(labels)
        rng.shuffle(order)  # tie-break at random, reproducibly
        rank = {i: k for k, i in enumerate(order)}

        def excess(o: str) -> tuple[int, str]:
            c = counts[o]
            m, w = c["male"], c["female"]
            if m + w < min_n or o in exhausted:
                return 0, ""
            big = "male" if m > w else "female"
            hi, lo = max(m, w), min(m, w)
            # largest hi' with hi' / (hi' + lo) <= 0.5 + tol
            allowed = int((0.5 + tol) * lo / (0.5 - tol)) if tol < 0.5 else hi
            return max(0, hi - max(allowed, lo)), big

        for _ in range(10_000):
            worst = max(counts, key=lambda o: excess(o)[0], default=None)
            if worst is None:
                break
            n_ex, big = excess(worst)
            if n_ex <= 0:
                break
            cands = [i for i in alive if labels[i] == big and worst in objects.get(i, ())]

            def harm(i: int) -> tuple:
                # removing i lowers its other objects' `big` count: good when they lean `big`
                h = 0
                for o in objects.get(i, ()):
                    c = counts[o]
                    lean = c[big] - c["female" if big == "male" else "male"]
                    h += -1 if lean > 0 else 1
                return (h, rank[i])

            cands.sort(key=harm)
            step = cands[:max(1, min(n_ex, len(cands)) // 4)]  # a quarter, then re-rank
            if not step:
                exhausted.add(worst)
                continue
            for i in step:
                alive.discard(i)
                removed.add(i)
                for o in objects.get(i, ()):
                    counts[o][labels[i]] -= 1
        return removed

    def balance(self, counts: "BalanceCounts") -> dict:
        """The images to remove, ``{image id: label}``, decided on the whole corpus's
        ``counts``; the report goes to :attr:`report`."""
        labels, label_src = self._image_labels(counts)
        objects, obj_src = self._image_objects(counts) if self.options["by"] == "object" or \
            self.objects is not None else ({}, "none")
        removed = self._select(labels, objects)
        keep = set(labels) - removed
        before = Counter(labels.values())
        after = Counter(labels[i] for i in keep)
        self.report = {"balance": {
            "by": self.options["by"], "labels_from": label_src, "objects_from": obj_src,
            "images_before": {"man": before["male"], "woman": before["female"]},
            "images_after": {"man": after["male"], "woman": after["female"]},
            "images_removed": len(removed)}}
        if objects:
            self.report["cooccurrence"] = {"before": cooccurrence(labels, objects),
                                           "after": cooccurrence(labels, objects, keep)}
        return {i: labels[i] for i in removed}

    def result(self, doc: CaptionDoc, removed: Mapping) -> CaptionResult:
        """One caption's decisions: every sentence dropped when its image is removed."""
        label = removed.get(doc.image_id)
        if label is not None:
            reason = f"balance: {label} image removed ({self.options['by']})"
            return CaptionResult(doc, [Decision(i, "drop", reason) for i in range(len(doc.spans))])
        return CaptionResult(doc, [Decision(i, "keep") for i in range(len(doc.spans))])

    def apply(self, docs: Iterable[CaptionDoc]) -> Iterator[CaptionResult]:
        docs = list(docs)
        counts = self.counts()
        for d in docs:
            counts.add(d)
        removed = self.balance(counts)
        for d in docs:
            yield self.result(d, removed)


class BalanceCounts:
    """What the balance decision reads of a corpus, caption by caption: its images in order of
    first appearance, and, when needed, each image's predicted genders (no labels given) and
    mentioned objects (``by=object`` without annotations).

    Why a class: a sharded corpus gathers it shard by shard (:mod:`capaudit.filters.shards.
    gender_balance_step`) and adds the shards' in shard order (:meth:`merge`), which gives the
    gathering of the one set they make, so the decision is the set's."""

    def __init__(self, votes: bool, mentions: str | None):
        self.images: dict = {}                    # image id -> None, first appearance first
        self.votes: dict | None = {} if votes else None
        self.mode = mentions
        self.mentions: dict | None = {} if mentions else None

    def add(self, doc: CaptionDoc) -> None:
        iid = doc.image_id
        self.images.setdefault(iid, None)
        if self.votes is not None:
            from capaudit.text.gender import predict_gender
            from capaudit.text.tokenize import tokenize

            self.votes.setdefault(iid, set()).add(predict_gender(tokenize(doc.caption)))
        if self.mentions is not None:
            from capaudit.text.mentions import caption_mentions

            _sents, ments = caption_mentions(doc.caption, self.mode)
            self.mentions.setdefault(iid, set()).update(m.category for m in ments)

    def merge(self, other: "BalanceCounts") -> None:
        for iid in other.images:
            self.images.setdefault(iid, None)
        for mine, theirs in ((self.votes, other.votes), (self.mentions, other.mentions)):
            if mine is not None:
                for iid, values in theirs.items():
                    mine.setdefault(iid, set()).update(values)

    def to_json(self) -> dict:
        """Plain lists (an image id may be None: captions without one vote together, as in
        the set)."""
        def pairs(d):
            return None if d is None else [[i, sorted(v)] for i, v in d.items()]
        return {"images": list(self.images), "votes": pairs(self.votes), "mode": self.mode,
                "mentions": pairs(self.mentions)}

    @classmethod
    def from_json(cls, data: dict) -> "BalanceCounts":
        out = cls(votes=data["votes"] is not None, mentions=data["mode"])
        out.images = dict.fromkeys(data["images"])
        for name in ("votes", "mentions"):
            if data[name] is not None:
                setattr(out, name, {i: set(v) for i, v in data[name]})
        return out
