"""Negation scope: which tokens of a sentence a negation cue denies.

A mention inside a negation scope ("a kitchen with no people in it", "a
street without cars", "there is not a single dog") says the object is
*absent*; it is not evidence of a hallucination, so the hallucination filter
does not count it against the sentence.

How negation is detected (a deliberately small, explainable rule, in the
spirit of NegEx, on the same lowercased treebank tokens the audit uses):

* **cues**: ``no``, ``not``, ``n't`` (the tokenizer splits "isn't" into
  ``is`` + ``n't``), ``without``, ``never``, ``nor``, ``neither``, ``none``,
  ``nothing``, ``nobody``, ``lacking``;
* **scope**: from the token after the cue to the end of the sentence, cut
  short at the first *scope terminator*: punctuation ``, ; : . ! ?``, a
  contrast or clause word (``but``, ``except``, ``while``, ``although``,
  ``though``, ``yet``, ``which``, ``who``, ``that``, ``where``, ``whereas``),
  or after ``max_scope`` tokens (8). Coordination stays in scope, so "no cats
  or dogs" negates both;
* **not a cue**: ``no`` starting a sign's label ("a no parking sign", "no
  entry", "no smoking", "no left turn"), ``not only``, and ``no`` / ``not``
  directly followed by a comparison ("no more than", "not far from", "no
  longer"), which do not deny an object's presence.

Sentence scope is the sentence the cue is in: a cue never reaches into the
next sentence. The rule has misses (a negation far from its object, double
negation, "hardly any"); the filter logs a mention it treated as negated with
reason ``negated``, so its effect can be audited.
"""

from __future__ import annotations

__all__ = ["NEGATION_CUES", "SCOPE_TERMINATORS", "negated_positions"]

NEGATION_CUES = frozenset({"no", "not", "n't", "without", "never", "nor", "neither", "none",
                           "nothing", "nobody", "lacking"})
SCOPE_TERMINATORS = frozenset({",", ";", ":", ".", "!", "?", "but", "except", "while", "although",
                               "though", "yet", "which", "who", "that", "where", "whereas",
                               "because", "--"})
# "no" that labels a sign or a rule, not an absence
_SIGN_WORDS = frozenset({"parking", "smoking", "entry", "left", "right", "turn", "u-turn",
                         "trespassing", "stopping", "standing", "outlet", "passing", "dumping",
                         "swimming", "fishing", "littering", "exit", "thru", "through", "pets",
                         "dogs"})
_NOT_A_DENIAL = frozenset({"only", "more", "less", "longer", "far", "much", "too", "just"})
MAX_SCOPE = 8


def _is_cue(tokens: list[str], i: int) -> bool:
    tok = tokens[i]
    if tok not in NEGATION_CUES:
        return False
    nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
    if nxt in _NOT_A_DENIAL:
        return False
    if tok == "no" and nxt in _SIGN_WORDS:
        # "a no parking sign", "no dogs allowed" sign text; but "no dogs in the park"
        # is a real denial: treat "no dogs" as a sign only when "sign" / "allowed" follows
        if nxt in {"dogs", "pets"}:
            rest = tokens[i + 2:i + 4]
            return not ("allowed" in rest or "sign" in rest)
        return False
    return True


def negated_positions(tokens: list[str], max_scope: int = MAX_SCOPE) -> set[int]:
    """Indices of the tokens of one sentence that lie inside a negation scope."""
    out: set[int] = set()
    if NEGATION_CUES.isdisjoint(tokens):  # most sentences: no cue, nothing to scan
        return out
    n = len(tokens)
    for i in range(n):
        if not _is_cue(tokens, i):
            continue
        j = i + 1
        while j < n and j - i <= max_scope and tokens[j] not in SCOPE_TERMINATORS:
            out.add(j)
            j += 1
    return out
