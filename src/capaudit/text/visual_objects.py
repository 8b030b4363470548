"""The larger object vocabulary (object mode ``visual``): its hierarchy and what a text names.

Why a vocabulary beyond COCO's 80: most of what people mark hallucinated in long VLM
descriptions names things outside COCO (tree, sky, shirt, building, sign: issue #42). The
packaged ``data/lexicons/visual_objects.txt`` holds ~1,500 categories with their synonyms
(COCO's with CHAIR's synonym list, then LVIS, Objects365, Open Images and ADE20K; built by
``tools/build_visual_objects.py``, provenance in ``visual_objects_PROVENANCE.md``), read by
CHAIR's own machinery (:class:`~capaudit.text.objects.ObjectLexicon`: singularized tokens,
synonyms, two- and three-word entries, consumed left to right), so matching stays a table
look-up. Generic words (thing, object, area, scene, image, side, part, top, front ...),
body parts and words a look-up cannot tell from a verb or a colour are not in it: they
decide nothing.

``visual_objects_parents.txt`` (``parent: child, ...``, hand-written) is the hierarchy that
lets a reference's "dog" support a sentence's "animal" (hypernym) and a reference's "fruit"
support "apple" (hyponym): :func:`related_categories`. ``visual_objects_parts.txt`` lets a
whole support its parts (:func:`parts`); :data:`BACKDROP` names what references' silence
says nothing about.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from capaudit.text.objects import VISUAL_MODE, get_lexicon, synonyms_path

__all__ = ["VISUAL_MODE", "BACKDROP", "parents_path", "hierarchy", "parts",
           "related_categories", "named_categories"]

#: The backdrop of a photo: the surfaces that enclose the scene (the sky over an outdoor
#: scene; the walls, floor and ceiling of a room; "ground" is a generic word, left out of
#: the vocabulary). A photo holds them whether or not its captions say so: people caption
#: what is in the scene, not what encloses it (in COCO's captions of the ShareGPT4V
#: images, none of 16 walls and 14 skies that GPT-4V describes is named, docs/filters.md).
#: So references that do not name one are no evidence against it: the mention is
#: undecided, unless references name it (then their colours count) or another evidence
#: judges it.
BACKDROP = frozenset({"sky", "wall", "floor", "ceiling"})


def parents_path():
    """The packaged hierarchy file."""
    return synonyms_path().with_name("visual_objects_parents.txt")


@lru_cache(maxsize=None)
def hierarchy(mode: str = VISUAL_MODE) -> dict[str, frozenset[str]]:
    """``{category: its ancestors and descendants}`` (empty for COCO's modes, which have no
    hierarchy); a name the lexicon lacks is left out."""
    if mode != VISUAL_MODE:
        return {}
    children = _listed(parents_path(), mode)

    def below(cat: str, seen: frozenset = frozenset()) -> set[str]:
        out = set()
        for kid in children.get(cat, ()):
            if kid not in seen:
                out |= {kid} | below(kid, seen | {cat})
        return out

    related: dict[str, set[str]] = {}
    for parent in children:
        for kid in below(parent):
            related.setdefault(parent, set()).add(kid)
            related.setdefault(kid, set()).add(parent)
    return {c: frozenset(r) for c, r in related.items()}


@lru_cache(maxsize=None)
def parts(mode: str = VISUAL_MODE) -> dict[str, frozenset[str]]:
    """``{whole: its parts}`` of ``visual_objects_parts.txt`` (hand-written, ``whole: part,
    ...``): the parts a picture holds whenever it holds the whole (a building's windows, a
    car's wheels, a laptop's screen, a tree's leaves), so a reference's "building" supports
    a sentence's "windows" (and no part supports its whole). Only parts outside COCO's 80,
    which the CHAIR ground truth judges; empty for COCO's modes."""
    if mode != VISUAL_MODE:
        return {}
    listed = _listed(synonyms_path().with_name("visual_objects_parts.txt"), mode)
    return {whole: frozenset(found) for whole, found in listed.items() if found}


def _listed(path, mode: str) -> dict[str, set[str]]:
    """``{head: its names}`` of a hand-written ``head: name, ...`` file, in the order of the
    lines; a name the lexicon lacks is left out, and so is a line whose head it lacks."""
    cats = set(get_lexicon(mode).categories)
    out: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        head, _, names = line.partition(":")
        if head.strip() in cats:
            out.setdefault(head.strip(), set()).update(
                n.strip() for n in names.split(",") if n.strip() in cats)
    return out


def related_categories(categories: Iterable[str], mode: str = VISUAL_MODE) -> set[str]:
    """The categories plus every hypernym and hyponym of each (the hierarchy's)."""
    tree = hierarchy(mode)
    out = set(categories)
    for c in list(out):
        out |= tree.get(c, frozenset())
    return out


def named_categories(texts: Iterable[str], mode: str = VISUAL_MODE) -> set[str]:
    """The categories the texts name (every mention the lexicon finds, synonyms and
    multi-word entries read as in a caption)."""
    from capaudit.text.mentions import caption_mentions

    out: set[str] = set()
    for text in texts:
        out.update(m.category for m in caption_mentions(text, mode)[1])
    return out
