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

__all__ = ["chair_scores", "independent_chair", "parse_score_evidence", "circular"]


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


def chair_scores(docs: Iterable[CaptionDoc], evidence: dict, threshold: float = 1.0) -> dict:
    """CHAIR_s, CHAIR_i and mentions per caption over the captions ``evidence`` covers."""
    from capaudit.filters.hallucination import HallucinationFilter

    judge = HallucinationFilter(evidence, negation=False, non_visual="judge",
                                object_mode="reference", min_score=threshold)
    n = bad = ment = halluc = 0
    for doc in docs:
        if doc.image_id is None or doc.image_id not in evidence:
            continue
        scores = judge.score(doc)
        u = sum(len(s.facts["unsupported"]) for s in scores)
        n += 1
        bad += u > 0
        halluc += u
        ment += u + sum(len(s.facts["supported"]) for s in scores)
    return {"captions": n,
            "chair_s": round(100 * bad / n, 3) if n else None,
            "chair_i": round(100 * halluc / ment, 3) if ment else None,
            "mentions_per_caption": round(ment / n, 3) if n else None}


def circular(filter_kind: str, filter_source: str | None, kind: str, source: str | None) -> bool:
    """True when the scoring evidence is the filter's own (same kind and same source)."""
    return kind == filter_kind and (source == filter_source or filter_source in (None, "given"))


def independent_chair(before: list[CaptionDoc], after: list[CaptionDoc], kind: str,
                      evidence: dict, source: str, *, filter_kind: str | None = None,
                      filter_source: str | None = None, threshold: float | None = None) -> dict:
    """Before/after CHAIR of a filtered set under ``evidence`` of ``kind`` from ``source``."""
    thr = threshold if threshold is not None else (0.5 if kind == "detector" else 1.0)
    images = {d.image_id for d in before if d.image_id is not None}
    covered = sum(1 for i in images if i in evidence)
    return {"evidence": kind, "source": source, "threshold": thr,
            "set_images": len(images), "covered": covered,
            "circular": bool(filter_kind) and circular(filter_kind, filter_source, kind, source),
            "before": chair_scores(before, evidence, thr),
            "after": chair_scores(after, evidence, thr)}
