"""The tokenizer's fast path: the captions where NLTK's rules reduce to a few string operations.

Why apart from :mod:`capaudit.text.tokenize`: this is the part that runs on almost
every caption and the proof that it may (:func:`_problem`); the entry points, the
segmented path and the fall-back to NLTK stay there, and that module binds these
names at import, so a call costs what it did when they lived beside it.

:func:`~capaudit.text.tokenize.tokenize_caption` has a *fast path* for the character set that
almost every caption uses -- ``a-z 0-9``, whitespace, commas, colons,
hyphens, slashes, brackets, ``;@#$%&*``, double quotes, clitics (``'s``,
``n't``, ...), sentence-final periods, ellipses, ``word?.``/``word,.``
endings and periods inside words (``t.v``) -- where the NLTK rules reduce to
"split sentences at a period followed by whitespace, pad commas, colons,
brackets, quotes and clitics with spaces, split off the sentence-final
period, then ``str.split``". :func:`_problem` finds what the fast path cannot
prove identical (single quotes, ``?!`` elsewhere, non-ASCII, numbers or single
letters before an inner period, ``cannot``/``gonna``-style contractions,
``1,000``/``10:30``, ``--``, ``3.5``); that goes to NLTK
(:mod:`capaudit.text.nltk_tokenize`: NLTK's own rules, minus the ones that
cannot match). ``tests/test_text_tokenize.py`` and ``tests/test_tokenize_exact.py``
check every path against NLTK itself on every caption of the shared files and on
random text over the tricky characters.
"""

from __future__ import annotations

import re

__all__ = ["fast_tokenize_caption", "fast_tokenize_sentences"]

# Characters the fast path understands (input already lowercased).
_SAFE = re.compile(r"[a-z0-9 \t\n\r,.'\"<>\-/:;@#$%&*()\[\]{}?!]*")
# '3.5', '....', '.x' after a non-letter: a period not before whitespace, except in a run of
# two or three ('..', '...'), which Punkt reads as an ellipsis (no sentence break before a
# lowercase word), and between letters ('t.v', 'dogs.on'), where neither NLTK stage splits
_BAD_DOT = re.compile(r"\.(?:[^\s.a-z]|\.\.\.|(?<![a-z]\.)[a-z]|n')")  # ('.n't': "n't" is split off)
_WORD_DOT = re.compile(r"\.[a-z]")
_SENTENCE_DOT = re.compile(r"\.(?![a-z])")
_RUNS = {"\x01": "..", "\x02": "..."}
# a sentence-internal period after a chunk that is not an alphabetic word ('a.', '3.', "x's.")
# (a character outside [a-z-] in the chunk, a hyphen at either end, a single letter): three
# scans that each start on a rare character are ~3x faster than one alternation. An
# alphabetic word then one of ',"?!' before the period is a break too: Punkt's token there
# ('ball,.', '".' after its '"', '?.') is neither a number nor an initial.
# (the charset's characters outside [a-z-.,"?!] and whitespace, listed: a positive class
# scans ~2x faster; patterns that start on a literal are searched only if it occurs)
_CHUNK_0 = re.compile(r"[0-9'<>/:;@#$%&()\[\]{}]\S*\.\s").search
# a '*' in the chunk is harmless only right before the period ('**red car**.': Punkt splits the
# '*'s off, the period is a token of its own and always a break), not earlier ('*x.': 'x.')
_CHUNK_STAR = re.compile(r"\*\S*[^*\s]\.\s").search
_CHUNK_MARK = tuple((c, re.compile(re.escape(c) + r"(?:(?!\.\s)\S*\.\s|(?<![a-z]" + re.escape(c) + r")\.\s)").search)
                    for c in ',"?!')
