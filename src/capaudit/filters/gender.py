"""The ``gender-neutral`` filter (``gender-balance`` is in :mod:`capaudit.filters.gender_balance`).

``gender-neutral``
    Gendered words are those of the audit's gender metric (Burns et al. man /
    woman word lists, :mod:`capaudit.text.gender`) plus the pronouns
    ``he/him/himself/herself/hers``. **Scoring**: the gendered words of each
    sentence and the caption's predicted gender. **Deciding**, by the image's
    label (``demographics``: a file or stored source name; when omitted, the
    most recent stored demographics, as ``audit run`` uses) and ``when`` (a
    comma list):

    * ``unknown``: rewrite every gendered word when the image has no label;
    * ``contradicted``: rewrite the words that contradict a known label
      (man words in a woman image and the reverse);
    * ``always``: rewrite every gendered word.

    The default is ``unknown,contradicted``. Rewrites keep grammar plausible:
    ``man -> person``, ``men -> people``, ``boy -> child``, ``his -> their``,
    ``her -> their`` before a noun and ``them`` otherwise, ``she is -> they
    are``, ``a male surfer -> a surfer``, and ``a``/``an`` is fixed before the
    replacement. Case is kept. A rewritten sentence is logged as ``revise``
    (kept), with the original and the new text.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from capaudit.errors import InputError
from capaudit.filters.declared import DEFAULTS
from capaudit.filters.base import (CaptionDoc, CaptionResult, Decision, Filter, FilterContext,
                                   SentenceScore)
from capaudit.text.gender import MAN_WORDS, WOMAN_WORDS

__all__ = ["GenderNeutralFilter", "neutralize", "NEUTRAL_MAP", "load_gender_labels"]

# -- gender-neutral ------------------------------------------------------------
NEUTRAL_MAP: dict[str, str] = {
    # nouns
    "man": "person", "men": "people", "woman": "person", "women": "people",
    "boy": "child", "boys": "children", "girl": "child", "girls": "children",
    "guy": "person", "guys": "people", "lady": "person", "ladies": "people",
    "gentleman": "person", "gentlemen": "people", "dude": "person", "dudes": "people",
    "mans": "person's", "male": "person", "males": "people", "female": "person",
    "females": "people", "brother": "sibling", "brothers": "siblings", "sister": "sibling",
    "sisters": "siblings", "dad": "parent", "dads": "parents", "mom": "parent",
    "moms": "parents", "father": "parent", "fathers": "parents", "mother": "parent",
    "mothers": "parents", "son": "child", "sons": "children", "daughter": "child",
    "daughters": "children", "husband": "spouse", "husbands": "spouses", "wife": "spouse",
    "wives": "spouses", "groom": "newlywed", "grooms": "newlyweds", "bride": "newlywed",
    "brides": "newlyweds", "boyfriend": "partner", "boyfriends": "partners",
    "girlfriend": "partner", "girlfriends": "partners", "policeman": "police officer",
    "policemen": "police officers", "policewoman": "police officer",
    "policewomen": "police officers", "fireman": "firefighter", "firemen": "firefighters",
    "actor": "actor", "actors": "actors", "actress": "actor", "actresses": "actors",
    "nun": "person", "nuns": "people", "obama": "a person",
    # pronouns
    "he": "they", "she": "they", "him": "them", "himself": "themselves",
    "herself": "themselves", "his": "their", "hers": "theirs",
}
MAN_SET = frozenset(MAN_WORDS | {"he", "him", "himself", "gentlemen", "dudes", "sons", "fathers",
                                 "brothers", "husbands", "grooms", "boyfriends", "firemen"})
WOMAN_SET = frozenset(WOMAN_WORDS | {"herself", "hers", "mothers", "mother", "daughter",
                                     "daughters", "sisters", "wives", "brides", "girlfriends",
                                     "actresses", "nuns", "policewoman", "policewomen"})
_AFTER_OBJ = frozenset({"", ".", ",", "!", "?", ";", ":", "and", "or", "in", "on", "at", "with",
                        "while", "as", "is", "are", "to", "from", "for", "by", "of", "near",
                        "next", "behind", "up", "down", "out", "off", "over", "under", "'s"})
_BE = {"is": "are", "was": "were", "has": "have", "does": "do", "isn't": "aren't",
       "wasn't": "weren't", "hasn't": "haven't", "doesn't": "don't"}
_DET = frozenset({"a", "an", "the", "one", "two", "three", "this", "that", "some"})
_NOT_NOUN = frozenset({"", ".", ",", "!", "?", ";", ":", "is", "are", "was", "were", "and", "or",
                       "with", "in", "on", "at", "of", "who", "that", "'s", "s"})
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|[^\sA-Za-z]")


def _case_like(src: str, repl: str) -> str:
    if src.isupper() and len(src) > 1:
        return repl.upper()
    if src[:1].isupper():
        return repl[:1].upper() + repl[1:]
    return repl


def neutralize(sentence: str, words: Iterable[str] | None = None) -> tuple[str, list[str]]:
    """Rewrite the gendered words of ``sentence`` (only those in ``words`` if given).

    Returns the new sentence and a list of ``"old->new"`` changes. Whitespace
    and everything not rewritten is kept byte for byte.
    """
    targets = None if words is None else frozenset(w.lower() for w in words)
    toks = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(sentence)]
    low = [t[2].lower() for t in toks]
    repl: dict[int, str] = {}
    changes: list[str] = []
    for i, w in enumerate(low):
        base = w[:-2] if w.endswith("'s") else w
        if base not in NEUTRAL_MAP or (targets is not None and base not in targets):
            continue
        nxt = low[i + 1] if i + 1 < len(low) else ""
        prev = low[i - 1] if i > 0 else ""
        new = NEUTRAL_MAP[base]
        if base in ("male", "female") and prev in _DET and nxt not in _NOT_NOUN:
            new = ""  # adjective: "a male surfer" -> "a surfer"
        elif base == "obama" and prev in _DET:
            new = "person"
        suffix = w[len(base):]  # possessive 's
        if base in ("he", "she") and suffix == "'s":
            new, suffix = "they're", ""
        repl[i] = _case_like(toks[i][2], new + suffix if new else "")
        changes.append(f"{base}->{new or '(removed)'}")
        if base in ("he", "she") and nxt in _BE:
            repl[i + 1] = _case_like(toks[i + 1][2], _BE[nxt])
    # "her": object ("next to her", "her .") -> them, determiner ("her phone") -> their
    for i, w in enumerate(low):
        if w != "her" or (targets is not None and "her" not in targets):
            continue
        nxt = low[i + 1] if i + 1 < len(low) else ""
        new = "them" if nxt in _AFTER_OBJ else "their"
        repl[i] = _case_like(toks[i][2], new)
        changes.append(f"her->{new}")
    if not repl:
        return sentence, []
    # a/an agreement before a replaced word
    for i in sorted(repl):
        j = i - 1
        if j >= 0 and low[j] in ("a", "an") and j not in repl:
            k = i
            while k in repl and not repl[k] and k + 1 < len(toks):
                k += 1  # removed adjective: agree with the next word
            word = repl.get(k, toks[k][2]) if k < len(toks) else ""
            if word:
                art = "an" if word[0].lower() in "aeiou" else "a"
                if art != low[j]:
                    repl[j] = _case_like(toks[j][2], art)
    out, pos = [], 0
    for i, (a, b, t) in enumerate(toks):
        if i in repl:
            out.append(sentence[pos:a])
            if repl[i]:
                out.append(repl[i])
            else:  # removed word: also drop one following space
                if b < len(sentence) and sentence[b] == " ":
                    b += 1
            pos = b
    out.append(sentence[pos:])
    text = "".join(out)
    if "a a person" in text:  # "obama" after an article
        text = text.replace("a a person", "a person")
    return text, changes


def load_gender_labels(ref, store=None) -> dict[int, str]:
    """Image gender labels, 'male'/'female' only (other images count as unknown).

    ``ref``: a file or a stored source name; ``None``: the most recent stored
    source, else no labels (see :func:`capaudit.io.annotation_store.demographic_labels`).
    """
    from capaudit.io.annotation_store import demographic_labels

    gender, _skin, _source = demographic_labels(store, ref)
    return {i: g for i, g in gender.items() if g in ("male", "female")}


class GenderNeutralFilter(Filter):
    """Replace gendered words where the image label is unknown or contradicts them."""

    name = "gender-neutral"
    version = "1"
    defaults: Mapping = DEFAULTS["gender-neutral"]  # declared in capaudit.filters.declared
    WHENS = ("unknown", "contradicted", "always")

    def __init__(self, labels: Mapping[int, str] | None = None, **options):
        super().__init__(**options)
        when = self.options["when"]
        self.when = frozenset(w.strip() for w in (when.split(",") if isinstance(when, str)
                                                   else when) if w.strip())
        if not self.when or not self.when <= set(self.WHENS):
            raise InputError(f"unknown --when '{when}'",
                             fix="use unknown, contradicted, always or a comma list")
        self.labels = labels

    def setup(self, context: FilterContext | None = None) -> None:
        if self.labels is None:
            store = context.store if context else None
            self.labels = load_gender_labels(self.options["demographics"], store)
            if not self.labels and self.when != {"always"}:
                raise InputError("gender-neutral needs image labels for --when "
                                 f"{','.join(sorted(self.when))} and none are stored",
                                 fix="pass --demographics FILE, add them with capaudit "
                                     "annotations add demographics FILE, or use --when always")

    def score(self, doc: CaptionDoc) -> list[SentenceScore]:
        label = self.labels.get(doc.image_id) if doc.image_id is not None else None
        out = []
        for i, s in enumerate(doc.sentences):
            toks = {m.group().lower() for m in _WORD.finditer(s)}
            toks |= {t[:-2] for t in toks if t.endswith("'s")}
            man, woman = sorted(toks & MAN_SET), sorted(toks & WOMAN_SET)
            out.append(SentenceScore(i, float(len(man) + len(woman)),
                                     {"man": man, "woman": woman, "label": label}))
        return out

    def _targets(self, label, man, woman) -> tuple[list[str], str]:
        if "always" in self.when:
            return man + woman, "always"
        if label is None:
            return (man + woman, "label unknown") if "unknown" in self.when else ([], "")
        if "contradicted" in self.when:
            if label == "female" and man:
                return man, "contradicts label female"
            if label == "male" and woman:
                return woman, "contradicts label male"
        return [], ""

    def decide(self, doc: CaptionDoc, scores: list[SentenceScore]) -> CaptionResult:
        decisions = []
        for s, text in zip(scores, doc.sentences):
            words, why = self._targets(s.facts["label"], s.facts["man"], s.facts["woman"])
            new, changes = neutralize(text, words) if words else (text, [])
            if new == text:
                decisions.append(Decision(s.sentence_idx, "keep", score=s.score))
                continue
            decisions.append(Decision(s.sentence_idx, "revise",
                                      f"neutralized ({why}): {', '.join(changes)}",
                                      revised=new, score=s.score))
        return CaptionResult(doc, decisions)
