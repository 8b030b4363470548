"""CHAIR object mentions: which COCO categories a caption talks about.

Why two modes: published CHAIR numbers come from LisaAnne/Hallucination's
``utils/chair.py``, quirks included, and an audit must be able to reproduce
them exactly (``mode="reference"``, the default). Its known misses are real,
though, so ``mode="corrected"`` fixes them and is reported *beside* the
reference value, never instead of it.

Reference rules (applied to lowercased, treebank-tokenized, singularized
tokens; see :mod:`capaudit.text.singularize`):

1. pairs of tokens are read left to right; a pair found in the two-word
   table is consumed whole (``motor bike``, ``traffic light``, ...,
   ``baby dog`` -> ``dog``, ``passenger jet`` -> ``jet``, ``bow tie`` ->
   ``tie``, ``toilet seat`` -> ``toilet``, ``wine glas`` -> ``wine glass``);
   ``home plate`` and ``train track`` are consumed but map to no category;
2. if a caption has both ``toilet`` and ``seat``, every ``seat`` is dropped;
3. each remaining word found in the synonym list maps to its category. The
   list is ``chair_synonyms.txt`` split on ``", "`` after ``strip()``,
   exactly as the reference does, so entries written with two spaces
   (``" motor bike"``, ``" cheesecake"``) can never match, and ``iPhone``
   never matches a lowercased caption.

Corrected mode, each fix on purpose:

* synonyms are stripped and lowercased: ``motor bike``, ``cheesecake`` and
  ``iphone`` become detectable;
* singularization keeps real singulars (``bus`` stays ``bus``, not ``bu``)
  and maps ``ties`` -> ``tie``, ``collies``/``doggies`` -> dog words
  (:func:`~capaudit.text.singularize.singularize_corrected`);
* the three-word ``stove top oven`` is matched (the reference checks only
  pairs, so it counts ``stove`` and ``oven`` as two ovens);
* ``hair dryer`` (the common spelling) maps to ``hair drier``.

A mention is ``(word, category, token index, sentence index)``; ``word`` is
the matched (singular / joined) form, as in the reference's ``words`` list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from itertools import compress, count
from pathlib import Path

__all__ = ["ObjectLexicon", "get_lexicon", "MODES", "LEXICON_PREFIX", "user_lexicon_mode",
           "VISUAL_MODE"]

MODES = ("reference", "corrected")
LEXICON_PREFIX = "lexicon:"   # mode "lexicon:/path/to/file": a user's categories and synonyms
VISUAL_MODE = "visual"        # the packaged ~1,500 visual objects (capaudit.text.visual_objects)

DOUBLE_WORDS = ["motor bike", "motor cycle", "air plane", "traffic light", "street light",
                "traffic signal", "stop light", "fire hydrant", "stop sign", "parking meter",
                "suit case", "sports ball", "baseball bat", "baseball glove", "tennis racket",
                "wine glass", "hot dog", "cell phone", "mobile phone", "teddy bear", "hair drier",
                "potted plant", "bow tie", "laptop computer", "stove top oven", "home plate",
                "train track"]
ANIMAL_WORDS = ["bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra",
                "giraffe", "animal", "cub"]
VEHICLE_WORDS = ["jet", "train"]


def synonyms_path() -> Path:
    """The packaged copy of the CHAIR synonym list."""
    return Path(str(resources.files("capaudit") / "data" / "lexicons" / "chair_synonyms.txt"))


@dataclass
class ObjectLexicon:
    """Synonym table and multi-word rules for one mode, with integer ids for speed."""

    mode: str
    categories: list[str]                       # category names, file order
    word_cat: dict[str, int]                    # matchable word -> category index
    words: list[str] = field(default_factory=list)     # word id -> word
    word_id: dict[str, int] = field(default_factory=dict)
    pairs: dict[tuple[str, str], str] = field(default_factory=dict)
    triples: dict[tuple[str, str, str], str] = field(default_factory=dict)
    first: frozenset[str] = frozenset()         # first words of pairs / triples

    @classmethod
    def build(cls, mode: str = "reference", path: str | Path | None = None) -> "ObjectLexicon":
        if mode not in MODES:
            from capaudit.errors import InputError
            raise InputError(f"unknown object mode {mode!r}", fix="use 'reference' or 'corrected'")
        text = Path(path or synonyms_path()).read_text(encoding="utf-8")
        categories: list[str] = []
        word_cat: dict[str, int] = {}
        for line in text.splitlines():
            entries = line.strip().split(", ")
            if mode == "corrected":
                entries = [e.strip().lower() for e in entries]
            if not entries[0]:
                continue
            cat = entries[0]
            if cat not in categories:
                categories.append(cat)
            for e in entries:  # later lines win, as with the reference's dict
                word_cat[e] = categories.index(cat)
        pairs: dict[tuple[str, str], str] = {}
        for dw in DOUBLE_WORDS:
            a, _, b = dw.partition(" ")
            if " " not in b:
                pairs[(a, b)] = dw
        for w in ANIMAL_WORDS:
            pairs[("baby", w)] = w
            pairs[("adult", w)] = w
        for w in VEHICLE_WORDS:
            pairs[("passenger", w)] = w
        pairs[("bow", "tie")] = "tie"
        pairs[("toilet", "seat")] = "toilet"
        pairs[("wine", "glas")] = "wine glass"
        triples: dict[tuple[str, str, str], str] = {}
        if mode == "corrected":
            triples[("stove", "top", "oven")] = "stove top oven"
            pairs[("hair", "dryer")] = "hair drier"
        words = sorted(set(word_cat) | set(pairs.values()) | set(triples.values()))
        first = frozenset({p[0] for p in pairs} | {t[0] for t in triples})
        return cls(mode, categories, word_cat, words, {w: i for i, w in enumerate(words)},
                   pairs, triples, first)

    @classmethod
    def from_file(cls, path: str | Path) -> "ObjectLexicon":
        """A user lexicon (``--lexicon FILE``, the format of ``chair_synonyms.txt``: one line per
        category, ``category, synonym, ...``), read as corrected mode reads COCO's: entries
        stripped and lowercased; an entry of two or three words is matched as one mention
        (consumed whole, left to right). None of COCO's special rules apply."""
        from capaudit.errors import InputError

        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the lexicon ({exc.__class__.__name__})", path=path,
                             fix="a UTF-8 text file: 'category, synonym, ...' per line") from None
        categories: list[str] = []
        word_cat: dict[str, int] = {}
        pairs: dict[tuple[str, str], str] = {}
        triples: dict[tuple[str, str, str], str] = {}
        for row, line in enumerate(text.splitlines(), start=1):
            entries = [" ".join(e.split()).lower() for e in line.split(",")]
            entries = [e for e in entries if e]
            if not entries:
                continue
            if entries[0] not in categories:
                categories.append(entries[0])
            for e in entries:
                parts = e.split(" ")
                if len(parts) > 3:
                    raise InputError(f"'{e}' has more than three words", path=path, row=row,
                                     fix="shorten the synonym")
                word_cat[e] = categories.index(entries[0])
                if len(parts) == 2:
                    pairs[(parts[0], parts[1])] = e
                elif len(parts) == 3:
                    triples[(parts[0], parts[1], parts[2])] = e
        if not categories:
            raise InputError("the lexicon has no categories", path=path,
                             fix="one line per category: 'category, synonym, ...'")
        words = sorted(word_cat)
        first = frozenset({p[0] for p in pairs} | {t[0] for t in triples})
        return cls(LEXICON_PREFIX + str(path), categories, word_cat, words,
                   {w: i for i, w in enumerate(words)}, pairs, triples, first)

    def merge_words(self, toks: list[str]) -> list[tuple[str, int]]:
        """The reference's double-word pass: ``(word, index of its first token)`` for every token."""
        out = []
        i, n = 0, len(toks)
        pairs, triples, first = self.pairs, self.triples, self.first
        while i < n:
            w = toks[i]
            if w in first and i + 1 < n:
                if triples and i + 2 < n:
                    t = triples.get((w, toks[i + 1], toks[i + 2]))
                    if t is not None:
                        out.append((t, i))
                        i += 3
                        continue
                p = pairs.get((w, toks[i + 1]))
                if p is not None:
                    out.append((p, i))
                    i += 2
                    continue
            out.append((w, i))
            i += 1
        return out

    def find(self, toks: list[str]) -> list[tuple[int, int, int]]:
        """Object mentions in singularized tokens: ``(word id, category index, token index)``.

        Same result as :meth:`merge_words` followed by the synonym lookup, but
        only visits tokens that are synonyms or start a multi-word entry.
        """
        return self.caption_hits(self.word_hits(toks))

    def word_hits(self, toks: list[str]) -> list[tuple[str, int]]:
        """``(lexicon word, token index)`` of every mention, before the caption-level rule
        (:meth:`caption_hits`). Each hit depends on its token and the two after it only,
        so the hits of a text cut where no multi-word entry can start (:meth:`may_join`)
        are those of its pieces, shifted."""
        word_cat, first, cand = self.word_cat, self.first, self._candidates
        if cand.isdisjoint(toks):
            return []
        idx = list(compress(count(), map(cand.__contains__, toks)))  # positions, looped in C
        if not idx:
            return []
        hits = []
        n = len(toks)
        nxt = 0  # first token not consumed by a multi-word match
        for i in idx:
            if i < nxt:
                continue
            w = toks[i]
            if w in first and i + 1 < n:
                if self.triples and i + 2 < n:
                    t = self.triples.get((w, toks[i + 1], toks[i + 2]))
                    if t is not None:
                        if t in word_cat:
                            hits.append((t, i))
                        nxt = i + 3
                        continue
                p = self.pairs.get((w, toks[i + 1]))
                if p is not None:
                    if p in word_cat:
                        hits.append((p, i))
                    nxt = i + 2
                    continue
            if w in word_cat:
                hits.append((w, i))
        return hits

    def caption_hits(self, hits: list[tuple[str, int]]) -> list[tuple[int, int, int]]:
        """A caption's :meth:`word_hits` under the reference's one caption-wide rule (a
        "seat" of a caption that names a "toilet" is the toilet's), as ``(word id,
        category index, token index)``."""
        if len(hits) > 1:
            ws = {w for w, _ in hits}
            if "toilet" in ws and "seat" in ws:
                hits = [h for h in hits if h[0] != "seat"]
        wid, word_cat = self.word_id, self.word_cat
        return [(wid[w], word_cat[w], i) for w, i in hits]

    def may_join(self, toks: list[str]) -> bool:
        """Could a multi-word entry that starts in these singularized tokens run on into the
        tokens after them? Only one starting at the last token, or a three-word entry
        starting at the last but one (a two-word entry there ends inside them)."""
        if not toks:
            return False
        if toks[-1] in self.first:
            return True
        heads = self.__dict__.get("_heads")
        if heads is None:
            heads = self.__dict__["_heads"] = frozenset(t[:2] for t in self.triples)
        return len(toks) > 1 and (toks[-2], toks[-1]) in heads

    @property
    def _candidates(self) -> frozenset[str]:
        c = self.__dict__.get("_cand")
        if c is None:
            c = self.__dict__["_cand"] = frozenset(self.word_cat) | self.first
        return c


