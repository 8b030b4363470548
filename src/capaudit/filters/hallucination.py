"""``hallucination``: drop (or flag) sentences that mention objects the evidence does not support.

Mentions come from the audit's own extractor
(:func:`capaudit.text.mentions.caption_mentions` over the CHAIR rules, ``corrected`` mode
by default: of the sentences each mode drops on the real captioner and VLM files, it drops
12 that name only objects the image holds against 71 for ``reference``, docs/filters.md),
so a sentence is judged by the words the CHAIR metric counts. With ``non_visual="judge"`` and
``object_mode="reference"`` the filter judges exactly those words, and CHAIR_s of the output
set is 0 under the same evidence (tested on every visible captioner set). That 0 is by
construction: measuring the filter's gain needs *other* evidence (``capaudit filter run
--score-evidence``; :mod:`capaudit.filters.rescore`).

Evidence (``evidence=``; when not given, the kind whose file is given): ``chair-gt``,
``instances`` or ``detector`` (:mod:`capaudit.filters.evidence`, which also says when to use
which). The filter reports the kind, where it was read from and how many of the set's images
it covers.

**Scoring** (per sentence): every non-negated mention gets its support; the sentence score
is the lowest support among the mentions it judges (1.0 when none). A mention is
*unsupported* when its support is below ``min_score`` (annotations: absent). Three kinds of
mention are not claims that the object is in the image, and are logged but not judged:

* negated ones ("no dog in sight", "a street without cars"): :mod:`capaudit.filters.negation`;
* non-visual ones, in generic or hypothetical clauses ("to protect people from sunlight",
  "attracts buyers"): :mod:`capaudit.filters.nonvisual`. ``non_visual="keep"`` (default)
  leaves them alone, ``"flag"`` keeps the sentence but marks it for review, ``"judge"``
  judges them like any mention;
* in ``corrected`` mode only, object words that modify another object word ("passenger
  airplanes", "dog bed", "car seat"): :func:`capaudit.filters.parse.modifier_heads`.
  Reference mode keeps the reference's words exactly ("passenger jet" is one word there).

The last two need a dependency parse (spaCy, the ``nlp`` extra), which runs only on sentences
with an unsupported mention and a word some rule needs
(:func:`capaudit.filters.parse.mention_notes`). :meth:`HallucinationFilter.apply` takes
:data:`BATCH` captions at a time: each is analysed once (:mod:`capaudit.filters.mention_scan`),
the batch's sentences to parse are parsed together (:mod:`capaudit.filters.sentence_notes`),
then each caption is scored and decided: one result per caption, in order, memory bounded.

**Deciding** (``action=``): ``drop-sentence`` drops each sentence with an unsupported mention
(a caption left with no sentence leaves the set); ``drop-caption`` drops every sentence of a
caption that has one; ``flag`` keeps everything and marks those sentences. Every sentence is
logged with its reason (``unsupported: cat->cat``, ``non-visual: person->person (purpose: to
protect)``, ``modifier: passenger->person (modifies airplanes)``, ``negated: dog``). Images the
evidence does not cover are kept, reason ``no-evidence`` (``missing="drop"``: dropped).
``judge=`` (off by default) asks an LLM/VLM judge about the sentences the evidence keeps
undecided, and only those: :mod:`capaudit.filters.undecided_judge`.
"""

from __future__ import annotations

from collections import Counter
from itertools import islice, repeat
from typing import Mapping

from capaudit.errors import InputError
from capaudit.filters.declared import DEFAULTS
from capaudit.filters.base import (CaptionDoc, CaptionResult, Decision, Filter, FilterContext,
                                   SentenceScore)
from capaudit.filters.evidence import evidence_names, given_kind, load_evidence
from capaudit.filters.mention_scan import (NOTES, NOTES_KEPT, ScanCache, add_facts, no_cyclic_gc,
                                           notes_text)
from capaudit.filters.nonvisual import NON_VISUAL_MODES
from capaudit.filters.parse import parser_available
from capaudit.filters.sentence_notes import SentenceNotes
from capaudit.filters.referents import flag_orphans
from capaudit.text.objects import MODES, VISUAL_MODE

__all__ = ["HallucinationFilter", "load_evidence"]

HALLU_ACTIONS = ("drop-sentence", "drop-caption", "flag")
#: captions scored per batch by :meth:`HallucinationFilter.apply` (their parses run together)
BATCH = 512


