"""Non-visual mentions: object words in generic or hypothetical clauses.

"The umbrellas are placed to protect people from sunlight" does not claim a
person is in the image; neither do "the fruit stand attracts buyers", "a
bus, which is often used for transporting passengers", or "a man might be
waiting for a bus" (about the bus). Long descriptions (LLaVA, ShareGPT4V)
are full of such clauses, and judging them as claims drops true sentences.
The hallucination filter therefore labels a mention *non-visual* and, by
default, does not count it against its sentence (``--non-visual keep``;
``flag`` keeps the sentence but marks it for review; ``judge`` counts it like
any other mention, which is what CHAIR does).

The rule (a small, explainable one, on a spaCy dependency parse of the
sentence; :mod:`capaudit.filters.parse`): walk from the mention's head token
up to the root of the sentence; the mention is non-visual, with the first
reason met, when a clause on that path is

``purpose``
    an infinitive that states what a thing is for: one attached to a noun
    ("umbrellas to protect people", "a sign to warn drivers"), or to a
    passive participle or a placing verb ("placed to protect people",
    "designed to carry passengers"). The purpose of a depicted action stays
    visual: "a dog jumping to catch a frisbee", "preparing to cut a cake"
    claim the frisbee and the cake;
``use``
    a ``for`` phrase of a use or suitability word ("used for transporting
    passengers", "perfect for families", "designed for kids");
``generic``
    a clause with a habitual adverb (often, usually, typically, commonly,
    generally, frequently, sometimes, normally, traditionally);
``purpose`` (also)
    a clause opened by ``so`` / ``so that`` / ``in order`` ("parked there so
    the driver or passengers can go to a shop");
``hypothetical``
    a clause with a modal (can, could, may, might, would, should, will) or a
    hedge (possibly, perhaps, probably, likely, maybe), or one opened by
    ``if`` / ``unless`` / ``whether``. Perception verbs stay visual ("a
    person can be seen in the background"), and so does the clause's
    subject when it has a determiner, a number or a possessive ("*a man*
    might be waiting for a bus": the man is claimed, the bus is not), and
    so does a definite object ("people can sit on *the bench*");
``inferred``
    the object or clause of suggest / indicate / imply / hint / assume /
    imagine / expect ("indicating the presence of people", "it's reasonable
    to assume the driver is abiding by the rules");
``prospective``
    the object of attract / entice / invite / welcome / accommodate / cater /
    appeal / lure ("attracts buyers", "caters to tourists"), and a bare
    (undetermined) object of a verb of benefit such as protect / shield /
    help / allow / serve / provide ("helps protect people from direct
    sunlight"; "shields *a child* from the rain" stays visual).

Misses and false alarms are possible (parser errors; "a dog waiting to be
fed by its owner" is visual about the owner in some images); every
non-visual decision is logged with its reason and the word that triggered
it, so its effect can be audited (``capaudit filter log``).
"""

from __future__ import annotations

__all__ = ["non_visual_reason", "may_be_non_visual", "NON_VISUAL_MODES", "CLAUSE_CUES", "TRIGGERS"]

NON_VISUAL_MODES = ("keep", "flag", "judge")

_PLACING = frozenset({"place", "position", "set", "put", "design", "build", "make", "use",
                      "arrange", "install", "mount", "hang", "provide", "intend", "mean",
                      "plan", "serve", "equip", "station", "park", "leave", "keep"})
_USE_FOR = frozenset({"use", "design", "intend", "mean", "make", "build", "reserve", "perfect",
                      "ideal", "suitable", "great", "good", "popular", "useful", "convenient",
                      "ready", "available", "accessible", "safe", "comfortable", "enough",
                      "necessary", "essential", "meant", "used", "designed", "intended"})
_HABITUAL = frozenset({"often", "usually", "typically", "commonly", "generally", "frequently",
                       "sometimes", "normally", "traditionally", "occasionally"})
_MODALS = frozenset({"can", "could", "may", "might", "would", "should", "will", "must", "ca",
                     "wo", "'ll", "'d"})
_HEDGES = frozenset({"possibly", "perhaps", "probably", "likely", "maybe", "presumably",
                     "potentially"})
_CONDITION = frozenset({"if", "unless", "whether"})
_PERCEPTION = frozenset({"see", "spot", "notice", "observe", "view", "find", "identify",
                         "recognize", "discern", "glimpse", "show", "depict", "visible", "seen",
                         "make", "tell", "distinguish"})
_INFER = frozenset({"suggest", "indicate", "imply", "hint", "signal", "evoke", "assume",
                    "presume", "imagine", "expect", "guess", "infer", "speculate", "believe"})
_ATTRACT = frozenset({"attract", "entice", "invite", "welcome", "accommodate", "cater",
                      "appeal", "lure", "draw"})
_BENEFIT = frozenset({"protect", "shield", "shelter", "help", "allow", "enable", "let", "serve",
                      "benefit", "provide", "keep", "give", "offer", "remind", "warn", "guide"})
_PURPOSE_MARKS = frozenset({"so", "order"})
_SUBJ = frozenset({"nsubj", "nsubjpass", "expl"})
_DETS = frozenset({"det", "poss", "nummod", "predet"})
_DEFINITE = frozenset({"the", "this", "that", "these", "those"})


_IRREGULAR = {"draw": ("drew", "drawn"), "give": ("gave", "given"), "keep": ("kept",),
              "mean": ("meant",), "make": ("made",), "build": ("built",), "hang": ("hung",),
              "leave": ("left",), "set": (), "put": (), "let": ()}