@lru_cache(maxsize=None)
def get_lexicon(mode: str = "reference") -> ObjectLexicon:
    """The packaged lexicon for ``mode``, or a user's (``lexicon:PATH``), built once per process."""
    if mode.startswith(LEXICON_PREFIX):
        return ObjectLexicon.from_file(mode[len(LEXICON_PREFIX):])
    if mode == VISUAL_MODE:   # read as a user lexicon is, named by its mode
        lex = ObjectLexicon.from_file(synonyms_path().with_name("visual_objects.txt"))
        lex.mode = VISUAL_MODE
        return lex
    return ObjectLexicon.build(mode)


def user_lexicon_mode(path: str | Path, mode: str = "reference", corrected: bool = False) -> str:
    """The mode string of a user lexicon file (checked now: a bad file fails before any work).

    ``mode`` / ``corrected`` are the audit's other mention settings: COCO's two rule sets
    (reference-exact and corrected) do not exist for a user lexicon, which is always read
    with the corrected singularizer, so asking for either beside it is refused, not ignored.
    """
    if corrected or mode not in (None, "reference"):
        from capaudit.errors import InputError

        what = "--corrected" if corrected else f"--mode {mode}"
        raise InputError(f"{what} selects COCO's mention rules; a --lexicon has one rule set "
                         "only (the corrected singularizer, no COCO special cases)",
                         path=path, fix=f"drop {what}, or drop --lexicon to use COCO's two modes")
    mode = LEXICON_PREFIX + str(Path(path).resolve())
    get_lexicon(mode)
    return mode
