"""Dependency parses for the hallucination filter, on the audit's own tokens.

Why a parse: two questions the CHAIR word rules cannot answer need the sentence's
structure, and both decide whether an unsupported object word claims the object is there:

* is the word a *modifier* of another object word ("passenger airplanes", "dog bed", "car
  seat")? Then it names a kind of the other object, not one of its own (:func:`modifier_heads`);
* does it sit in a generic or hypothetical clause ("to protect people from sunlight",
  "attracts buyers")? See :mod:`capaudit.filters.nonvisual`.

The parse is spaCy's (``pip install 'capaudit[nlp]'``: spaCy and its small English model),
on a :class:`spacy.tokens.Doc` built from the audit's sentence tokens, so token ``i`` of the
parse is token ``i`` of every mention (no re-tokenizing, no drift). The filter only parses
sentences with an unsupported mention and a rule's cue, whose fate a parse can change.
"""

from __future__ import annotations

from functools import lru_cache

from capaudit.filters.spacy_pipeline import (SPACY_MODELS, UNREAD, _nlp,  # noqa: F401 (tests)
                                             parser_available, token_lemma)

__all__ = ["parse_tokens", "parse_many", "token_lemma", "parser_available", "warm_parser",
           "mention_span",
           "modifier_heads", "mention_notes", "non_visual_cue", "MODIFIER_DEPS", "SPACY_MODELS"]

#: dependency labels by which a noun modifies the noun it depends on
MODIFIER_DEPS = frozenset({"compound", "amod", "nmod"})
#: a modifier is at most this many tokens before the word it modifies ("orange striped umbrella")
MODIFIER_GAP = 3
_BREAKS = frozenset({"and", "or", "but", "nor", ",", ";", ":", ".", "with", "of", "on", "in", "at",
                     "by", "near", "next", "to", "from", "under", "over", "a", "an", "the", "is",
                     "are", "while", "as"})


def parse_tokens(tokens: list[str]):
    """spaCy parse of one sentence given as the audit's tokens (one spaCy token each)."""
    nlp = _nlp()   # first: spaCy is imported lean there
    from spacy.tokens import Doc

    return nlp(Doc(nlp.vocab, words=_words(tokens)))


def parse_many(sentences: list[list[str]]) -> list:
    """spaCy parses of many sentences, in order, with ``nlp.pipe`` (batched; the same parses
    as :func:`parse_tokens` one by one), without the lemmatizer: the rules read the lemmas of
    a few tokens, which :func:`token_lemma` gives as the lemmatizer would (it was a fifth of
    the parse's CPU on long captions). The attribute ruler's matches are found by
    :mod:`capaudit.filters.ruler_match` (the same matches, ~7x less CPU) and applied by the
    ruler itself."""
    nlp = _nlp()   # first: spaCy is imported lean there
    from spacy.tokens import Doc

    ruler = _ruler()
    docs = list(nlp.pipe((Doc(nlp.vocab, words=_words(t)) for t in sentences), batch_size=256,
                         disable=["lemmatizer"] + (["attribute_ruler"] if ruler else [])))
    if ruler:
        from capaudit.filters.ruler_match import ruler_matches

        component, compiled = ruler
        for doc in docs:
            component.set_annotations(doc, ruler_matches(doc, compiled))
    return docs


def warm_parser() -> None:
    """The pipeline and the ruler's compiled patterns loaded now (a worker's warm-up: its
    first parse would load them)."""
    _ruler()


@lru_cache(maxsize=1)
def _ruler():
    """``(the attribute ruler, its compiled patterns)``, or None (the pipe runs its own: it is
    not last but the lemmatizer, or :func:`~capaudit.filters.ruler_match.compile_ruler` fails)."""
    from capaudit.filters.ruler_match import compile_ruler

    nlp = _nlp()
    names = nlp.pipe_names
    if "attribute_ruler" not in names or names[names.index("attribute_ruler") + 1:] not in (
            [], ["lemmatizer"]):
        return None
    component = nlp.get_pipe("attribute_ruler")
    compiled = compile_ruler(component)
    return None if compiled is None else (component, compiled)


def _words(tokens) -> list[str]:
    return [t if t and not t.isspace() else "_" for t in tokens]  # spaCy refuses empty words