def _forms(lemma: str) -> set[str]:
    """Surface forms of a verb, loosely (a superset is harmless: it only gates the parse)."""
    out = {lemma, lemma + "s", lemma + "es", lemma + "ed", lemma + "d", lemma + "ing",
           lemma + lemma[-1] + "ed", lemma + lemma[-1] + "ing", *_IRREGULAR.get(lemma, ())}
    if lemma.endswith("e"):
        out.add(lemma[:-1] + "ing")
    if lemma.endswith("y"):
        out |= {lemma[:-1] + "ies", lemma[:-1] + "ied"}
    return out


#: words without which no rule but ``use`` can fire
CLAUSE_CUES = frozenset({"to", *_PURPOSE_MARKS, *_CONDITION, *_HABITUAL, *_MODALS, *_HEDGES}
                        ).union(*(_forms(v) for v in _INFER | _ATTRACT | _BENEFIT))
#: words without which no rule above can fire: a sentence with none is not parsed (``use``
#: needs "for" and a use word: :func:`capaudit.filters.parse.non_visual_cue` asks for both)
TRIGGERS = CLAUSE_CUES | {"for", *_USE_FOR}


def may_be_non_visual(tokens) -> bool:
    """Cheap test before the parse: does the sentence hold a word some rule needs?"""
    return not TRIGGERS.isdisjoint(tokens)


def _lemma(tok) -> str:
    """The token's lemma as the pipeline set it (the lemmatizer ran on the whole doc)."""
    return (tok.lemma_ or tok.text).lower()


def _has_child(tok, deps, words) -> str | None:
    for c in tok.children:
        if c.dep_ in deps and c.text.lower() in words:
            return c.text.lower()
    return None


def _is_infinitive(tok) -> bool:
    return any(c.dep_ == "aux" and c.text.lower() == "to" for c in tok.children)


def _determined(tok) -> bool:
    """A subject that names a particular thing: "a man", "the dogs", "two people", "his dog"."""
    return tok.pos_ == "PRON" or any(c.dep_ in _DETS for c in tok.children)


def _clause_reason(clause, below, lemma=_lemma) -> str | None:
    """Why ``clause`` (a token on the path to the root) makes what is ``below`` it non-visual."""
    dep = clause.dep_
    if _is_infinitive(clause):
        head = clause.head
        passive = head.tag_ == "VBN" and (head.dep_ == "acl" or any(
            c.dep_ in ("auxpass", "nsubjpass") for c in head.children))
        arranged = passive or lemma(head) in _PLACING
        if (dep == "acl" and head.pos_ in ("NOUN", "PROPN")) or (
                dep in ("advcl", "xcomp") and arranged):
            return f"purpose: to {clause.text}"
    if clause.dep_ == "prep" and clause.text.lower() == "for" and (
            lemma(clause.head) in _USE_FOR or clause.head.text.lower() in _USE_FOR):
        return f"use: {clause.head.text} for"
    if clause.pos_ in ("VERB", "AUX", "ADJ", "NOUN"):
        subject_ok = below is not None and below.dep_ in _SUBJ and _determined(below)
        w = _has_child(clause, ("advmod",), _HABITUAL)
        if w and not subject_ok:
            return f"generic: {w}"
        w = _has_child(clause, ("mark", "advmod"), _PURPOSE_MARKS)
        if w and dep in ("advcl", "ccomp"):
            return f"purpose: {w} that"
        w = _has_child(clause, ("mark",), _CONDITION)
        if w:
            return f"hypothetical: {w}"
        perceived = lemma(clause) in _PERCEPTION or clause.text.lower() in _PERCEPTION
        w = (_has_child(clause, ("aux", "auxpass"), _MODALS)
             or _has_child(clause, ("advmod",), _HEDGES))
        if w and not perceived and not subject_ok:
            return f"hypothetical: {w}"
        head = clause.head
        if dep in ("dobj", "ccomp", "pobj", "attr") and head is not clause:
            verb = head.head if dep == "pobj" else head
            if lemma(verb) in _INFER:
                return f"inferred: {verb.text}"
            if lemma(verb) in _ATTRACT and (dep != "pobj" or head.text.lower() == "to"):
                return f"prospective: {verb.text}"
            if lemma(verb) in _BENEFIT and dep == "dobj" and not _determined(clause):
                return f"prospective: {verb.text} {clause.text}"
    return None


def _definite(tok) -> bool:
    """"the bench", "this dog", "his bike": a thing of the scene, not an imagined one."""
    return any((c.dep_ == "det" and c.text.lower() in _DEFINITE) or c.dep_ == "poss"
               for c in tok.children)


def non_visual_reason(doc, index: int, lemma=_lemma) -> str | None:
    """Why the mention whose head token is ``doc[index]`` is non-visual (None: it is a claim).
    ``lemma``: a token's lower-case lemma (or text); :func:`capaudit.filters.parse.parse_many`
    leaves the lemmatizer out of the pipe and passes one that lemmatizes only the few tokens
    the rules read, with the same answer."""
    below, tok = None, doc[index]
    seen = set()
    while tok.i not in seen:
        seen.add(tok.i)
        why = _clause_reason(tok, below, lemma)
        if why:
            if why.startswith("hypothetical") and _definite(doc[index]):
                return None  # "people can sit on the bench": the bench is there
            return why
        if tok.head is tok:
            break
        below, tok = tok, tok.head
    return None
