"""textblob's ``singularize`` on plain lower-case words, with its tables indexed.

Why: on distinct text (issue #43) most tokens are new to the singular cache, and textblob's
``singularize`` tries each word against ~200 table entries one ``str.endswith`` at a time,
then up to 40 suffix regexes: ~a fifth of the hallucination filter's CPU without the parse.
The same decisions, taken in the same order, from the same tables
(:func:`indexed_singularize` reads them off the module it is given):

* a word that is the end of an uninflected or uncountable word stays as it is: one set of
  every such ending;
* the first ``-ie`` word ``w`` (in table order) with the word ending in ``w + "s"``, then the
  first ``-s`` singular ending in ``w + "es"``, then the first irregular plural: a dict from
  each such ending to its table position, looked up for each ending of the word, the
  lowest position winning;
* the first suffix rule that matches: a rule ``...X$`` can match a lower-case ASCII word only
  when the word ends in ``X``, so only the rules for the word's last letter (and those whose
  last letter cannot be read off the pattern) are tried, in table order.

Hyphenated words and a final apostrophe recurse as textblob does. Only ASCII words without
a capital or a line break take this path (case folding and ``$`` before a final newline could
match more elsewhere): anything else goes to textblob's own function. ``tests/test_singular_rules.py`` checks both agree on every token of the shared
caption files and on the tables' own words and their variants.
"""

from __future__ import annotations

import re

__all__ = ["indexed_singularize"]

_NOT_PLAIN = re.compile(r"[A-Z\n]").search   # (with str.isascii)
_LAST_LETTER = re.compile(r"(?<!\\)([a-z])\$$")


def _first_by_ending(words, extra: str) -> dict[str, int]:
    """``{w + extra: table position}`` (the first position of a repeated ending)."""
    out: dict[str, int] = {}
    for i, w in enumerate(words):
        out.setdefault(w + extra, i)
    return out


def indexed_singularize(inflect):
    """A function equal to ``inflect.singularize(word)`` (textblob's ``inflect`` module)."""
    original = inflect.singularize
    kept = {w[k:] for w in (*inflect.singular_uninflected, *inflect.singular_uncountable)
            for k in range(len(w) + 1)}
    ie, ie_at = list(inflect.singular_ie), _first_by_ending(inflect.singular_ie, "s")
    s, s_at = list(inflect.singular_s), _first_by_ending(inflect.singular_s, "es")
    irregular = inflect.singular_irregular
    irr = list(irregular)
    irr_at = _first_by_ending(irr, "")
    rules = list(inflect.singular_rules)
    anywhere, by_last = [], {}
    for i, (suffix, _) in enumerate(rules):
        m = _LAST_LETTER.search(suffix.pattern)
        if m is None:
            anywhere.append(i)
        else:
            by_last.setdefault(m.group(1), []).append(i)
    to_try = {c: sorted(by_last.get(c, []) + anywhere) for c in "abcdefghijklmnopqrstuvwxyz"}
    prepositions = set(inflect.plural_prepositions)

    longest = max(map(len, (*ie_at, *s_at, *irr_at)), default=0)

    def first(word: str, at: dict[str, int]) -> int | None:
        """The lowest table position among the word's endings (none longer than a key)."""
        n = len(word)
        found = [at[e] for e in (word[k:] for k in range(max(0, n - longest), n)) if e in at]
        return min(found) if found else None

    def singularize(word: str) -> str:
        if not word.isascii() or _NOT_PLAIN(word):
            return original(word)
        if "-" in word:   # "mothers-in-law"
            words = word.split("-")
            if words[1] in prepositions:
                return singularize(words[0]) + "-" + "-".join(words[1:])
        if word.endswith("'"):   # "dogs'"
            return singularize(word[:-1]) + "'s"
        if word in kept:
            return word
        if word[-1] == "s":
            if (i := first(word, ie_at)) is not None:
                return ie[i]
            if (i := first(word, s_at)) is not None:
                return s[i]
        if (i := first(word, irr_at)) is not None:
            w = irr[i]
            return re.sub("(?i)" + w + "$", irregular[w], word)
        for i in to_try.get(word[-1], anywhere):
            suffix, inflection = rules[i]
            match = suffix.search(word)
            if match:
                for k, g in enumerate(match.groups()):
                    if g is None:
                        inflection = inflection.replace("\\" + str(k + 1), "")
                return suffix.sub(inflection, word)
        return word

    return singularize