def mention_span(tokens: list[str], index: int, mode: str) -> tuple[int, int]:
    """``(first, last)`` token of the mention starting at ``index``.

    A two- or three-word lexicon entry ("teddy bear", "passenger jet",
    "stove top oven") covers more than its first token; its last token is the
    noun the parse attaches modifiers and clauses to.
    """
    from capaudit.text.objects import get_lexicon
    from capaudit.text.singularize import singularize, singularize_corrected

    sg = singularize if mode == "reference" else singularize_corrected
    lex = get_lexicon(mode)
    nxt = [sg(t) for t in tokens[index:index + 3]]
    if len(nxt) == 3 and tuple(nxt) in lex.triples:
        return index, index + 2
    if len(nxt) >= 2 and tuple(nxt[:2]) in lex.pairs:
        return index, index + 1
    return index, index


def _may_modify(tokens, end: int, start: int) -> bool:
    """Could the mention ending at ``end`` modify the one starting at ``start``? Only when it
    comes shortly before it with no function word between ("a dog and a cat" cannot)."""
    return 0 < start - end <= MODIFIER_GAP and _BREAKS.isdisjoint(tokens[end + 1:start])


def modifier_heads(doc, spans: list[tuple[int, int]]) -> dict[int, int]:
    """Mentions that modify another mention: ``{mention index: index of the modified one}``.

    Mention ``m`` (its last token) modifies mention ``h`` when the parse
    attaches it to a token of ``h`` with a ``compound``, ``amod`` or ``nmod``
    arc: "passenger" in "passenger airplanes", "dog" in "a dog bed", "car"
    in "a car seat". Only object words that modify an *object word* count;
    "a dog house" still mentions a dog, since "house" is no COCO object. The
    modifier must come at most ``MODIFIER_GAP`` tokens before the modified
    word with no function word between, which guards against parser slips on
    lists ("racket and tennis balls", "a stove a sink").
    """
    owner = {}
    for m, (a, b) in enumerate(spans):
        for t in range(a, b + 1):
            owner[t] = m
    words = [t.text for t in doc]
    out = {}
    for m, (_a, b) in enumerate(spans):
        tok = doc[b]
        h = owner.get(tok.head.i)
        if (tok.dep_ in MODIFIER_DEPS and h is not None and h != m
                and _may_modify(words, b, spans[h][0])):
            out[m] = h
    return out


def mention_notes(tokens: tuple[str, ...], starts: tuple[int, ...], mode: str,
                  modifiers: bool, non_visual: bool, gate: bool = True
                  ) -> tuple[tuple[str, str] | None, ...]:
    """For each mention (by first token) of one sentence: ``None``, ``("modifier", head word)``
    or ``("non-visual", reason)``. No parse when it could not change the answer (no rule's
    cue: :func:`_parse_plan`). The filter asks :class:`SentenceNotes` instead (batched)."""
    spans, modifiers, non_visual = _parse_plan(tokens, starts, mode, modifiers, non_visual, gate)
    if not (modifiers or non_visual):
        return (None,) * len(starts)
    return _notes_from(parse_tokens(list(tokens)), tokens, spans, modifiers, non_visual)


def _parse_plan(tokens, starts, mode: str, modifiers: bool, non_visual: bool, gate: bool = True,
                read=None) -> tuple[list[tuple[int, int]], bool, bool]:
    """The mentions' token spans, and which rules need the parse (the gate: none, no parse).
    Each rule's cue is a necessary condition of its note: a modifier is an object word
    shortly before another (for the mentions in ``read``, when given: the notes that will be
    read), a non-visual clause needs one of its words (:func:`non_visual_cue`)."""
    spans = [mention_span(tokens, i, mode) for i in starts]
    if gate:
        modifiers, non_visual = _rules_cued(tokens, spans, modifiers, non_visual, read)
    return spans, modifiers, non_visual


def _rules_cued(tokens, spans, modifiers: bool, non_visual: bool, read=None) -> tuple[bool, bool]:
    """The gate of :func:`_parse_plan` on spans already found."""
    mine = spans if read is None else [sp for sp, r in zip(spans, read) if r]
    return (modifiers and any(_may_modify(tokens, b, a) for _, b in mine for a, _ in spans),
            non_visual and non_visual_cue(tokens))


