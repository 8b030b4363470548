"""The hallucination filter's caption analysis, remembered sentence by sentence.

Why: corpora repeat sentences far more than whole captions. LLM captions share their
framing sentences, web and COCO-style captions recur with small changes, and a corpus
enriched copy by copy (issue #31's benchmark, ShareGPT4V-PT's 1.2M captions from 100k
images) holds the same sentences in other orders. Tokenizing a caption and finding its
mentions was half of the filter's CPU; a sentence seen before now costs a dict lookup.

Why it is exact: the audit's tokens of a sentence are NLTK's word tokens of that Punkt
sentence's text (:mod:`capaudit.text.tokenize`), a function of the sentence's text alone;
its mentions are :meth:`~capaudit.text.objects.ObjectLexicon.word_hits` of its singularized
tokens, also its own, except where a multi-word entry could start in its last two tokens
and run into the next sentence (:meth:`~capaudit.text.objects.ObjectLexicon.may_join`) and
for the caption-wide toilet/seat rule, which is applied to the caption's hits together
(:meth:`~capaudit.text.objects.ObjectLexicon.caption_hits`). A caption this cannot vouch for
(off the tokenizer's fast path, a sentence that may join the next, spans and tokens that do
not align) is answered ``None`` and analysed whole by the caller. Negation scopes are
computed per sentence. ``tests/test_sentence_memo.py`` checks the result equals
:func:`capaudit.filters.mention_scan.scan_caption` on every shared caption, in any order.

Memory: at most :data:`LIMIT` sentences (~1.5 KB each for a ShareGPT4V sentence), forgotten
together when full.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from capaudit.filters.negation import negated_positions
from capaudit.text.fast_tokenize import _problem, _proven
from capaudit.text.mentions import ObjectMention
from capaudit.text.objects import get_lexicon
from capaudit.text.sentences import _fast_spans
from capaudit.text.singularize import singular_tokens

__all__ = ["SentenceMemo", "LIMIT"]

LIMIT = 16_384


class _Sentence(NamedTuple):
    tokens: list[str]
    hits: list[tuple[str, int]]     # lexicon word, token index (before the caption rule)
    joins: bool                     # a multi-word entry may start in its last two tokens
    negated: set[int] | None        # negated positions (computed when it has a hit)


class SentenceMemo:
    """Sentences already analysed, for one object mode and negation setting."""

    def __init__(self, mode: str, negation: bool, limit: int = LIMIT):
        self.mode, self.negation, self.limit = mode, negation, limit
        self.lexicon = get_lexicon(mode)
        self.known: dict[str, _Sentence] = {}

    def scan(self, caption: str):
        """``(spans, sentence tokens, mentions by sentence, negated by sentence)`` as
        :func:`~capaudit.filters.mention_scan.scan_caption` gives them, or ``None`` for a
        caption the memo cannot vouch for."""
        text = caption.lower()
        if len(text) != len(caption) or _problem(text) >= 0:
            return None
        spans = _fast_spans(text, 0, len(text))
        known = self.known
        got = [known.get(text[a:b]) for a, b in spans]
        if None in got:
            got = self._learn(text, spans)
            if got is None:
                return None
        return self._combine(spans, got)

    def _learn(self, text: str, spans: list[tuple[int, int]]) -> list[_Sentence] | None:
        """Analyse the caption's sentences (tokens from one pass over the whole caption, as
        the audit makes them) and remember them."""
        sents = _proven(text, with_line=False)[0]
        if len(sents) != len(spans):
            return None
        if len(self.known) + len(spans) > self.limit:
            self.known.clear()
        lex, out, at = self.lexicon, [], 0
        # the caption's tokens singularized in one call (a sentence's are its slice)
        singular = singular_tokens([t for tokens in sents for t in tokens], self.mode)
        for (a, b), tokens in zip(spans, sents):
            sing = singular[at:at + len(tokens)]
            at += len(tokens)
            hits = lex.word_hits(sing)
            neg = negated_positions(tokens) if hits and self.negation else None
            entry = self.known[text[a:b]] = _Sentence(tokens, hits, lex.may_join(sing), neg)
            out.append(entry)
        return out

    def _combine(self, spans, got: list[_Sentence]):
        last = len(got) - 1
        raw, ends, acc = [], [], 0
        for si, s in enumerate(got):
            if s.joins and si < last:
                return None
            if s.hits:
                raw += [(w, acc + i) for w, i in s.hits] if acc else s.hits
            acc += len(s.tokens)
            ends.append(acc)
        by_sent: dict[int, list[ObjectMention]] = {}
        if raw:
            lex = self.lexicon
            cats, words = lex.categories, lex.words
            for w, c, t in lex.caption_hits(raw):
                si = bisect_right(ends, t)
                start = ends[si - 1] if si else 0
                by_sent.setdefault(si, []).append(ObjectMention(cats[c], words[w], si, t - start))
        negated = {si: got[si].negated for si in by_sent} if self.negation else {}
        return spans, [s.tokens for s in got], by_sent, negated
