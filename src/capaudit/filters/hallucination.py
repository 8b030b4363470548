"""``hallucination``: drop (or flag) sentences that mention objects the evidence does not support.

Mentions come from the audit's own extractor
(:func:`capaudit.text.mentions.caption_mentions` over the CHAIR rules, ``reference`` mode
by default, ``corrected`` on request), so a sentence is judged by exactly the
words the CHAIR metric counts; after the filter, CHAIR_s of the output set is
0 under the same evidence (tested on every visible captioner set).

Evidence (``evidence=``; when not given, the kind whose file is given), per image, a
support score for each COCO category:

* ``chair-gt``: the CHAIR ground truth (instance categories plus objects from
  the human captions), 1.0 for a listed object;
* ``instances``: COCO instance categories, 1.0 for a present category;
* ``detector``: detector output, as ``capaudit detect --json`` writes it
  (``{"image_id", "detections": [{"category", "score", "box"}]}`` per line;
  ``label`` is accepted for ``category``, and flat ``{"image_id", "label",
  "score"}`` rows too); the support of a category is its highest score.

**Scoring** (per sentence): every non-negated mention gets its support; the
sentence score is the lowest support among them (1.0 when it mentions
nothing). A mention is *unsupported* when its support is below ``min_score``
(annotations: absent). Negated mentions ("no dog in sight", "a street
without cars", "is not holding a cup") are not evidence of hallucination and
are skipped; see :mod:`capaudit.filters.negation` for the rule.

**Deciding** (``action=``): ``drop-sentence`` drops each sentence with an
unsupported mention (a caption left with no sentence leaves the set);
``drop-caption`` drops every sentence of a caption that has one; ``flag``
keeps everything and marks those sentences. Images the evidence does not
cover are kept and logged with reason ``no-evidence`` (``missing="drop"``
drops them instead).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from capaudit.errors import InputError
from capaudit.filters.base import (CaptionDoc, CaptionResult, Decision, Filter, FilterContext,
                                   SentenceScore)
from capaudit.filters.negation import negated_positions
from capaudit.text.mentions import caption_mentions

__all__ = ["HallucinationFilter", "load_evidence", "load_detections"]

EVIDENCE_KINDS = ("chair-gt", "instances", "detector")
HALLU_ACTIONS = ("drop-sentence", "drop-caption", "flag")
_LABEL_ALIASES = {"tvmonitor": "tv", "tv monitor": "tv", "motorbike": "motorcycle",
                  "aeroplane": "airplane", "sofa": "couch", "diningtable": "dining table",
                  "pottedplant": "potted plant", "hair dryer": "hair drier", "doughnut": "donut",
                  "cellphone": "cell phone", "laptop computer": "laptop"}


# -- evidence -------------------------------------------------------------------
def _norm_label(label) -> str:
    lab = str(label).strip().lower().replace("_", " ")
    return _LABEL_ALIASES.get(lab, lab)


def load_detections(path: str | Path) -> dict[int, dict[str, float]]:
    """Detector output: per image, the highest score of each category."""
    from capaudit.io.annotations import _check_exists, _image_id, iter_jsonl

    path = Path(path)
    _check_exists(path)
    out: dict[int, dict[str, float]] = {}
    for row, rec in iter_jsonl(path):
        if "image_id" in rec and rec["image_id"] is None:
            continue  # `capaudit detect` output for an image without a COCO id
        iid = _image_id(rec, path, row)
        dets = rec.get("detections", rec.get("objects"))
        if dets is None:
            dets = [rec] if any(k in rec for k in ("label", "category", "class", "name")) else []
        best = out.setdefault(iid, {})
        for d in dets:
            if isinstance(d, str):
                label, score = d, 1.0
            else:
                label = d.get("label", d.get("category", d.get("class", d.get("name"))))
                score = d.get("score", d.get("confidence", 1.0))
            if label is None:
                raise InputError("a detection has no 'label'", path=path, row=row,
                                 fix='use {"image_id", "detections": [{"label", "score"}]}')
            try:
                score = float(score)
            except (TypeError, ValueError):
                raise InputError(f"detection score {score!r} is not a number", path=path,
                                 row=row) from None
            lab = _norm_label(label)
            if score > best.get(lab, -1.0):
                best[lab] = score
    return out


def _stored(store, kind: str, name: str) -> dict[int, dict[str, float]] | None:
    """A source stored with ``capaudit annotations add`` (None when there is none)."""
    if store is None:
        return None
    table, col = {"chair-gt": ("chair_gt", "object"),
                  "instances": ("instance_categories", "category")}.get(kind, (None, None))
    if table is None:
        return None
    from capaudit.store.annotations import source_rows

    rows = source_rows(store, table, col, name)
    if not rows:
        return None
    out: dict[int, dict[str, float]] = {}
    for iid, obj in rows:
        if obj is not None:
            out.setdefault(int(iid), {})[obj] = 1.0
        else:
            out.setdefault(int(iid), {})
    return out


def load_evidence(kind: str, ref: str | Path | None, store=None) -> dict[int, dict[str, float]]:
    """Evidence of ``kind`` from a file path (or a stored annotation source name)."""
    if kind not in EVIDENCE_KINDS:
        raise InputError(f"unknown evidence '{kind}'", fix=f"use one of {', '.join(EVIDENCE_KINDS)}")
    option = {"chair-gt": "--chair-gt", "instances": "--instances", "detector": "--detections"}[kind]
    if ref is None and store is not None and kind in ("chair-gt", "instances"):
        # like audit run: fall back to the most recent stored source of that kind
        from capaudit.io.annotation_store import _stored_source

        ref = _stored_source(store, kind, None)
    if ref is None:
        raise InputError(f"evidence '{kind}' needs a file", fix=f"pass {option} FILE, or "
                         f"store one with capaudit annotations add {kind} FILE")
    path = Path(ref)
    if not path.exists():
        stored = _stored(store, kind, str(ref))
        if stored is not None:
            return stored
        raise InputError("file not found", path=path,
                         fix=f"pass an existing file (or a stored annotation source) to {option}")
    if kind == "detector":
        return load_detections(path)
    from capaudit.io.annotations import load_chair_gt, load_instances

    sets = load_chair_gt(path) if kind == "chair-gt" else load_instances(path)[0]
    return {iid: dict.fromkeys(objs, 1.0) for iid, objs in sets.items()}


# -- the filter -----------------------------------------------------------------
class HallucinationFilter(Filter):
    """Drop sentences that mention objects the evidence does not support."""

    name = "hallucination"
    version = "1"
    defaults: Mapping = {"evidence": None, "chair_gt": None, "instances": None,
                         "detections": None, "min_score": None, "action": "drop-sentence",
                         "object_mode": "reference", "negation": True, "missing": "keep"}

    def __init__(self, evidence_map: dict[int, dict[str, float]] | None = None, **options):
        super().__init__(**options)
        if self.options["action"] not in HALLU_ACTIONS:
            raise InputError(f"unknown action '{self.options['action']}' for hallucination",
                             fix=f"use one of {', '.join(HALLU_ACTIONS)}")
        if self.options["missing"] not in ("keep", "drop"):
            raise InputError("missing must be 'keep' or 'drop'")
        self.evidence = evidence_map
        self._cache: dict[str, tuple] = {}

    @property
    def kind(self) -> str:
        """The evidence kind: ``evidence=`` or, if not given, the one whose file is given."""
        o = self.options
        if o["evidence"]:
            return o["evidence"]
        for kind, key in (("chair-gt", "chair_gt"), ("instances", "instances"),
                          ("detector", "detections")):
            if o[key] is not None:
                return kind
        return "chair-gt"

    @property
    def threshold(self) -> float:
        ms = self.options["min_score"]
        if ms is None:
            return 0.5 if self.kind == "detector" else 1.0
        return float(ms)

    def setup(self, context: FilterContext | None = None) -> None:
        if self.evidence is None:
            kind = self.kind
            ref = {"chair-gt": self.options["chair_gt"], "instances": self.options["instances"],
                   "detector": self.options["detections"]}.get(kind)
            self.evidence = load_evidence(kind, ref, context.store if context else None)

    def _analyse(self, caption: str):
        hit = self._cache.get(caption)
        if hit is None:
            sents, ments = caption_mentions(caption, self.options["object_mode"])
            neg = [negated_positions(s) for s in sents] if self.options["negation"] else None
            hit = (len(sents), ments, neg)
            if len(self._cache) > 200_000:
                self._cache.clear()
            self._cache[caption] = hit
        return hit

    def score(self, doc: CaptionDoc) -> list[SentenceScore]:
        n_spans = len(doc.spans)
        scores = [SentenceScore(i, 1.0, {"unsupported": [], "negated": [], "supported": []})
                  for i in range(n_spans)]
        support = self.evidence.get(doc.image_id) if doc.image_id is not None else None
        if support is None:
            for s in scores:
                s.score, s.facts["no_evidence"] = None, True
            return scores
        n_sents, ments, neg = self._analyse(doc.caption)
        aligned = n_sents == n_spans
        thr = self.threshold
        for cat, word, si, ti in ments:
            target = scores[si if aligned else 0]  # misaligned split: judge the caption whole
            if neg is not None and ti in neg[si]:
                target.facts["negated"].append(word)
                continue
            sup = support.get(cat, 0.0)
            target.score = min(target.score, sup)
            target.facts["unsupported" if sup < thr else "supported"].append(f"{word}->{cat}")
        if not aligned:
            for s in scores:
                s.facts["whole_caption"] = True
        return scores

    def decide(self, doc: CaptionDoc, scores: list[SentenceScore]) -> CaptionResult:
        action = self.options["action"]
        if scores and scores[0].facts.get("no_evidence"):
            act = "drop" if self.options["missing"] == "drop" else "keep"
            return CaptionResult(doc, [Decision(s.sentence_idx, act, "no-evidence")
                                       for s in scores])
        bad = [s for s in scores if s.facts["unsupported"]]
        whole = bool(scores and scores[0].facts.get("whole_caption"))
        caption_bad = bool(bad)
        decisions = []
        for s in scores:
            u = s.facts["unsupported"]
            neg = s.facts["negated"]
            if u:
                reason = "unsupported: " + ", ".join(u)
            elif caption_bad and (action == "drop-caption" or whole):
                reason = "caption-has-unsupported: " + ", ".join(
                    x for b in bad for x in b.facts["unsupported"])
            else:
                reason = ("negated: " + ", ".join(neg)) if neg else ""
                decisions.append(Decision(s.sentence_idx, "keep", reason, score=s.score))
                continue
            act = "flag" if action == "flag" else "drop"
            decisions.append(Decision(s.sentence_idx, act, reason, score=s.score))
        return CaptionResult(doc, decisions)

    def config(self) -> dict:
        cfg = super().config()
        cfg["evidence"], cfg["threshold"] = self.kind, self.threshold
        return cfg
