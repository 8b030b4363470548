"""``hallucination``: drop (or flag) sentences that mention objects the evidence does not support.

Mentions come from the audit's own extractor
(:func:`capaudit.text.mentions.caption_mentions` over the CHAIR rules, ``reference`` mode
by default, ``corrected`` on request), so a sentence is judged by the words
the CHAIR metric counts. With ``non_visual="judge"`` and reference mode the
filter judges exactly those words, and CHAIR_s of the output set is 0 under
the same evidence (tested on every visible captioner set). That 0 is by
construction: measuring the filter's gain needs *other* evidence
(``capaudit filter run --score-evidence``; :mod:`capaudit.filters.rescore`).

Evidence (``evidence=``; when not given, the kind whose file is given):
``chair-gt``, ``instances`` or ``detector`` (:mod:`capaudit.filters.evidence`,
which also says when to use which). The filter reports the kind, where it was
read from and how many of the set's images it covers.

**Scoring** (per sentence): every non-negated mention gets its support; the
sentence score is the lowest support among the mentions it judges (1.0 when
none). A mention is *unsupported* when its support is below ``min_score``
(annotations: absent). Three kinds of mention are not claims that the
object is in the image, and are logged but not judged:

* negated ones ("no dog in sight", "a street without cars"):
  :mod:`capaudit.filters.negation`;
* non-visual ones, in generic or hypothetical clauses ("to protect people
  from sunlight", "attracts buyers"): :mod:`capaudit.filters.nonvisual`.
  ``non_visual="keep"`` (default) leaves them alone, ``"flag"`` keeps the
  sentence but marks it for review, ``"judge"`` judges them like any mention;
* in ``corrected`` mode only, object words that modify another object word
  ("passenger airplanes", "dog bed", "car seat"):
  :func:`capaudit.filters.parse.modifier_heads`. Reference mode keeps the
  reference's words exactly ("passenger jet" is one word there already).

The last two need a dependency parse (spaCy, the ``nlp`` extra), which runs
only on sentences with an unsupported mention and a word some rule needs
(:func:`capaudit.filters.parse.mention_notes`).

**Deciding** (``action=``): ``drop-sentence`` drops each sentence with an
unsupported mention (a caption left with no sentence leaves the set);
``drop-caption`` drops every sentence of a caption that has one; ``flag``
keeps everything and marks those sentences. Every sentence is logged with its
reason (``unsupported: cat->cat``, ``non-visual: person->person (purpose: to
protect)``, ``modifier: passenger->person (modifies airplanes)``,
``negated: dog``). Images the evidence does not cover are kept and logged
with reason ``no-evidence`` (``missing="drop"`` drops them instead).
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

from capaudit.errors import InputError
from capaudit.filters.declared import DEFAULTS
from capaudit.filters.base import (CaptionDoc, CaptionResult, Decision, Filter, FilterContext,
                                   SentenceScore)
from capaudit.filters.evidence import (EVIDENCE_KINDS, evidence_names, load_detections,
                                       load_evidence, resolve_evidence)
from capaudit.filters.negation import negated_positions
from capaudit.filters.nonvisual import NON_VISUAL_MODES
from capaudit.filters.parse import mention_notes, parser_available
from capaudit.filters.referents import flag_orphans
from capaudit.text.mentions import caption_mentions
from capaudit.text.objects import MODES

__all__ = ["HallucinationFilter", "load_evidence", "load_detections", "resolve_evidence",
           "EVIDENCE_KINDS"]

HALLU_ACTIONS = ("drop-sentence", "drop-caption", "flag")


# -- the filter -----------------------------------------------------------------
class HallucinationFilter(Filter):
    """Drop sentences that mention objects the evidence does not support."""

    name = "hallucination"
    version = "2"
    # analyses of recent captions kept for repeats: ~17 KB each at ShareGPT4V length, so the
    # cache, not the stream, would hold the memory (200,000 of them: 3.4 GB, #31)
    CACHE_CAPTIONS = 2048
    defaults: Mapping = DEFAULTS["hallucination"]  # declared in capaudit.filters.declared

    def __init__(self, evidence_map: dict[int, dict[str, float]] | None = None, **options):
        super().__init__(**options)
        o = self.options
        for key, allowed in (("action", HALLU_ACTIONS), ("missing", ("keep", "drop")),
                             ("non_visual", NON_VISUAL_MODES), ("object_mode", MODES)):
            if o[key] not in allowed:
                raise InputError(f"unknown {key.replace('_', '-')} '{o[key]}' for hallucination",
                                 fix=f"use one of {', '.join(allowed)}")
        self.evidence = evidence_map
        self.source = "given" if evidence_map is not None else None
        self._cache: dict[str, tuple] = {}
        self._counts: Counter = Counter()
        self._images: set = set()
        self._covered: set = set()
        self._foreign: set = set()   # ids of rows of another namespace: never joined

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

    @property
    def _modifiers(self) -> bool:
        """Compound modifiers are skipped in corrected mode; reference mode stays exact."""
        return self.options["object_mode"] == "corrected"

    @property
    def _non_visual(self) -> bool:
        return self.options["non_visual"] != "judge"

    def setup(self, context: FilterContext | None = None) -> None:
        if self.evidence is None:
            kind = self.kind
            ref = {"chair-gt": self.options["chair_gt"], "instances": self.options["instances"],
                   "detector": self.options["detections"]}.get(kind)
            self.evidence, self.source = resolve_evidence(kind, ref,
                                                          context.store if context else None)
        if context is not None and context.store is not None and context.set_name \
                and not context.guarded:
            from capaudit.audit.annotation_coverage import guard_evidence

            _, self._foreign = guard_evidence(
                context.store, context.set_name, self.kind, self.evidence.keys(),
                (self.source or "").removeprefix("file:"), float(self.options["min_coverage"]),
                bool(self.options["allow_partial"]))
        if self._modifiers or self._non_visual:
            parser_available()  # fail now, naming the extra, not at the first hallucination
        from capaudit.filters.stream import DistinctIds   # ~8 bytes per image, not a set's ~60

        self._counts, self._images, self._covered = Counter(), DistinctIds(), DistinctIds()

    def _analyse(self, caption: str):
        hit = self._cache.get(caption)
        if hit is None:
            sents, ments = caption_mentions(caption, self.options["object_mode"])
            neg = [negated_positions(s) for s in sents] if self.options["negation"] else None
            hit = (sents, ments, neg)
            if len(self._cache) >= self.CACHE_CAPTIONS:
                self._cache.clear()
            self._cache[caption] = hit
        return hit

    def _notes(self, sent: list[str], ments) -> tuple:
        """Parse notes (modifier / non-visual) for the mentions of one sentence."""
        if not (self._modifiers or self._non_visual):
            return (None,) * len(ments)
        return mention_notes(tuple(sent), tuple(m.token_idx for m in ments),
                             self.options["object_mode"], self._modifiers, self._non_visual)

    def score(self, doc: CaptionDoc) -> list[SentenceScore]:
        n_spans = len(doc.spans)
        scores = [SentenceScore(i, 1.0, {"unsupported": [], "negated": [], "supported": [],
                                         "non_visual": [], "modifier": []})
                  for i in range(n_spans)]
        support = self.evidence.get(doc.image_id) if doc.image_id is not None \
            and doc.image_id not in self._foreign else None
        if doc.image_id is not None:
            self._images.add(doc.image_id)
        else:
            self._counts["no_image_id"] += 1
        if support is None:
            for s in scores:
                s.score, s.facts["no_evidence"] = None, True
            return scores
        self._covered.add(doc.image_id)
        sents, ments, neg = self._analyse(doc.caption)
        aligned = len(sents) == n_spans
        thr = self.threshold
        by_sent: dict[int, list] = {}
        for m in ments:
            by_sent.setdefault(m.sentence_idx, []).append(m)
        for si, sms in by_sent.items():
            target = scores[si if aligned else 0]  # misaligned split: judge the caption whole
            sups = [support.get(m.category, 0.0) for m in sms]
            negated = [neg is not None and m.token_idx in neg[si] for m in sms]
            parse = any(sup < thr and not n for sup, n in zip(sups, negated))
            notes = self._notes(sents[si], sms) if parse else (None,) * len(sms)
            for m, sup, is_neg, note in zip(sms, sups, negated, notes):
                if is_neg:
                    target.facts["negated"].append(m.word)
                    continue
                named = f"{m.word}->{m.category}"
                if note is not None and sup < thr:
                    kind, why = note
                    if kind == "modifier":  # "passenger" of "passenger airplanes"
                        target.facts["modifier"].append(f"{named} (modifies {why})")
                        continue
                    target.facts["non_visual"].append(f"{named} ({why})")
                    if self._non_visual:
                        continue
                target.score = min(target.score, sup)
                target.facts["unsupported" if sup < thr else "supported"].append(named)
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
            f = s.facts
            self._counts["non_visual_mentions"] += len(f["non_visual"])
            self._counts["modifier_mentions"] += len(f["modifier"])
            u = f["unsupported"]
            notes = _notes_text(f, ("non_visual", "modifier", "negated"))
            if u:
                reason = "; ".join(["unsupported: " + ", ".join(u)] + notes)
            elif caption_bad and (action == "drop-caption" or whole):
                reason = "caption-has-unsupported: " + ", ".join(
                    x for b in bad for x in b.facts["unsupported"])
            else:
                for k in ("non_visual", "modifier"):
                    self._counts[f"{k}_sentences"] += bool(f[k])
                reason = "; ".join(notes + _notes_text(f, ("supported",))) or "no object mention"
                act = "flag" if f["non_visual"] and self.options["non_visual"] == "flag" \
                    else "keep"
                decisions.append(Decision(s.sentence_idx, act, reason, score=s.score))
                continue
            act = "flag" if action == "flag" else "drop"
            decisions.append(Decision(s.sentence_idx, act, reason, score=s.score))
        result, orphans = flag_orphans(CaptionResult(doc, decisions), doc.sentences)
        self._counts["review_sentences"] += orphans  # "These ..." after a dropped sentence
        return result

    def apply(self, docs):
        yield from super().apply(docs)
        self.report = self._report()

    def _report(self) -> dict:
        """Set-level facts: which evidence, how much of the set it covers, what the parse spared."""
        from capaudit.text.category_coverage import category_coverage

        n, c = len(self._images), len(self._covered)
        names = evidence_names(self.evidence)
        return {"evidence": {"kind": self.kind, "source": self.source,
                             # a category it never names: every mention of it is unsupported
                             "categories": category_coverage(
                                 names, self.options["object_mode"]).as_dict(),
                             "images_in_evidence": len(self.evidence or {}),
                             "set_images": n, "covered": c,
                             "captions_without_image_id": self._counts["no_image_id"],
                             "coverage": round(c / n, 4) if n else None},
                "review": {"sentences": self._counts["review_sentences"],
                           "why": "kept, but opens with a referring word right after a "
                                  "dropped sentence"},
                "parse": {"non_visual": self.options["non_visual"],
                          "modifiers": self._modifiers,
                          **{k: self._counts[k] for k in
                             ("non_visual_mentions", "non_visual_sentences",
                              "modifier_mentions", "modifier_sentences")}}}

    def config(self) -> dict:
        cfg = super().config()
        cfg["evidence"], cfg["threshold"] = self.kind, self.threshold
        cfg["evidence_source"] = self.source
        return cfg


def _notes_text(facts: dict, keys: tuple[str, ...]) -> list[str]:
    """``["non-visual: person->person (purpose: to protect)", ...]`` for the facts present."""
    return [f"{key.replace('_', '-')}: " + ", ".join(facts[key]) for key in keys if facts[key]]
