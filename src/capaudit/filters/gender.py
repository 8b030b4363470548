"""Gender filters: ``gender-neutral`` rewrites gendered words, ``gender-balance`` resamples images.

``gender-neutral``
    Gendered words are those of the audit's gender metric (Burns et al. man /
    woman word lists, :mod:`capaudit.text.gender`) plus the pronouns
    ``he/him/himself/herself/hers``. **Scoring**: the gendered words of each
    sentence and the caption's predicted gender. **Deciding**, by the image's
    label (``demographics``) and ``when`` (a comma list):

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

``gender-balance``
    Images are labelled woman / man (from ``demographics``, else from the
    caption's predicted gender); ``by="overall"`` undersamples the majority
    gender at random (``seed``) to the minority's count; ``by="object"``
    greedily removes majority-gender images of the most imbalanced object until
    every object with at least ``min_images`` labelled images is within
    ``tolerance`` of parity (or no removal helps), preferring images whose other
    objects are imbalanced the same way. Objects are the image's
    ``instances``/``chair_gt`` categories, else the caption's mentions. All
    captions of a removed image are dropped (logged ``drop``); images without a
    label are kept. The summary holds the per-object man/woman counts before
    and after (``cooccurrence``).
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from typing import Iterable, Iterator, Mapping

from capaudit.errors import InputError
from capaudit.filters.base import (CaptionDoc, CaptionResult, Decision, Filter, FilterContext,
                                   SentenceScore)
from capaudit.text.gender import MAN_WORDS, WOMAN_WORDS

__all__ = ["GenderNeutralFilter", "GenderBalanceFilter", "neutralize", "NEUTRAL_MAP",
           "load_gender_labels", "cooccurrence"]

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
    """Image gender labels ('male'/'female'; other images unknown) from a file or stored source."""
    from pathlib import Path

    if ref is None:
        return {}
    path = Path(ref)
    if not path.exists() and store is not None:
        try:
            rows = store.sql("SELECT image_id, gender FROM demographics WHERE source = ?", [str(ref)])
        except Exception:
            rows = []
        if rows:
            return {int(i): g for i, g in rows if g in ("male", "female")}
    from capaudit.io.annotations import load_demographics

    return load_demographics(path)[0]


class GenderNeutralFilter(Filter):
    """Replace gendered words where the image label is unknown or contradicts them."""

    name = "gender-neutral"
    version = "1"
    defaults: Mapping = {"when": "unknown,contradicted", "demographics": None}
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
            if self.options["demographics"] is None and self.when != {"always"}:
                raise InputError("gender-neutral needs image labels for --when "
                                 f"{','.join(sorted(self.when))}",
                                 fix="pass --demographics FILE, or --when always")
            self.labels = load_gender_labels(self.options["demographics"],
                                             context.store if context else None)

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
            if not words:
                decisions.append(Decision(s.sentence_idx, "keep", score=s.score))
                continue
            new, changes = neutralize(text, words)
            if new == text:
                decisions.append(Decision(s.sentence_idx, "keep", score=s.score))
                continue
            decisions.append(Decision(s.sentence_idx, "revise",
                                      f"neutralized ({why}): {', '.join(changes)}",
                                      revised=new, score=s.score))
        return CaptionResult(doc, decisions)


# -- gender-balance ---------------------------------------------------------------
def cooccurrence(image_gender: Mapping[int, str], image_objects: Mapping[int, Iterable[str]],
                 keep: set[int] | None = None) -> dict[str, dict]:
    """Per object: man / woman image counts and the man share, over ``keep`` (default: all)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for iid, g in image_gender.items():
        if keep is not None and iid not in keep:
            continue
        for o in image_objects.get(iid, ()):
            counts[o][g] += 1
    out = {}
    for o, c in sorted(counts.items()):
        m, w = c["male"], c["female"]
        out[o] = {"man": m, "woman": w, "man_share": round(m / (m + w), 4) if m + w else None}
    return out


