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

from typing import NamedTuple

from capaudit.filters.negation import negated_positions
from capaudit.text.mentions import ObjectMention, sentence_mentions
from capaudit.text.sentences import caption_sentences

__all__ = ["CaptionScan", "scan_caption", "ScanCache"]


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
    """Scans by caption text, kept for a batch plus recent repeats (model captions repeat).

    At most ``limit`` scans outlive a batch: :meth:`new_batch` starts over beyond it (and
    :meth:`get` beyond four times as many, for a caller scoring without batches), so a long
    run's memory does not grow with the set."""

    def __init__(self, mode: str, negation: bool, limit: int = 1024):
        self.mode, self.negation, self.limit = mode, negation, limit
        self.scans: dict[str, CaptionScan] = {}

    def new_batch(self) -> None:
        if len(self.scans) > self.limit:
            self.scans.clear()

    def get(self, caption: str) -> CaptionScan:
        hit = self.scans.get(caption)
        if hit is None:
            if len(self.scans) >= 4 * self.limit:
                self.scans.clear()
            hit = self.scans[caption] = scan_caption(caption, self.mode, self.negation)
        return hit
