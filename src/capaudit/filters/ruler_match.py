"""The attribute ruler's matches, found by dict lookups instead of spaCy's ``Matcher``.

Why: spaCy's small English pipeline sets parts of speech, morphology and some lemmas with an
``AttributeRuler`` of ~180 token patterns, matched by the general ``Matcher``, which evaluates
its predicates on every token: a sixth of the filter's parse CPU on long captions, for
patterns that are one or two tokens of exact strings and a few sets and regular expressions.
:func:`ruler_matches` gives the same match list (the pattern's index, its label, start, end;
sorted as ``AttributeRuler.match`` sorts it) by indexing the patterns by the exact lower-case
word or tag they need; ``AttributeRuler.set_annotations`` then applies them unchanged. A
pattern it cannot read (another attribute, an operator) makes :func:`compile_ruler` answer
None, and the ruler runs as spaCy's own. ``tests/test_parse_cues.py`` compares both on real
captions.
"""

from __future__ import annotations

import re

__all__ = ["compile_ruler", "ruler_matches"]

_ATTRS = {"LOWER": "lower_", "TAG": "tag_", "DEP": "dep_", "IS_SPACE": "is_space"}


def _test(attr: str, value):
    """A test of one token attribute value (the Matcher's meaning of ``value``), or None."""
    if isinstance(value, (str, bool)):
        return lambda v: v == value
    if isinstance(value, dict) and len(value) == 1:
        (op, arg), = value.items()
        if op == "IN" and isinstance(arg, list):
            allowed = frozenset(arg)
            return lambda v: v in allowed
        if op == "NOT_IN" and isinstance(arg, list):
            refused = frozenset(arg)
            return lambda v: v not in refused
        if op == "REGEX" and isinstance(arg, str) and attr != "IS_SPACE":
            return re.compile(arg).search
    return None


def _token_spec(spec: dict):
    tests = []
    for key, value in spec.items():
        test = _test(key, value) if key in _ATTRS else None
        if test is None:
            return None
        tests.append((_ATTRS[key], test))
    return tests


def compile_ruler(ruler):
    """The patterns of an ``AttributeRuler``, each ``(attr index, label hash, token tests)``,
    indexed by the exact lower word or tag their first token needs, and a memo of which
    patterns a token can start; None when a pattern is beyond these tests."""
    from spacy.attrs import DEP, IS_SPACE, LOWER, TAG

    by_lower: dict[str, list] = {}
    by_tag: dict[str, list] = {}
    rest: list = []
    words, regexes = set(), []   # what the first tokens' LOWER tests name or search for
    strings = ruler.vocab.strings
    for i, entry in enumerate(ruler.patterns):
        for pattern in entry["patterns"]:
            specs = [_token_spec(s) for s in pattern]
            if not pattern or None in specs:
                return None
            compiled = (i, strings.add(str(i)), specs)
            first = pattern[0]
            lower = first.get("LOWER")
            if isinstance(lower, dict) and "REGEX" in lower:
                regexes.append(re.compile(lower["REGEX"]).search)
            elif lower is not None:
                words.update(next(iter(lower.values())) if isinstance(lower, dict) else [lower])
            if isinstance(lower, str):
                by_lower.setdefault(lower, []).append(compiled)
            elif isinstance(first.get("TAG"), str):
                by_tag.setdefault(first["TAG"], []).append(compiled)
            else:
                rest.append(compiled)
    return {"by_lower": by_lower, "by_tag": by_tag, "rest": rest, "starts": {},
            "attrs": [LOWER, TAG, DEP, IS_SPACE], "words": frozenset(words),
            "regexes": regexes, "named": {}}


def _named(lower: int, compiled, strings) -> int:
    """``lower`` (a LOWER id) when a first token's LOWER test names the word or its regular
    expression finds it, else -1 (ids are unsigned). Every other word passes or fails each
    of those tests alike (no exact string, IN or NOT_IN list holds it, no REGEX finds it),
    so which patterns a token can start does not depend on which word it is: ~14k token
    signatures on the benchmark's distinct long captions become ~600."""
    hit = compiled["named"].get(lower)
    if hit is None:
        word = strings[lower]   # the doc's vocabulary: a hash names one word in any
        hit = compiled["named"][lower] = lower if word in compiled["words"] or any(
            search(word) for search in compiled["regexes"]) else -1
    return hit


def _can_start(tok, compiled) -> list:
    """The patterns whose first token ``tok`` fits (by their first token's lower word or tag
    when they name one), in pattern order."""
    values = {attr: getattr(tok, attr) for attr in _ATTRS.values()}
    cands = (*compiled["by_lower"].get(values["lower_"], ()),
             *compiled["by_tag"].get(values["tag_"], ()), *compiled["rest"])
    return [p for p in cands if all(test(values[attr]) for attr, test in p[2][0])]


def _holds(tok, tests) -> bool:
    return all(test(getattr(tok, attr)) for attr, test in tests)


#: token signatures remembered (the patterns each can start); the memo restarts beyond it
STARTS_LIMIT = 200_000


def ruler_matches(doc, compiled) -> list[tuple[int, int, int, int]]:
    """``(attr index, label, start, end)`` of every pattern matching ``doc``, sorted as
    ``AttributeRuler.match`` sorts the Matcher's. Which patterns a token can start depends on
    its lower-case form (only where a first token's test names or searches for it:
    :func:`_named`), tag, dependency label and space flag alone: looked up by those."""
    starts, named = compiled["starts"], compiled["named"]
    if len(starts) > STARTS_LIMIT:
        starts.clear()
    if len(named) > STARTS_LIMIT:
        named.clear()
    n, out, strings = len(doc), [], doc.vocab.strings
    for start, (lower, *sig) in enumerate(doc.to_array(compiled["attrs"]).tolist()):
        sig = (_named(lower, compiled, strings), *sig)
        can = starts.get(sig)
        if can is None:
            can = starts[sig] = _can_start(doc[start], compiled)
        for i, label, specs in can:
            end = start + len(specs)
            if len(specs) == 1 or (end <= n and all(
                    _holds(doc[start + k], t) for k, t in enumerate(specs) if k)):
                out.append((i, label, start, end))
    out.sort()
    return out
