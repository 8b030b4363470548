"""Per-caption views for filters: sentence character spans and object mentions by sentence.

Why this lives in :mod:`capaudit.text` and not in a filter: a filter must judge a
sentence by exactly the words the audit counts, at exactly the sentence
boundaries the audit uses, or "CHAIR_s is 0 after the hallucination filter"
stops being true. Both views here are derived from the audit's own tokenizer
and extractor (:func:`capaudit.text.records.analyse_caption`); nothing here
re-implements a rule, it only converts positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from capaudit.text.sentences import sentence_spans

__all__ = ["sentence_spans", "caption_mentions", "sentence_mentions", "ObjectMention", "CaptionDoc"]


class ObjectMention(NamedTuple):
    """One object word of a caption, located within its sentence."""

    category: str        # COCO category, e.g. "dining table"
    word: str            # the synonym as the lexicon lists it, e.g. "table"
    sentence_idx: int    # index into ``sentence_spans(caption)`` / the sentence tokens
    token_idx: int       # token index within that sentence


def caption_mentions(caption: str, mode: str = "reference"
                     ) -> tuple[list[list[str]], list[ObjectMention]]:
    """``(sentence tokens, mentions)`` of one caption, mentions in caption order.

    The mentions are the CHAIR mentions of
    :func:`capaudit.text.records.analyse_caption` (``reference`` or
    ``corrected`` object rules); their caption-level token index is turned into
    a position within the sentence, which negation scope and sentence-level
    filters need.
    """
    from capaudit.text.tokenize import tokenize_caption

    sents = tokenize_caption(caption)[0]
    return sents, sentence_mentions(sents, mode)


def sentence_mentions(sents: list[list[str]], mode: str = "reference") -> list[ObjectMention]:
    """The mentions of a caption given as its sentence tokens (see :func:`caption_mentions`;
    a caller that already has the tokens, e.g. from
    :func:`~capaudit.text.sentences.caption_sentences`, does not tokenize again)."""
    from capaudit.text.objects import get_lexicon
    from capaudit.text.records import sentence_objects

    starts, acc = [], 0
    for s in sents:
        starts.append(acc)
        acc += len(s)
    lex = get_lexicon(mode)
    cats, words = lex.categories, lex.words
    return [ObjectMention(cats[c], words[w], s, t - starts[s])  # (Python ints: no numpy here)
            for w, c, t, s in sentence_objects(sents, mode)]


@dataclass
class CaptionDoc:
    """One caption of the input set, with its sentences split lazily (at the audit's own
    sentence boundaries: filters and judges read the same sentences the metrics count)."""

    row_idx: int
    image_id: int | None
    caption: str
    image_key: str | None = None
    meta: dict = field(default_factory=dict)
    _spans: list[tuple[int, int]] | None = field(default=None, repr=False)

    @property
    def spans(self) -> list[tuple[int, int]]:
        if self._spans is None:
            self._spans = sentence_spans(self.caption)
            if not self._spans:  # empty / blank caption: one empty sentence
                self._spans = [(0, len(self.caption))]
        return self._spans

    def adopt_spans(self, spans: list[tuple[int, int]]) -> None:
        """Take ``sentence_spans(self.caption)`` computed elsewhere (a filter that split the
        caption once for spans and tokens, :func:`~capaudit.text.sentences.caption_sentences`),
        unless the spans are known already."""
        if self._spans is None:
            self._spans = spans or [(0, len(self.caption))]

    @property
    def sentences(self) -> list[str]:
        return [self.caption[a:b] for a, b in self.spans]
