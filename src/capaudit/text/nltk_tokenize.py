"""NLTK's tokenizers: the authoritative reference, and the same rules applied without no-ops.

Why this module exists: the reference metrics tokenize with NLTK (untrained Punkt
sentences, then ``NLTKWordTokenizer`` on each). :mod:`capaudit.text.tokenize` proves
most captions equal to that with a few string operations and sends the rest here.
``NLTKWordTokenizer.tokenize`` is 31 regex substitutions run in order, each under a
ReDoS timeout in recent NLTK; on a caption sentence it costs ~200 us, and nearly all
of those substitutions cannot match: each needs a character (or a short string) that
the sentence lacks. :func:`word_tokens` runs NLTK's own compiled patterns in NLTK's
order but skips a substitution whose required substrings are absent from the text at
that step (a regex that cannot match leaves the text unchanged, so the result is
identical by construction), and without the timeout wrapper. A pattern it does not know
is always applied. ``tests/test_tokenize_exact.py`` checks it against NLTK itself.
"""

from __future__ import annotations

import re
from functools import lru_cache, partial

__all__ = ["load_nltk", "punkt_tokenizer", "nltk_loaded", "nltk_tokenize_sentences", "nltk_line_tokens",
           "word_tokens", "nltk_caption"]


@lru_cache(maxsize=1)
def _nltk():
    from capaudit.core.lean_import import lean_submodules

    punkt, destructive = lean_submodules("nltk", ("nltk.tokenize.punkt",
                                                  "nltk.tokenize.destructive"))
    return punkt.PunktSentenceTokenizer(), destructive.NLTKWordTokenizer()


def punkt_tokenizer():
    """The untrained Punkt tokenizer every reference path uses (one per process)."""
    return _nltk()[0]


def nltk_loaded() -> bool:
    return _nltk.cache_info().currsize > 0


def load_nltk() -> None:
    """Import NLTK's tokenizers now (before forking workers, so they inherit them)."""
    _nltk()


def nltk_tokenize_sentences(text: str) -> list[list[str]]:
    """The authoritative path: untrained Punkt, then NLTK's word tokenizer per sentence."""
    punkt, word = _nltk()
    return [word.tokenize(s) for s in punkt.tokenize(text)]


def nltk_line_tokens(text: str) -> list[str]:
    """NLTK's word tokenizer on the whole text (``word_tokenize(text, preserve_line=True)``)."""
    return _nltk()[1].tokenize(text)


# The substrings one of which a pattern needs to match (keyed by NLTK's pattern text).
_NEEDS: dict[str, tuple[str, ...]] = {
    "([«“‘„]|[`]+)": tuple("«“‘„`"),
    '^\\"': ('"',),
    "(``)": ("``",),
    "([ \\(\\[{<])(\\\"|\\'{2})": ('"', "''"),
    "(?i)(?<!\\w)(\\')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)": ("'",),
    "([^\\.])(\\.)([\\]\\)}>\"\\'»”’ ]*+)\\s*$": (".",),
    "([^\\.])(\\.)([\\]\\)}>\"\\'»”’ ]*)\\s*$": (".",),
    "([^\\.])(\\.)([\\]\\)}>\"\\']*)\\s*$": (".",),
    "([:,])([^\\d])": (":", ","),
    "([:,])$": (":", ","),
    "\\.{2,}": ("..",),
    "[;@#$%&]": tuple(";@#$%&"),
    "[\\u2012-\\u2015]": tuple("\u2012\u2013\u2014\u2015"),
    "[?!]": ("?", "!"),
    "([^'])' ": ("' ",),
    "[*]": ("*",),
    "[\\]\\[\\(\\)\\{\\}\\<\\>]": tuple("[](){}<>"),
    "--": ("--",),
    "([»”’])": tuple("»”’"),
    "''": ("''",),
    '"': ('"',),
    "([^' ])('[sS]|'[mM]|'[dD]|') ": ("'",),
    "([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ": ("'",),
}
# MacIntyre contractions: letters only, so their need is read off the pattern
_CONTRACTION_NEED = re.compile(r"\(\?i\)(?:\\b| )\((\S+?)\)\(\?#X\)\((\S+?)\)(?:\\b|\(\?=\\s\))")


