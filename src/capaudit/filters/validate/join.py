"""Which labelled captions are the filtered set's captions, and why the others are not.

Why its own module: a validation is only as good as its join. A labelled caption matches a
row of the filter run's input set when the image id is the row's (an integer id equals the
row's ``image_id``, any id equals its ``image_key``) *and* the caption text is the row's
(exactly, or equal once runs of whitespace are made one space). Each one that does not is
counted under its reason: the id is not in the set (``id-absent``), the id is but no caption
of that image has this text (``caption-differs``), or the same caption was labelled twice
with different labels and ``conflicts="skip"`` left it out (``conflicting-duplicate``).

Repeated records of one (image, caption) are merged by the layout's rule
(:attr:`capaudit.io.labels.base.LabelLayout.repeats`, or ``conflicts`` given): the rows of
one caption's sentences are joined (``merge``); disagreeing repeats count as hallucinated
and are reported (``any``); or a disagreement is refused in one line (``error``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from capaudit.errors import InputError
from capaudit.io.labels.base import Labelled

__all__ = ["SetCaption", "Matched", "Matching", "merge_repeats", "match_labels", "norm",
           "MIN_MATCHED", "MIN_SHARE", "CONFLICTS"]

MIN_MATCHED = 10     # fewer matched labelled captions than this: too few to validate on
MIN_SHARE = 0.5      # ... or fewer than half of the labelled captions matched
CONFLICTS = ("error", "any", "skip")

_SPACE = re.compile(r"\s+")


def norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def id_key(image_id: str):
    """An id as the join compares it: digits as their number ("000007" is image 7)."""
    text = image_id.strip()
    return int(text) if text.isdigit() else text


@dataclass
class SetCaption:
    """A row of the run's input set and its sentences as the filter logged them."""

    row_idx: int
    image_id: int | None
    image_key: str | None
    caption: str
    sentences: list = field(default_factory=list)   # [(sentence_idx, text, action, reason)]


@dataclass
class Matched:
    labelled: Labelled
    rows: list[SetCaption]            # every row of the set with this image and caption


@dataclass
class Matching:
    labelled: int                     # distinct labelled captions (after merging repeats)
    records: int                      # records in the file
    matched: list[Matched]
    unmatched: Counter                # reason -> count
    first_unmatched: dict             # reason -> file row of its first case
    repeats: dict                     # merged / disagreeing repeats

    def as_dict(self) -> dict:
        return {"records": self.records, "labelled_captions": self.labelled,
                "matched": len(self.matched), "unmatched": dict(self.unmatched),
                "repeats": self.repeats,
                "set_rows_matched": sum(len(m.rows) for m in self.matched)}


def _merge_two(a: Labelled, b: Labelled, rule: str, path, have: dict) -> Labelled | None:
    """``b`` folded into ``a``; None: a disagreement ``rule`` skips. ``have``: the normalised
    sentences of ``a`` and their labels (kept by the caller across a caption's rows)."""
    if rule == "merge" and a.sentences is not None and b.sentences is not None:
        for s, lab in b.sentences:
            key = norm(s)
            if key in have and have[key] != lab:
                return _disagree(a, b, rule, path, f"sentence {s[:40]!r}")
            if key not in have:
                a.sentences.append((s, lab))
                have[key] = lab
        return a
    if a.caption_label() == b.caption_label() and a.grade == b.grade and a.spans == b.spans:
        return a
    return _disagree(a, b, rule, path, "the caption")


def _disagree(a: Labelled, b: Labelled, rule: str, path, what: str) -> Labelled | None:
    if rule == "skip":
        return None
    if rule == "any" and a.grade is None:
        a.notes["disagreeing_repeat"] = True
        a.label = max(a.caption_label() or 0, b.caption_label() or 0)
        if a.spans is not None and b.spans is not None:
            a.spans = sorted(set(a.spans) | set(b.spans))
        return a
    raise InputError(f"rows {a.row} and {b.row} label {what} of image {a.image_id} "
                     "differently", path=path, row=b.row,
                     fix="remove one of them, or pass --conflicts any (hallucinated if "
                         "either says so) or --conflicts skip")


