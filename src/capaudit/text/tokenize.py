"""Caption tokenization identical to the reference's ``nltk.word_tokenize(caption.lower())``.

Why this module exists: every reference metric (CHAIR, recall, vocabulary,
length, gender error) starts from NLTK's ``word_tokenize`` on the lowercased
caption, i.e. a Punkt sentence split followed by the NLTK ("improved
treebank") word tokenizer on each sentence. Two problems:

* Punkt's trained English model is a data download that these machines cannot
  fetch, so sentences are split with an *untrained*
  ``PunktSentenceTokenizer()`` (no abbreviation list). On lowercased captions
  it differs from the trained model only around abbreviations ("mr.", "st.").
* NLTK runs ~30 regex substitutions per sentence: far too slow for the
  throughput target (>= 52,000 captions/s on two cores).

So :func:`tokenize_sentences` has a *fast path* for the character set that
almost every caption uses -- ``a-z 0-9``, whitespace, commas, hyphens,
``'s`` possessives and sentence-final periods -- where the NLTK rules reduce
to "split sentences at a period followed by whitespace, split off commas,
``'s`` and the sentence-final period, then ``str.split``". Everything the
fast path cannot prove identical (other punctuation, non-ASCII, ``n't``,
numbers or single letters before a period, ``cannot``/``gonna``-style
contractions, ``,1`` digit groups, ``..``, ``--``) goes to the slow path,
which *is* NLTK. ``tests/test_text_tokenize.py`` checks fast == slow on every
caption of every file in ``../shared/data`` plus random strings.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["tokenize_sentences", "tokenize", "nltk_tokenize_sentences", "fast_tokenize_sentences"]

# Characters the fast path understands (input already lowercased).
_SAFE = re.compile(r"[a-z0-9 \t\n\r,.'\-]*")
# Anything that makes NLTK behave beyond the simple rules below.
_UNSAFE = re.compile(
    r"\.\S"                                   # period not followed by whitespace/end
    r"|,[\d,]"                                # 1,000 digit groups; ',,' consumption quirk
    r"|--"                                    # double dash gets split off
    r"|(?<![a-z0-9])'"                        # quote not after a word char
    r"|'(?!s(?![^\s,.]))"                     # anything but a possessive 's
    r"|cannot|gimme|gonna|gotta|lemme|wanna"  # MacIntyre contractions
    r"|(?:^|(?<=\s))(?![a-z][a-z\-]*[a-z]\.)\S+\."  # word before a period: not plain alpha
)
_SENT_BREAK = re.compile(r"\.\s+")


def fast_tokenize_sentences(text: str) -> list[list[str]] | None:
    """Sentences of tokens for lowercased ``text``, or None if the fast path does not apply."""
    if _SAFE.fullmatch(text) is None or _UNSAFE.search(text) is not None:
        return None
    text = text.strip()
    if not text:
        return []
    if "." in text:
        # every period is followed by whitespace (or ends the text) and preceded
        # by an alphabetic word or whitespace: untrained Punkt breaks after each.
        parts = _SENT_BREAK.split(text)
        last = parts[-1]
        sents = [p + "." for p in parts[:-1]]
        if last:
            sents.append(last)
    else:
        sents = [text]
    out = []
    for s in sents:
        final = s.endswith(".")
        if final:
            s = s[:-1]
        if "," in s:
            s = s.replace(",", " , ")
        if "'" in s:
            s = s.replace("'s", " 's")
        toks = s.split()
        if final:
            toks.append(".")
        out.append(toks)
    return out


@lru_cache(maxsize=1)
def _nltk():
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer
    return PunktSentenceTokenizer(), NLTKWordTokenizer()


def nltk_tokenize_sentences(text: str) -> list[list[str]]:
    """The slow, authoritative path: untrained Punkt, then NLTK's word tokenizer per sentence."""
    punkt, word = _nltk()
    return [word.tokenize(s) for s in punkt.tokenize(text)]


def tokenize_sentences(caption: str, lower: bool = True) -> list[list[str]]:
    """Tokens per sentence, exactly like ``nltk.word_tokenize(caption.lower())`` would give them."""
    text = caption.lower() if lower else caption
    sents = fast_tokenize_sentences(text)
    if sents is None:
        sents = nltk_tokenize_sentences(text)
    return sents


def tokenize(caption: str, lower: bool = True) -> list[str]:
    """Flat token list (the reference's ``nltk.word_tokenize(caption.lower())``)."""
    return [t for s in tokenize_sentences(caption, lower) for t in s]
