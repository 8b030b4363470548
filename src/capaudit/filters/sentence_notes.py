"""Parse notes of sentences for the hallucination filter: gated, batched, remembered.

Why apart from :mod:`capaudit.filters.parse` (the rules on one parse): this is the filter's
cost control. A sentence is parsed only when a rule's cue concerns a mention whose note will
be read (:func:`capaudit.filters.parse._parse_plan`), the sentences of a batch of captions are
parsed together (``nlp.pipe``), and a parsed sentence's notes are kept by its text, since
corpora repeat sentences.
"""

from __future__ import annotations

from capaudit.filters.parse import (_NOTES, NOTES_LIMIT, _notes_from, _rules_cued, mention_span,
                                    parse_many, parse_tokens)

__all__ = ["SentenceNotes"]


class SentenceNotes:
    """Parse notes of sentences for one filter setting, cached by sentence text and parsed in
    batches (``nlp.pipe``: on long captions, ~2x less CPU than one call per sentence, with
    identical parses; ``tests/test_filter_identity.py``).

    :meth:`fill` takes the sentences a batch of captions will ask about and parses those the
    cache lacks and the gate lets through; :meth:`get` answers one sentence (parsing it alone
    if :meth:`fill` did not see it). The key is the sentence's tokens joined by a space (one
    string, not a tuple of them: tokens come from ``str.split``, so none holds a space and the
    join is one-to-one) and the mentions' first tokens."""

    def __init__(self, mode: str, modifiers: bool, non_visual: bool):
        self.setting = (mode, modifiers, non_visual)
        self.cache = _NOTES.setdefault(self.setting, {})

    def get(self, tokens: list[str], starts: tuple[int, ...], read=None) -> tuple:
        """The notes of a sentence's mentions; ``read``: which of them will be read (those
        unsupported and not negated; ``None``: all). A sentence whose read mentions no rule's
        cue concerns gets ``None`` notes unparsed, kept under a key of its own."""
        key = (" ".join(tokens), starts)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache.get((*key, read))
        if hit is None:  # a caller scoring without :meth:`fill`: one sentence, one parse
            if len(self.cache) > NOTES_LIMIT:
                self.cache.clear()
            plan = self._plan(tokens, starts, read)
            if plan is None:
                hit = self.cache[(*key, read)] = (None,) * len(starts)
            else:
                hit = self.cache[key] = _notes_from(parse_tokens(list(tokens)), tokens, *plan)
        return hit

    def _plan(self, tokens, starts, read):
        """``None`` when no rule's cue concerns a mention in ``read`` (no parse); else the
        mentions' spans and the rules to parse for, cued by any mention: the notes of every
        mention, whatever ``read``, so that they stand for any image."""
        mode, modifiers, non_visual = self.setting
        spans = [mention_span(tokens, i, mode) for i in starts]
        if not any(_rules_cued(tokens, spans, modifiers, non_visual, read)):
            return None
        return spans, *_rules_cued(tokens, spans, modifiers, non_visual)

    def fill(self, sentences) -> None:
        """Note ``(tokens, mention starts, read)`` triples ahead of :meth:`get`, parsing in one
        batch."""
        if len(self.cache) > NOTES_LIMIT:
            self.cache.clear()
        pending: dict[tuple, tuple] = {}
        for tokens, starts, read in sentences:
            key = (" ".join(tokens), starts)
            if key in self.cache or key in pending or (*key, read) in self.cache:
                continue
            plan = self._plan(tokens, starts, read)
            if plan is None:
                self.cache[(*key, read)] = (None,) * len(starts)
            else:
                pending[key] = (tokens, *plan)
        if pending:
            docs = parse_many([p[0] for p in pending.values()])
            for (key, noted), doc in zip(pending.items(), docs):
                self.cache[key] = _notes_from(doc, *noted)