_CHUNK_1 = re.compile(r"-(?:\.\s|(?<!\S-)[a-z\-]*\.\s)").search
_CHUNK_2 = re.compile(r"\.(?<=\s[a-z]\.)\s").search
_CHUNK_3 = re.compile(r"[a-z]\.\s").match
_REALIGN = re.compile(r"\.\s+[\"')\]}]")              # Punkt moves closing brackets back
_BAD_APOS = re.compile(                                 # only clitics: 's 'm 'd 'll 're 've n't
    r"'(?:(?<![a-z0-9\s]')|(?<!n')(?!(?:s|m|d|ll|re|ve)(?![^\s,.]|[.,][a-z0-9]))"  # (the quote first:
    r"|(?<=n')(?!(?:t|s|m|d|ll|re|ve)(?![^\s,.]|[.,][a-z0-9])))")  # a literal prefix scans fast) "woman's":
                                                      # "woman 's" like any word
# ',,' ',:': NLTK's comma rule consumes the second as the character after the first
_BAD_COMMA = (re.compile(r",[,:]").search, re.compile(r":[,:]").search)
# ... and pads a comma or colon only when no digit follows: '1,000', '10:30' stay whole
_COMMA_DIGIT = (re.compile(r",\d").search, re.compile(r":\d").search)
_COMMA_PAD = re.compile(r"[,:](?!\d)")
_CONTRACTIONS = ("cannot", "gimme", "gonna", "gotta", "lemme", "wanna")  # MacIntyre's
_DOT_CLOSE = re.compile(r'\.[\s>)\]}"]*[>)\]}"][\s>)\]}"]*$')  # '. )' at the end: treebank's final period
# NLTK's opening quote: '"' at the start or after one of ' ([{<' (a tab or newline before it
# is not a space to that rule, but is a sentence start to Punkt; and NLTK pads a leading
# '``' before that rule, which opens a second leading quote too: both left to NLTK)
_QUOTE_OPEN = re.compile(r'(?:^|(?<=[ (\[{<]))"')
_BAD_QUOTE = re.compile(r'"(?<=[\t\n\r]")')
# ('*': markdown emphasis, "**a red car**", common in LLM captions; NLTK pads each '*', and
# Punkt ends no sentence at one; a '*' right after a period is left to NLTK, and one inside a
# chunk before a period unless it is the period's neighbour, see _CHUNK_STAR)
_SPLIT_ALWAYS = re.compile(r"[;@#$%&*()\[\]{}<>?!]")
# '?' and '!' end a Punkt sentence before whitespace or punctuation: taken only in 'word?.'
_BAD_MARK = re.compile(r"[?!](?:(?<![a-z][?!])|(?!\.))")
_DOT = ["."]


def _spaced(s: str) -> str:
    """``s`` with the treebank's local splits made spaces (quotes, commas, colons, clitics,
    brackets and ``;@#$%&*<>``), inside the fast-path charset; periods are left as they are."""
    if "'" in s:  # every apostrophe starts a clitic here (_BAD_APOS): "n't" or "'s"-like
        s = s.replace("n't", "\0").replace("'", " '").replace("\0", " n't")
    if '"' in s:  # decided by the character before, as in the text NLTK's quote rules see
        s = _QUOTE_OPEN.sub(" `` ", s).replace('"', " '' ")
    comma, colon = "," in s, ":" in s
    if (comma and _COMMA_DIGIT[0](s) is not None) or (colon and _COMMA_DIGIT[1](s) is not None):
        s = _COMMA_PAD.sub(r" \g<0> ", s)
    else:
        if comma:
            s = s.replace(",", " , ")
        if colon:
            s = s.replace(":", " : ")
    if _SPLIT_ALWAYS.search(s) is not None:
        s = _SPLIT_ALWAYS.sub(r" \g<0> ", s)
    return s