def merge_repeats(rows: list[Labelled], rule: str, path) -> tuple[list[Labelled], dict, dict]:
    """One :class:`Labelled` per (image id, caption); the counts of repeats; the file rows of
    the captions a disagreement left out (``skip``)."""
    merged: dict[tuple, Labelled | None] = {}
    counts = {"repeated_records": 0, "disagreeing": 0, "disagreeing_rows": []}
    skipped: dict[tuple, int] = {}
    normed: dict[str, str] = {}        # a caption's rows repeat its text: normalise it once
    sentences: dict[tuple, dict] = {}  # key -> {normalised sentence: label} (rule "merge")
    for lab in rows:
        text = normed.get(lab.caption)
        if text is None:
            text = normed[lab.caption] = norm(lab.caption)
        key = (id_key(lab.image_id), text)
        if key not in merged:
            merged[key] = lab
            sentences[key] = {norm(s): v for s, v in lab.sentences or ()}
            continue
        if rule != "merge":
            counts["repeated_records"] += 1
        old = merged[key]
        if old is None:
            continue
        before = old.notes.get("disagreeing_repeat")
        new = _merge_two(old, lab, rule, path, sentences[key])
        if new is None or (new.notes.get("disagreeing_repeat") and not before):
            counts["disagreeing"] += 1
            counts["disagreeing_rows"].append([old.row, lab.row])
        if new is None:
            skipped[key] = old.row
        merged[key] = new
    return [v for v in merged.values() if v is not None], counts, skipped


def _index(captions: list[SetCaption]) -> dict:
    by_id: dict = {}
    for c in captions:
        if c.image_id is not None:
            by_id.setdefault(("i", int(c.image_id)), []).append(c)
        if c.image_key is not None:
            by_id.setdefault(("k", str(c.image_key)), []).append(c)
    return by_id


def _candidates(by_id: dict, image_id: str) -> list[SetCaption]:
    text = image_id.strip()
    found = list(by_id.get(("k", text), []))
    if text.isdigit():
        found += [c for c in by_id.get(("i", int(text)), []) if c not in found]
    return found


def match_labels(rows: list[Labelled], captions: list[SetCaption], rule: str,
                 path) -> Matching:
    """Merge repeats, then join each labelled caption to the set's rows."""
    labelled, repeats, skipped = merge_repeats(rows, rule, path)
    by_id = _index(captions)
    matched, unmatched, first = [], Counter(), {}
    for key, row in skipped.items():
        unmatched["conflicting-duplicate"] += 1
        first.setdefault("conflicting-duplicate", row)
    for lab in labelled:
        cands = _candidates(by_id, lab.image_id)
        same = [c for c in cands if c.caption == lab.caption] or \
            [c for c in cands if norm(c.caption) == norm(lab.caption)]
        if same:
            matched.append(Matched(lab, same))
            continue
        why = "caption-differs" if cands else "id-absent"
        unmatched[why] += 1
        first.setdefault(why, lab.row)
    return Matching(len(labelled) + len(skipped), len(rows), matched, unmatched, first,
                    repeats)


def check_enough(m: Matching, path, allow_few: bool) -> str:
    """``ok``, ``partial`` (some did not match) or ``too-few`` (refused unless
    ``allow_few``): fewer than :data:`MIN_MATCHED` captions or :data:`MIN_SHARE` of them."""
    n = len(m.matched)
    if not m.unmatched:
        status = "ok" if n >= MIN_MATCHED else "too-few"
    else:
        status = "too-few" if n < MIN_MATCHED or n < MIN_SHARE * m.labelled else "partial"
    if status != "too-few" or allow_few:
        return status
    why, row = (m.unmatched.most_common(1)[0][0], None) if m.unmatched else ("", None)
    row = m.first_unmatched.get(why) if why else None
    detail = ", ".join(f"{k} {v}" for k, v in m.unmatched.items())
    what = "no labelled caption matches the set" if n == 0 else \
        f"only {n} of {m.labelled} labelled captions match the set"
    raise InputError(f"{what}" + (f" ({detail}; first: row {row})" if detail else "")
                     + f"; at least {MIN_MATCHED} and {MIN_SHARE:.0%} must",
                     path=path, fix="label captions of this set (same image ids, same "
                                    "caption text), pass the filter run's input set's "
                                    "labels, or --allow-few")
