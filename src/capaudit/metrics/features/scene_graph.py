"""A rule-based scene-graph parser over spaCy dependency parses.

Why our own: LOTUS counts "semantic nodes" with the DOCCI scene-graph parser,
which is not released. This parser follows the classic rule-based textual scene
graph (Schuster et al. 2015, SPICE's parser) in a few rules over one sentence's
dependency tree, so the count is reproducible and its errors are inspectable:

* **objects**: nouns and proper nouns that head a noun phrase (``compound``
  modifiers fold into the head: "tennis racket" is one object); pronouns are not
  objects. Objects are keyed by their (compound + head) lemma, so repeated
  mentions of "dog" in a caption are one node.
* **attributes**: ``amod`` adjectives and ``nummod`` numbers of an object (and
  their ``conj``: "a red and white bus" gives red, white), and adjectives
  predicated of a subject by a copula ("the car is red": car-red).
* **relations** ``(subject, predicate, object)``: a verb with a subject (its
  ``nsubj``/``nsubjpass``, the subject of the verb it is conjoined to, or the noun
  an ``acl`` participle modifies: "a man riding a horse") and a direct object
  gives (subject, verb lemma, object); a preposition whose ``pobj`` is an object
  gives (head noun, preposition, object) when it modifies a noun, and
  (subject, "verb preposition", object) when it modifies such a verb.
  Conjoined objects each get the relation. Endpoints that are not objects
  (pronouns) drop the relation.

``nodes = objects + attributes + relations`` (distinct per caption).
``tests/test_lotus_parse.py`` checks hand-made sentences with known graphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SceneGraph", "scene_graph"]

OBJECT_POS = {"NOUN", "PROPN"}
SUBJ = {"nsubj", "nsubjpass"}


@dataclass
class SceneGraph:
    objects: set = field(default_factory=set)
    attributes: set = field(default_factory=set)    # (object, attribute)
    relations: set = field(default_factory=set)     # (subject, predicate, object)

    @property
    def nodes(self) -> int:
        return len(self.objects) + len(self.attributes) + len(self.relations)

    def update(self, other: "SceneGraph") -> None:
        self.objects |= other.objects
        self.attributes |= other.attributes
        self.relations |= other.relations


def _is_object(tok) -> bool:
    return tok.pos_ in OBJECT_POS and tok.dep_ != "compound"


def _key(tok) -> str:
    parts = [c.lemma_.lower() for c in tok.lefts if c.dep_ == "compound"]
    return " ".join(parts + [tok.lemma_.lower()])


def _with_conj(tok) -> list:
    """``tok`` and the tokens conjoined to it ("a cat and a dog")."""
    out, stack = [], [tok]
    while stack:
        t = stack.pop()
        out.append(t)
        stack.extend(c for c in t.children if c.dep_ == "conj")
    return out


def _subject(verb):
    """The subject of a verb: its own, the conjoined-to verb's, or the noun an acl modifies."""
    seen = 0
    while verb is not None and seen < 10:
        seen += 1
        subj = [c for c in verb.children if c.dep_ in SUBJ]
        if subj:
            return subj[0]
        if verb.dep_ in ("acl", "relcl") and _is_object(verb.head):
            return verb.head
        if verb.dep_ == "conj" and verb.head.i != verb.i:
            verb = verb.head
            continue
        return None
    return None


def scene_graph(doc) -> SceneGraph:
    """The scene graph of a parsed caption (a spaCy ``Doc`` or ``Span``)."""
    g = SceneGraph()
    for tok in doc:
        if _is_object(tok):
            g.objects.add(_key(tok))
            for c in tok.children:
                if c.dep_ in ("amod", "nummod"):
                    for a in _with_conj(c):
                        g.attributes.add((_key(tok), a.lemma_.lower()))
        elif tok.pos_ in ("VERB", "AUX"):
            subj = _subject(tok)
            if subj is None:
                continue
            subjects = [s for s in _with_conj(subj) if _is_object(s)]
            kids = list(tok.children)
            if tok.lemma_ == "be":
                for c in kids:
                    if c.dep_ == "acomp":
                        for a in _with_conj(c):
                            for s in subjects:
                                g.attributes.add((_key(s), a.lemma_.lower()))
            for c in kids:
                if c.dep_ == "dobj":
                    for o in _with_conj(c):
                        if _is_object(o):
                            for s in subjects:
                                g.relations.add((_key(s), tok.lemma_.lower(), _key(o)))
                elif c.dep_ == "prep":
                    pred = c.lemma_.lower() if tok.lemma_ == "be" else \
                        f"{tok.lemma_.lower()} {c.lemma_.lower()}"
                    for o in _prep_objects(c):
                        for s in subjects:
                            g.relations.add((_key(s), pred, _key(o)))
        if tok.dep_ == "prep" and _is_object(tok.head):
            for o in _prep_objects(tok):
                g.relations.add((_key(tok.head), tok.lemma_.lower(), _key(o)))
    return g


def _prep_objects(prep) -> list:
    return [o for c in prep.children if c.dep_ == "pobj" for o in _with_conj(c) if _is_object(o)]