# -- the filter -----------------------------------------------------------------
class HallucinationFilter(Filter):
    """Drop sentences that mention objects the evidence does not support."""

    name = "hallucination"
    version = "2"
    defaults: Mapping = DEFAULTS["hallucination"]  # declared in capaudit.filters.declared

    def __init__(self, evidence_map: dict[int, dict[str, float]] | None = None, **options):
        super().__init__(**options)
        o = self.options
        for key, allowed in (("action", HALLU_ACTIONS), ("missing", ("keep", "drop")),
                             ("non_visual", NON_VISUAL_MODES),
                             ("object_mode", (*MODES, VISUAL_MODE))):
            if o[key] not in allowed:
                raise InputError(f"unknown {key.replace('_', '-')} '{o[key]}' for hallucination",
                                 fix=f"use one of {', '.join(allowed)}")
        self.evidence = evidence_map
        self.source = "given" if evidence_map is not None else None
        self._scans = ScanCache(o["object_mode"], bool(o["negation"]))
        self._notes = SentenceNotes(o["object_mode"], self._modifiers, self._non_visual)
        self._counts, self._judge = Counter(), None   # the undecided judge: setup builds it
        self._images: set = set()
        self._covered: set = set()
        self._foreign: set = set()   # ids of rows of another namespace: never joined

    @property
    def kind(self) -> str:
        """The evidence kind: ``evidence=`` or, if not given, the one whose file is given."""
        return given_kind(self.options) or "chair-gt"

    @property
    def threshold(self) -> float:
        ms = self.options["min_score"]
        if ms is None:
            return 0.5 if self.kind == "detector" else 1.0
        return float(ms)

    @property
    def _modifiers(self) -> bool:
        """Compound modifiers are skipped in corrected mode; reference mode stays exact."""
        return self.options["object_mode"] in ("corrected", VISUAL_MODE)

    _non_visual = property(lambda self: self.options["non_visual"] != "judge")
    #: whether a sentence may be parsed (the compound rule, or non-visual cues): spaCy loaded
    parses = property(lambda self: self._modifiers or self._non_visual)

    def setup(self, context: FilterContext | None = None) -> None:
        if self.evidence is None:   # the kind's evidence, with the references when given
            from capaudit.filters.reference_evidence import setup_evidence

            self.evidence, self.source = setup_evidence(self, context)
        from capaudit.io.annotation_store import source_sha256   # the lineage's identity (#34.3)

        self.evidence_sha256 = source_sha256(context.store if context else None, self.source)
        if context is not None and context.store is not None and context.set_name \
                and not context.guarded:
            from capaudit.audit.annotation_coverage import guard_evidence

            _, self._foreign = guard_evidence(
                context.store, context.set_name, self.kind, self.evidence.keys(),
                (self.source or "").removeprefix("file:"), float(self.options["min_coverage"]),
                bool(self.options["allow_partial"]))
        if self.parses:
            parser_available()  # fail now, naming the extra, not at the first hallucination
        from capaudit.filters.undecided_judge import undecided_judge

        self._judge = self._judge.anew() if self._judge else undecided_judge(self.options)
        from capaudit.filters.stream import DistinctIds   # ~8 bytes per image, not a set's ~60

        self._counts, self._images, self._covered = Counter(), DistinctIds(), DistinctIds()

    def _support(self, doc: CaptionDoc) -> dict | None:
        """The evidence of the caption's image (None: not covered, or another namespace)."""
        if doc.image_id is None or doc.image_id in self._foreign:
            return None
        return self._scans.support(doc.image_id, self.evidence)

    def _judged(self, doc: CaptionDoc, scan, support: dict) -> list[tuple]:
        """Per sentence with a mention: ``(index, mentions, supports, negated, parse?)``,
        computed once per caption and image in a batch (for the parse, then for the score)."""
        return self._scans.judged(doc, scan, support, self.threshold, self.parses)

    def _prepare(self, docs: list[CaptionDoc]) -> None:
        """Analyse a batch of captions and parse, together, the sentences scoring will ask
        about (the same questions :meth:`score` asks, in the same way)."""
        self._scans.new_batch()
        wanted = []
        for doc in docs:
            support = self._support(doc)
            if support is None:
                continue
            scan = self._scans.get(doc.caption)
            wanted += [(scan.sents[si], tuple(m.token_idx for m in sms), parse)
                       for si, sms, _, _, parse in self._judged(doc, scan, support) if parse]
        self._notes.fill(wanted)

    def score(self, doc: CaptionDoc) -> list[SentenceScore]:
        support = self._support(doc)
        if doc.image_id is not None:
            self._images.add(doc.image_id)
        else:
            self._counts["no_image_id"] += 1
        scan = None if support is None else self._scans.get(doc.caption)
        if scan is not None:
            doc.adopt_spans(scan.spans)  # split once, for the spans and the tokens
        n_spans = len(doc.spans)
        scores = [SentenceScore(i, 1.0, {"unsupported": [], "negated": [], "supported": [],
                                         "non_visual": [], "modifier": []})
                  for i in range(n_spans)]
        if scan is None:
            for s in scores:
                s.score, s.facts["no_evidence"] = None, True
            return scores
        self._covered.add(doc.image_id)
        aligned = len(scan.sents) == n_spans
        thr, skip_nv = self.threshold, self._non_visual
        for si, sms, sups, negated, parse in self._judged(doc, scan, support):
            target = scores[si if aligned else 0]  # misaligned split: judge the caption whole
            notes = self._notes.get(scan.sents[si], tuple(m.token_idx for m in sms), parse) \
                if parse else repeat(None)
            add_facts(target, zip(sms, sups, negated, notes), thr, skip_nv)
        if not aligned:
            for s in scores:
                s.facts["whole_caption"] = True
        return scores

    def decide(self, doc: CaptionDoc, scores: list[SentenceScore]) -> CaptionResult:
        opts = self.options
        if scores and scores[0].facts.get("no_evidence"):
            act = "drop" if opts["missing"] == "drop" else "keep"
            return CaptionResult(doc, [Decision(s.sentence_idx, act, "no-evidence")
                                       for s in scores])
        bad = [s for s in scores if s.facts["unsupported"]]
        whole = bool(scores and scores[0].facts.get("whole_caption"))
        drop_all = bool(bad) and (opts["action"] == "drop-caption" or whole)
        bad_act = "flag" if opts["action"] == "flag" else "drop"
        flag_nv = opts["non_visual"] == "flag"
        seen = [0, 0, 0, 0]  # non-visual / modifier mentions, then sentences kept with them
        decisions, bad_reason = [], None
        for s in scores:
            f = s.facts
            nv, mod, u = f["non_visual"], f["modifier"], f["unsupported"]
            seen[0] += len(nv)
            seen[1] += len(mod)
            if u:
                act = bad_act
                reason = "; ".join(["unsupported: " + ", ".join(u)] + notes_text(f, NOTES))
            elif drop_all:
                act = bad_act
                if bad_reason is None:
                    bad_reason = "caption-has-unsupported: " + ", ".join(
                        x for b in bad for x in b.facts["unsupported"])
                reason = bad_reason
            else:
                seen[2] += bool(nv)
                seen[3] += bool(mod)
                act = "flag" if nv and flag_nv else "keep"
                reason = "; ".join(notes_text(f, NOTES_KEPT)) \
                    if nv or mod or f["negated"] or f["supported"] or f.get("undecided") \
                    else "no object mention"
            decisions.append(Decision(s.sentence_idx, act, reason, score=s.score))
        for key, n in zip(("non_visual_mentions", "modifier_mentions", "non_visual_sentences",
                           "modifier_sentences"), seen):
            self._counts[key] += n
        result = CaptionResult(doc, decisions)
        if bad_act == "drop" and bad:  # "These ..." right after a dropped sentence
            result, orphans = flag_orphans(result, doc.sentences)
            self._counts["review_sentences"] += orphans
        return result

    def apply(self, docs):
        """Score and decide in batches of :data:`BATCH` (one result per caption, in order)."""
        it = iter(docs)
        while batch := list(islice(it, BATCH)):
            with no_cyclic_gc():
                self._prepare(batch)
                results = [self.decide(doc, self.score(doc)) for doc in batch] \
                    if self._judge is None else self._judge.settle(self, batch)
                self._scans.new_batch()  # freed before the collector runs again
            yield from results

    @property
    def report(self) -> dict:
        """Set-level facts: which evidence, how much of the set it covers, what the parse
        spared; counted when read (the stream's end), never per batch: counting distinct
        images sorts every id seen so far."""
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
                              "modifier_mentions", "modifier_sentences")}},
                **({"judge": self._judge.report} if self._judge else {})}

    def config(self) -> dict:
        cfg = super().config()
        cfg["evidence"], cfg["threshold"] = self.kind, self.threshold
        cfg["evidence_source"] = self.source
        cfg["evidence_sha256"] = getattr(self, "evidence_sha256", None)
        return cfg