def _problem(text: str) -> int:
    """Where lowercased ``text`` shows something the fast path cannot prove equal to NLTK
    (an index into ``text``: the first such place one of the checks finds), or -1."""
    end = _SAFE.match(text).end()
    if end < len(text):
        return end
    m = None
    if "'" in text and (m := _BAD_APOS.search(text)) is not None:
        return m.start()
    if "," in text and (m := _BAD_COMMA[0](text)) is not None:
        return m.start()
    if ":" in text and (m := _BAD_COMMA[1](text)) is not None:
        return m.start()
    if (i := text.find("--")) >= 0:
        return i
    if '"' in text:
        if text[:2] == '""':
            return 0
        if (m := _BAD_QUOTE.search(text)) is not None:
            return m.start()
    if ("?" in text or "!" in text) and (m := _BAD_MARK.search(text)) is not None:
        return m.start()
    if "nn" in text or "mm" in text or "tt" in text:
        for c in _CONTRACTIONS:
            if (i := text.find(c)) >= 0:
                return i
    if "." not in text:
        return -1
    if ((m := _BAD_DOT.search(text)) is not None or (m := _DOT_CLOSE.search(text)) is not None
            or (m := _REALIGN.search(text)) is not None):
        return m.start()
    lead = len(text) - len(text.lstrip())
    body = text.strip()
    if body.endswith("."):
        body = body[:-1]
    if body.startswith("."):  # a caption opening with periods: Punkt may end a sentence there
        return lead
    if ((m := _CHUNK_0(body)) is not None or (m := _CHUNK_1(body)) is not None
            or (m := _CHUNK_2(body)) is not None or (m := _CHUNK_3(body)) is not None):
        return lead + m.start()
    for c, bad in _CHUNK_MARK:
        if c in body and (m := bad(body)) is not None:
            return lead + m.start()
    if "*" in body and (m := _CHUNK_STAR(body)) is not None:
        return lead + m.start()
    return -1


def fast_tokenize_caption(text: str) -> tuple[list[list[str]], list[str]] | None:
    """``(sentences, line tokens)`` for lowercased ``text``, or None if the fast path does not apply.

    *Line tokens* are NLTK's word tokenizer on the whole caption without a
    sentence split (``preserve_line=True``): the reference's vocabulary and
    length use them, and they differ from the sentence tokens only in keeping
    a sentence-internal period on its word ("sign." instead of "sign", ".").
    """
    return None if _problem(text) >= 0 else _proven(text)


def _proven(text: str, with_line: bool = True) -> tuple[list[list[str]], list[str]]:
    """The fast path's tokens for a ``text`` with no :func:`_problem` (``with_line=False``:
    the sentence tokens only, and an empty line)."""
    if "." not in text:
        toks = _spaced(text).split()
        return ([toks] if toks else []), toks
    text = text.strip()
    # Every period is now a sentence break (untrained Punkt breaks after each: they follow
    # an alphabetic word or stand alone, and whitespace follows all but a final one), and
    # the treebank rules are local, so the whole caption is padded once and cut at its
    # periods: each sentence splits off its period; the line tokens keep an inner period
    # on the word it directly follows (a whitespace split does that) and split off only
    # the final one.
    text = _spaced(text)
    runs = ".." in text
    if runs:  # an ellipsis stands alone (NLTK pads '.{2,}') and ends no sentence
        text = text.replace("...", " \x02 ").replace("..", " \x01 ")
    parts = _SENTENCE_DOT.split(text) if _WORD_DOT.search(text) is not None else text.split(".")
    sents = [p.split() + _DOT for p in parts]
    last = sents.pop()
    if len(last) > 1:
        sents.append(last[:-1])
    if not with_line:
        return ([[_RUNS.get(t, t) for t in s] for s in sents] if runs else sents), []
    if text.endswith("."):
        line = text[:-1].split()
        line.append(".")
    else:
        line = text.split()
    if runs:
        sents = [[_RUNS.get(t, t) for t in s] for s in sents]
        line = [_RUNS.get(t, t) for t in line]
    return sents, line


def fast_tokenize_sentences(text: str) -> list[list[str]] | None:
    """Sentences of tokens for lowercased ``text``, or None if the fast path does not apply."""
    r = fast_tokenize_caption(text)
    return None if r is None else r[0]
