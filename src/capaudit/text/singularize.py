"""Singularization compatible with the reference's ``pattern.en.singularize``.

Why: CHAIR maps every caption token through ``pattern.en.singularize``
before looking it up in the synonym list, so "dogs" -> "dog" but also
"bus" -> "bu" (a miss the reference keeps). ``pattern`` does not install on
Python 3.11; ``textblob.en.inflect.singularize`` is a copy of the same rules
and agrees with it on every one of the 7,329 distinct tokens of the shared
caption files except a handful, listed in ``reference_metrics_visible.json``
(``chair_singularize_note``) and patched here:

* ``as``, ``christmas``, ``cookies``, ``veggies``, ``collies``, ``doggies``:
  the reference keeps them as they are (so "collies"/"doggies" are NOT dogs);
* ``jeans``: the reference gives ``jean``.

The ``corrected`` mode (see :mod:`capaudit.text.objects`) instead uses
:func:`singularize_corrected`, which keeps real singulars ("bus", "glass")
and maps "ties" -> "tie", "collies" -> "collie", "doggies" -> "doggie".

Results are cached per distinct token: captions reuse a small vocabulary, so
after warm-up singularization is a dict lookup.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

__all__ = ["singularize", "singularize_corrected", "singular_tokens", "SINGULAR_CACHE", "REFERENCE_EXCEPTIONS", "CORRECTED_EXCEPTIONS"]

REFERENCE_EXCEPTIONS: dict[str, str] = {
    "as": "as",
    "christmas": "christmas",
    "cookies": "cookies",
    "veggies": "veggies",
    "collies": "collies",
    "doggies": "doggies",
    "jeans": "jean",
}

# Fixes applied on top of textblob in corrected mode: words that are already
# singular (textblob strips their final "s") and plurals it gets wrong.
CORRECTED_EXCEPTIONS: dict[str, str] = {
    "bus": "bus", "glass": "glass", "ties": "tie", "bowties": "bowtie",
    "as": "as", "christmas": "christmas", "cookies": "cookie", "veggies": "veggie",
    "collies": "collie", "doggies": "doggie", "jeans": "jeans", "lens": "lens",
    "octopus": "octopus", "cactus": "cactus", "walrus": "walrus", "hippopotamus": "hippopotamus",
    "asparagus": "asparagus", "hummus": "hummus", "citrus": "citrus", "canvas": "canvas",
    "couscous": "couscous", "compass": "compass", "mattress": "mattress", "dress": "dress",
    "grass": "grass", "class": "class", "boss": "boss", "bass": "bass", "moss": "moss",
    "cross": "cross", "his": "his", "this": "this", "is": "is", "was": "was", "has": "has",
}


@lru_cache(maxsize=None)
def _textblob():
    """``textblob.en.inflect.singularize`` without importing the textblob package.

    ``import textblob`` imports nltk, which imports scipy: ~5 s per process,
    more than a whole audit. ``inflect.py`` itself only needs ``re``, so it is
    loaded as a standalone module; the normal import is the fallback. Its function is
    answered with its tables indexed (:mod:`capaudit.text.singular_rules`, the same answers).
    """
    try:
        import importlib.util
        import sys
        spec = importlib.util.find_spec("textblob")
        path = Path(spec.origin).parent / "en" / "inflect.py"
        name = "_capaudit_textblob_inflect"
        if name not in sys.modules:
            ispec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(ispec)
            sys.modules[name] = mod
            ispec.loader.exec_module(mod)
        from capaudit.text.singular_rules import indexed_singularize

        return indexed_singularize(sys.modules[name])   # the same answers, tables indexed
    except Exception:  # pragma: no cover - unusual installs
        from textblob.en.inflect import singularize as sg
        return sg


_REF_CACHE: dict[str, str] = dict(REFERENCE_EXCEPTIONS)
_COR_CACHE: dict[str, str] = dict(CORRECTED_EXCEPTIONS)
SINGULAR_CACHE = {"reference": _REF_CACHE, "corrected": _COR_CACHE}  # token -> singular, per mode


def singularize(word: str) -> str:
    """Reference-compatible singular of one lowercased token (cached)."""
    try:
        return _REF_CACHE[word]
    except KeyError:
        out = _REF_CACHE[word] = _textblob()(word)
        return out


def singularize_corrected(word: str) -> str:
    """Singular with the reference's known misses fixed (cached)."""
    try:
        return _COR_CACHE[word]
    except KeyError:
        if word.endswith("ies") and len(word) > 3 and _textblob()(word).endswith("y") \
                and word[:-3] + "ie" in _PLURAL_IE:
            out = word[:-1]
        else:
            out = _textblob()(word)
        _COR_CACHE[word] = out
        return out


# plural "-ies" nouns whose singular ends in "-ie" (textblob makes them "-y")
_PLURAL_IE = frozenset({"tie", "bowtie", "pie", "collie", "doggie", "cookie", "veggie", "brownie",
                        "selfie", "hoodie", "smoothie", "movie", "zombie", "goalie", "birdie"})


def singular_tokens(tokens: list[str], mode: str) -> list[str]:
    """The tokens singularized as ``mode``'s mentions read them (a dict lookup per token once
    warm; user lexicons use the corrected rules)."""
    cache = SINGULAR_CACHE.get(mode) or SINGULAR_CACHE["corrected"]
    sing = list(map(cache.get, tokens))
    if None in sing:  # singularize the new tokens only (each call fills ``cache``)
        sg = singularize if mode == "reference" else singularize_corrected
        sing = [sg(t) if s is None else s for t, s in zip(tokens, sing)]
    return sing
