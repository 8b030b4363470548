"""One caption's analysis for the hallucination filter: sentence tokens, mentions, negation.

Why apart from the filter: the analysis is the filter's per-caption cost, done once per
caption and shared by the batch step that gathers the sentences to parse and by the
scoring that reads the notes (:class:`capaudit.filters.hallucination.HallucinationFilter`).
It is the audit's own view (the sentence spans and tokens of
:func:`capaudit.text.sentences.caption_sentences`, split once; the CHAIR mentions of
:func:`capaudit.text.mentions.sentence_mentions`), grouped by sentence, with the negation scope computed only for the
sentences that have a mention (the only ones whose scope is read).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import NamedTuple

from capaudit.filters.negation import negated_positions
from capaudit.text.mentions import ObjectMention, sentence_mentions
from capaudit.text.sentences import caption_sentences

__all__ = ["CaptionScan", "scan_caption", "ScanCache", "add_facts", "no_cyclic_gc",
           "NOTES", "NOTES_KEPT", "notes_text"]


class CaptionScan(NamedTuple):
    """What the filter reads of one caption."""

    spans: list[tuple[int, int]]               # ``sentence_spans(caption)``
    sents: list[list[str]]                     # the tokenizer's sentence tokens
    by_sent: dict[int, list[ObjectMention]]    # mentions by sentence, sentences in order
    negated: dict[int, set[int]]               # negated token positions, per sentence with a
    #                                            mention (empty without negation)


def scan_caption(caption: str, mode: str, negation: bool) -> CaptionScan:
    """The caption's sentence spans and tokens (one pass), mentions by sentence, and their
    negation scopes."""
    spans, sents = caption_sentences(caption)
    by_sent: dict[int, list[ObjectMention]] = {}
    for m in sentence_mentions(sents, mode):
        by_sent.setdefault(m.sentence_idx, []).append(m)
    negated = {si: negated_positions(sents[si]) for si in by_sent} if negation else {}
    return CaptionScan(spans, sents, by_sent, negated)


class ScanCache:
    """Scans by caption text for the batch being scored (a caption repeated in the batch is
    analysed once; its sentences seen in any earlier batch are not analysed again:
    :class:`~capaudit.filters.sentence_memo.SentenceMemo`), and their judgements against an image's evidence (:meth:`judged`). :meth:`new_batch` forgets the last batch: scans are large (every token),
    and kept longer they cost the cyclic collector more than re-analysing a caption that
    recurs later (tested on 100k distinct long captions); memory stays bounded by the batch.
    :meth:`get` also starts over beyond ``limit`` scans, for a caller that scores caption
    by caption without batches."""

    def __init__(self, mode: str, negation: bool, limit: int = 1024):
        from capaudit.filters.sentence_memo import SentenceMemo

        self.mode, self.negation, self.limit = mode, negation, limit
        self.scans: dict[str, CaptionScan] = {}
        self.judgements: dict[tuple, list] = {}
        self.supports: dict = {}
        self.memo = SentenceMemo(mode, negation)   # sentences outlive the batch: they recur

    def new_batch(self) -> None:
        self.scans.clear()
        self.judgements.clear()
        self.supports.clear()

    def support(self, image_id, evidence) -> dict | None:
        """``evidence.get(image_id)``, once per image and batch: the batch step and the scoring
        both ask, an image has several captions, and a columnar lookup builds a dict."""
        try:
            return self.supports[image_id]
        except KeyError:
            if len(self.supports) >= self.limit:
                self.supports.clear()
            hit = self.supports[image_id] = evidence.get(image_id)
            return hit

    def judged(self, doc, scan: CaptionScan, support: dict, thr: float, parse_rules: bool
               ) -> list[tuple]:
        """Per sentence with a mention, ``(index, mentions, supports, negated flags, parse?)``
        (``parse?``: ``None``, or when a parse rule is on and some mention is unsupported and
        not negated, a flag per mention: is it (the mentions whose notes are read)), kept per
        (caption, image) like the scans."""
        key = (doc.caption, doc.image_id)
        hit = self.judgements.get(key)
        if hit is None:
            if len(self.judgements) >= self.limit:
                self.judgements.clear()
            hit = self.judgements[key] = []
            check = getattr(support, "contradicted", None)   # counts, colours: references
            for si, sms in scan.by_sent.items():
                sups = [support.get(m.category, 0.0) for m in sms]
                if check is not None:
                    sups = [check(m.category, scan.sents[si], m.token_idx, s)
                            for m, s in zip(sms, sups)]
                neg = scan.negated.get(si)
                negated = [m.token_idx in neg for m in sms] if neg else [False] * len(sms)
                read = tuple(s is not None and s < thr and not n for s, n in zip(sups, negated))
                hit.append((si, sms, sups, negated, read if parse_rules and any(read) else None))
        return hit

    def get(self, caption: str) -> CaptionScan:
        hit = self.scans.get(caption)
        if hit is None:
            if len(self.scans) >= self.limit:
                self.scans.clear()
            known = self.memo.scan(caption)
            hit = self.scans[caption] = CaptionScan(*known) if known is not None else \
                scan_caption(caption, self.mode, self.negation)
        return hit


def add_facts(target, judged, thr: float, skip_non_visual: bool) -> None:
    """Judge one sentence's mentions into ``target`` (a :class:`SentenceScore`): ``judged``
    gives ``(mention, support, negated, parse note)`` each. Negated mentions and modifiers
    are noted, not judged; non-visual ones are judged only when not skipped; the sentence's
    score is the lowest support it judged."""
    facts = target.facts
    for m, sup, is_neg, note in judged:
        if is_neg:
            facts["negated"].append(m.word)
            continue
        named = f"{m.word}->{m.category}"
        if sup is None:   # no evidence can judge this object (reference evidence's vocabulary)
            facts.setdefault("undecided", []).append(named)
            continue
        if getattr(sup, "by", None):   # the evidence that gave it (reference evidence)
            named += f" [{sup.by}]"
        if note is not None and sup < thr:
            kind, why = note
            if kind == "modifier":  # "passenger" of "passenger airplanes"
                facts["modifier"].append(f"{named} (modifies {why})")
                continue
            facts["non_visual"].append(f"{named} ({why})")
            if skip_non_visual:
                continue
        target.score = min(target.score, sup)
        facts["unsupported" if sup < thr else "supported"].append(named)


@contextmanager
def no_cyclic_gc():
    """The cyclic collector off while a batch is scored: its tens of thousands of short-lived
    lists, tuples and dicts (tokens, mentions, facts) made it run again and again over the
    set's long-lived objects, ~20% of the filter's time for nothing (reference counting
    frees them all). Restored as it was, so a caller's setting stands."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


NOTES = ("non_visual", "modifier", "negated")      # noted beside an unsupported mention
NOTES_KEPT = (*NOTES, "supported", "undecided")   # and in a kept sentence's reason


def notes_text(facts: dict, keys: tuple[str, ...]) -> list[str]:
    """``["non-visual: person->person (purpose: to protect)", ...]`` for the facts present."""
    return [f"{key.replace('_', '-')}: " + ", ".join(facts[key]) for key in keys
            if facts.get(key)]