def _unbounded(rx):
    """``rx.sub`` without NLTK's per-call ReDoS timeout: the same pattern compiled by ``re``.

    NLTK compiles its tokenizer's patterns with the ``regex`` package behind a timeout
    (~10 us a call, the replacement template parsed anew each time). These fixed patterns
    are linear, and :func:`word_tokens` applies them to ASCII text only, where ``re`` and
    ``regex`` match alike (``tests/test_tokenize_exact.py`` checks every path against NLTK).
    Where ``re`` cannot compile one (possessive quantifiers before Python 3.11), NLTK's own
    compiled pattern is used without its timeout."""
    flags = getattr(rx, "flags", 0) & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE)
    try:
        return re.compile(rx.pattern, flags).sub
    except re.error:  # pragma: no cover - Python 3.10
        pass
    try:
        rx.sub("", "", timeout=None)
    except TypeError:
        return rx.sub
    return partial(rx.sub, timeout=None)


@lru_cache(maxsize=1)
def _word_steps():
    """``NLTKWordTokenizer.tokenize`` as ``(sub, replacement, needs)`` steps in its order;
    ``None`` marks where it pads the text with a space on each side."""
    word = _nltk()[1]
    steps: list = []
    for rx, rep in (*word.STARTING_QUOTES, *word.PUNCTUATION, word.PARENS_BRACKETS,
                    word.DOUBLE_DASHES):
        steps.append((_unbounded(rx), rep, _NEEDS.get(rx.pattern)))
    steps.append(None)
    for rx, rep in word.ENDING_QUOTES:
        steps.append((_unbounded(rx), rep, _NEEDS.get(rx.pattern)))
    contractions = []
    for rx in (*word.CONTRACTIONS2, *word.CONTRACTIONS3):
        m = _CONTRACTION_NEED.fullmatch(rx.pattern)
        contractions.append((_unbounded(rx), "".join(m.groups()).replace("\\", "") if m else None))
    return steps, contractions


def word_tokens(text: str) -> list[str]:
    """``NLTKWordTokenizer().tokenize(text)``, skipping the substitutions that cannot match."""
    steps, contractions = _word_steps()
    if not text.isascii():  # (?i) patterns match some non-ASCII letters (the Kelvin sign, ...)
        return _nltk()[1].tokenize(text)
    for step in steps:
        if step is None:
            text = " " + text + " "
            continue
        sub, rep, needs = step
        if needs is not None:
            for need in needs:
                if need in text:
                    break
            else:
                continue
        text = sub(rep, text)
    low = text.lower()  # contractions only add spaces: a need absent now stays absent
    for sub, need in contractions:
        if need is None or need in low:
            text = sub(r" \1 \2 ", text)
    return text.split()


# Where untrained Punkt may end a sentence: '.', '?' or '!' (before whitespace or punctuation)
_SENTENCE_END = re.compile(r"[.?!]")


def nltk_caption(text: str) -> tuple[list[list[str]], list[str]]:
    """``(sentence tokens, line tokens)`` of ``text`` as NLTK gives them.

    A text with no ``.?!`` before its last character (and no whitespace around it) is one
    Punkt sentence, the text itself: its tokens are the line's too, and Punkt is not run.
    """
    if text and text == text.strip() and _SENTENCE_END.search(text, 0, len(text) - 1) is None:
        toks = word_tokens(text)
        return [toks], list(toks)
    sents = _nltk()[0].tokenize(text)
    toks = [word_tokens(s) for s in sents]
    if len(sents) == 1 and sents[0] == text:
        return toks, list(toks[0])
    return toks, word_tokens(text)