def non_visual_cue(tokens) -> bool:
    """Does the sentence hold the words some non-visual rule needs? One of
    :data:`~capaudit.filters.nonvisual.CLAUSE_CUES` (a modal, "to", a habitual adverb, ...), or
    "for" beside a word that is, or may lemmatize to, a use word ("used for", "perfect for"):
    the ``use`` rule reads both. :func:`~capaudit.filters.nonvisual.may_be_non_visual` took
    either alone, and "for", "design", "available" are in a third of long captions' sentences.
    Tokens are the audit's, lower-case."""
    from capaudit.filters.nonvisual import CLAUSE_CUES

    if not CLAUSE_CUES.isdisjoint(tokens):
        return True
    return "for" in tokens and any(map(_may_be_use_word, tokens))


@lru_cache(maxsize=65_536)
def _may_be_use_word(word: str) -> bool:
    """Could ``word``'s lemma be a use word, under any part of speech? The rule lemmatizer
    gives the word, an exception listed for it or the word with a suffix rule applied; the
    attribute ruler sets a few lemmas of its own ("'nuff" -> "enough") for words it names."""
    from capaudit.filters.nonvisual import _USE_FOR

    word = word.lower()
    tables = _lemma_tables()
    if tables is None or word in _USE_FOR or word in tables[2]:
        return True
    exc, rules, _ = tables
    for pos in _POS:
        if not _USE_FOR.isdisjoint(exc.get(pos, {}).get(word, ())):
            return True
        for old, new in rules.get(pos, ()):
            if word.endswith(old) and word[:len(word) - len(old)] + new in _USE_FOR:
                return True
    return False


#: the parts of speech the rule lemmatizer's tables are keyed by (``token.pos_.lower()``)
_POS = ("adj", "adp", "adv", "aux", "cconj", "det", "intj", "noun", "num", "part", "pron",
        "propn", "punct", "sconj", "sym", "verb", "x")


@lru_cache(maxsize=1)
def _lemma_tables():
    """``(exceptions, suffix rules, words the attribute ruler gives a use word as lemma)``, or
    None when the pipeline lemmatizes otherwise or a ruler pattern that sets such a lemma
    names no single word (then "for" is a cue on its own)."""
    from capaudit.filters.nonvisual import _USE_FOR

    nlp = _nlp()
    lemmatizer = nlp.get_pipe("lemmatizer")
    if getattr(lemmatizer, "mode", None) != "rule":
        return None
    ruler_words = set()
    for p in nlp.get_pipe("attribute_ruler").patterns:
        if str(p["attrs"].get("LEMMA", "")).lower() in _USE_FOR:
            for pattern in p["patterns"]:
                lower = pattern[p.get("index", 0)].get("LOWER")
                if not isinstance(lower, str):
                    return None
                ruler_words.add(lower)
    tables = [lemmatizer.lookups.get_table(name, {}) for name in ("lemma_exc", "lemma_rules")]
    exc, rules = ({pos: t.get(pos) or {} for pos in _POS} for t in tables)
    return exc, rules, frozenset(ruler_words)


def _notes_from(doc, tokens, spans: list[tuple[int, int]], modifiers: bool, non_visual: bool
                ) -> tuple[tuple[str, str] | None, ...]:
    """The notes of a parsed sentence (see :func:`mention_notes`)."""
    from capaudit.filters.nonvisual import non_visual_reason

    heads = modifier_heads(doc, spans) if modifiers else {}
    out: list[tuple[str, str] | None] = []
    for m, (_a, b) in enumerate(spans):
        if m in heads:
            a2, b2 = spans[heads[m]]
            out.append(("modifier", " ".join(tokens[a2:b2 + 1])))
        elif non_visual and (why := non_visual_reason(doc, b, token_lemma)):
            out.append(("non-visual", why))
        else:
            out.append(None)
    return tuple(out)


#: notes of parsed sentences, per (mode, modifiers, non_visual): captions repeat sentences
_NOTES: dict[tuple, dict] = {}
NOTES_LIMIT = 20_000   # sentences kept per setting (a few MB); the cache restarts beyond it