class GenderBalanceFilter(Filter):
    """Undersample so woman and man images are balanced, overall or per co-occurring object."""

    name = "gender-balance"
    version = "1"
    defaults: Mapping = {"by": "overall", "demographics": None, "instances": None,
                         "chair_gt": None, "seed": 0, "tolerance": 0.05, "min_images": 10,
                         "object_mode": "reference"}

    def __init__(self, labels: Mapping[int, str] | None = None,
                 objects: Mapping[int, Iterable[str]] | None = None, **options):
        super().__init__(**options)
        if self.options["by"] not in ("overall", "object"):
            raise InputError(f"unknown --by '{self.options['by']}'", fix="use overall or object")
        self.labels = labels
        self.objects = objects
        self._store = None

    def setup(self, context: FilterContext | None = None) -> None:
        self._store = context.store if context else None
        if self.labels is None and self.options["demographics"] is not None:
            self.labels = load_gender_labels(self.options["demographics"], self._store)
        if self.objects is None and self.options["by"] == "object":
            from capaudit.filters.hallucination import load_evidence

            for kind, key in (("instances", "instances"), ("chair-gt", "chair_gt")):
                if self.options[key] is not None:
                    ev = load_evidence(kind, self.options[key], self._store)
                    self.objects = {i: sorted(v) for i, v in ev.items()}
                    break

    def _image_labels(self, docs: list[CaptionDoc]) -> tuple[dict[int, str], str]:
        if self.labels is not None:
            ids = {d.image_id for d in docs}
            return {i: g for i, g in self.labels.items() if i in ids and g in ("male", "female")}, \
                "demographics"
        # no labels: the captions' predicted gender, image labelled when its captions agree
        from capaudit.text.gender import predict_gender
        from capaudit.text.tokenize import tokenize

        votes: dict[int, set] = defaultdict(set)
        for d in docs:
            votes[d.image_id].add(predict_gender(tokenize(d.caption)))
        return {i: next(iter(v)) for i, v in votes.items()
                if len(v) == 1 and next(iter(v)) in ("male", "female")}, "caption words"

    def _image_objects(self, docs: list[CaptionDoc]) -> tuple[dict[int, set], str]:
        if self.objects is not None:
            return {i: set(v) for i, v in self.objects.items()}, "annotations"
        from capaudit.filters.hallucination import caption_mentions

        objs: dict[int, set] = defaultdict(set)
        for d in docs:
            objs[d.image_id].update(c for c, *_ in caption_mentions(d.caption,
                                                                   self.options["object_mode"])[1])
        return objs, "caption mentions"

    def _select(self, labels: dict[int, str], objects: dict[int, set]) -> set[int]:
        """Image ids to remove."""
        rng = random.Random(self.options["seed"])
        by_g = {g: sorted(i for i, x in labels.items() if x == g) for g in ("male", "female")}
        if self.options["by"] == "overall":
            n = min(len(by_g["male"]), len(by_g["female"]))
            big = "male" if len(by_g["male"]) > n else "female"
            return set(rng.sample(by_g[big], len(by_g[big]) - n))
        tol, min_n = float(self.options["tolerance"]), int(self.options["min_images"])
        counts: dict[str, Counter] = defaultdict(Counter)
        for i, g in labels.items():
            for o in objects.get(i, ()):
                counts[o][g] += 1
        alive = set(labels)
        removed: set[int] = set()
        exhausted: set[str] = set()
        order = sorted(labels)
        rng.shuffle(order)  # tie-break at random, reproducibly
        rank = {i: k for k, i in enumerate(order)}

        def excess(o: str) -> tuple[int, str]:
            c = counts[o]
            m, w = c["male"], c["female"]
            if m + w < min_n or o in exhausted:
                return 0, ""
            big = "male" if m > w else "female"
            hi, lo = max(m, w), min(m, w)
            # largest hi' with hi' / (hi' + lo) <= 0.5 + tol
            allowed = int((0.5 + tol) * lo / (0.5 - tol)) if tol < 0.5 else hi
            return max(0, hi - max(allowed, lo)), big

        for _ in range(10_000):
            worst = max(counts, key=lambda o: excess(o)[0], default=None)
            if worst is None:
                break
            n_ex, big = excess(worst)
            if n_ex <= 0:
                break
            cands = [i for i in alive if labels[i] == big and worst in objects.get(i, ())]

            def harm(i: int) -> tuple:
                # removing i lowers its other objects' `big` count: good when they lean `big`
                h = 0
                for o in objects.get(i, ()):
                    c = counts[o]
                    lean = c[big] - c["female" if big == "male" else "male"]
                    h += -1 if lean > 0 else 1
                return (h, rank[i])

            cands.sort(key=harm)
            step = cands[:max(1, min(n_ex, len(cands)) // 4)]  # a quarter, then re-rank
            if not step:
                exhausted.add(worst)
                continue
            for i in step:
                alive.discard(i)
                removed.add(i)
                for o in objects.get(i, ()):
                    counts[o][labels[i]] -= 1
        return removed

    def apply(self, docs: Iterable[CaptionDoc]) -> Iterator[CaptionResult]:
        docs = list(docs)
        labels, label_src = self._image_labels(docs)
        objects, obj_src = self._image_objects(docs) if self.options["by"] == "object" or \
            self.objects is not None else ({}, "none")
        removed = self._select(labels, objects)
        keep = set(labels) - removed
        before = Counter(labels.values())
        after = Counter(labels[i] for i in keep)
        self.report = {"balance": {
            "by": self.options["by"], "labels_from": label_src, "objects_from": obj_src,
            "images_before": {"man": before["male"], "woman": before["female"]},
            "images_after": {"man": after["male"], "woman": after["female"]},
            "images_removed": len(removed)}}
        if objects:
            self.report["cooccurrence"] = {"before": cooccurrence(labels, objects),
                                           "after": cooccurrence(labels, objects, keep)}
        for d in docs:
            if d.image_id in removed:
                reason = f"balance: {labels[d.image_id]} image removed ({self.options['by']})"
                yield CaptionResult(d, [Decision(i, "drop", reason) for i in range(len(d.spans))])
            else:
                yield CaptionResult(d, [Decision(i, "keep") for i in range(len(d.spans))])
