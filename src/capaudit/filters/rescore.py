"""Score a filter's before and after with evidence of your choice: is the gain real?

A hallucination filter that drops every sentence the CHAIR ground truth calls
unsupported brings CHAIR (under that ground truth) to 0 by construction;
``audit compare PARENT FILTERED`` with the same evidence then measures the
filter against itself. The gain is only measured when the after-set is
scored with evidence the filter did not use: COCO instance boxes when it used
the CHAIR ground truth (or the reverse), or a detector's output.

:func:`independent_chair` scores both sets with such evidence, on the
captions whose image the evidence covers, by the CHAIR definitions (every
mention judged, negated and non-visual ones too, reference word rules), so on
the CHAIR ground truth it gives exactly the reference CHAIR_s and CHAIR_i.
It also reports mentions per caption, since dropping sentences lowers CHAIR
and mentions together. :func:`parse_score_evidence` reads the CLI's
``--score-evidence`` value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from capaudit.errors import InputError
from capaudit.filters.base import CaptionDoc
from capaudit.filters.evidence import EVIDENCE_KINDS

__all__ = ["chair_scores", "independent_chair", "parse_score_evidence", "circular",
           "ChairTally", "IndependentTally", "on_parent"]


def parse_score_evidence(value: str, files: dict[str, str | None] | None = None
                         ) -> tuple[str, str | None]:
    """``KIND``, ``KIND=FILE`` or a detector ``FILE`` -> ``(kind, file or stored source)``.

    A bare kind takes the file given for it on the command line (``files``:
    ``{"chair-gt": ..., "instances": ..., "detector": ...}``), else the most
    recent stored source of that kind.
    """
    kind, sep, ref = value.partition("=")
    kind = kind.strip()
    if kind in EVIDENCE_KINDS:
        return kind, (ref.strip() or None) if sep else (files or {}).get(kind)
    if not sep and Path(value).is_file():
        return "detector", value
    raise InputError(f"--score-evidence {value!r} is not an evidence",
                     fix=f"use {' | '.join(EVIDENCE_KINDS)}, KIND=FILE, or a detector JSONL file")


class ChairTally:
    """CHAIR_s, CHAIR_i and mentions per caption, counted caption by caption (a stream)."""

    def __init__(self, evidence, threshold: float = 1.0):
        from capaudit.filters.hallucination import HallucinationFilter

        self.evidence = evidence
        self.judge = HallucinationFilter(evidence, negation=False, non_visual="judge",
                                         object_mode="reference", min_score=threshold)
        self.n = self.bad = self.ment = self.halluc = 0

    def add(self, doc: CaptionDoc) -> None:
        if doc.image_id is None or doc.image_id not in self.evidence:
            return
        scores = self.judge.score(doc)
        u = sum(len(s.facts["unsupported"]) for s in scores)
        self.n += 1
        self.bad += u > 0
        self.halluc += u
        self.ment += u + sum(len(s.facts["supported"]) for s in scores)

    def result(self) -> dict:
        n, ment = self.n, self.ment
        return {"captions": n,
                "chair_s": round(100 * self.bad / n, 3) if n else None,
                "chair_i": round(100 * self.halluc / ment, 3) if ment else None,
                "mentions_per_caption": round(ment / n, 3) if n else None}


def chair_scores(docs: Iterable[CaptionDoc], evidence: dict, threshold: float = 1.0) -> dict:
    """CHAIR_s, CHAIR_i and mentions per caption over the captions ``evidence`` covers."""
    tally = ChairTally(evidence, threshold)
    for doc in docs:
        tally.add(doc)
    return tally.result()


class IndependentTally:
    """:func:`independent_chair` fed as the filter streams: each input caption, and each
    output caption, as they pass (memory: the set's distinct image ids)."""

    def __init__(self, kind: str, evidence, source: str, threshold: float | None = None):
        self.kind, self.evidence, self.source = kind, evidence, source
        self.thr = threshold if threshold is not None else (0.5 if kind == "detector" else 1.0)
        self.images: set = set()
        self.before, self.after = ChairTally(evidence, self.thr), ChairTally(evidence, self.thr)

    def add(self, before: CaptionDoc, after: CaptionDoc | None) -> None:
        if before.image_id is not None:
            self.images.add(before.image_id)
        self.before.add(before)
        if after is not None:
            self.after.add(after)

    def result(self, filter_kind: str | None = None, filter_source: str | None = None) -> dict:
        """The scores; ``circular`` when the filter used this very evidence (its kind and
        source, from its report)."""
        return {"evidence": self.kind, "source": self.source, "threshold": self.thr,
                "set_images": len(self.images),
                "covered": sum(1 for i in self.images if i in self.evidence),
                "circular": bool(filter_kind) and circular(filter_kind, filter_source,
                                                           self.kind, self.source),
                "before": self.before.result(),
                "after": self.after.result(),
                "on_parent": on_parent(self.before, self.after)}


def on_parent(before: ChairTally, after: ChairTally) -> dict:
    """The after-scores on the before-set's captions, each caption the filter emptied counted
    as an empty one (it mentions nothing, hallucinates nothing): the basis ``audit compare
    PARENT FILTERED`` scores the filtered set on, so both print one value (#46: 5.49 on 492
    survivors here, 5.40 on 500 there, the difference named nowhere). CHAIR_i is the
    survivors' (an empty caption adds no mention)."""
    n = before.n
    return {"captions": n, "emptied": n - after.n,
            "chair_s": round(100 * after.bad / n, 3) if n else None,
            "mentions_per_caption": round(after.ment / n, 3) if n else None}


def circular(filter_kind: str, filter_source: str | None, kind: str, source: str | None) -> bool:
    """True when the scoring evidence is the filter's own (same kind and same source)."""
    return kind == filter_kind and (source == filter_source or filter_source in (None, "given"))


def independent_chair(before: list[CaptionDoc], after: list[CaptionDoc], kind: str,
                      evidence: dict, source: str, *, filter_kind: str | None = None,
                      filter_source: str | None = None, threshold: float | None = None) -> dict:
    """Before/after CHAIR of a filtered set under ``evidence`` of ``kind`` from ``source``."""
    tally = IndependentTally(kind, evidence, source, threshold)
    for doc in before:
        tally.add(doc, None)
    for doc in after:
        tally.after.add(doc)
    return tally.result(filter_kind, filter_source)
