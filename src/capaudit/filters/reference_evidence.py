"""Reference texts as hallucination evidence: the image's human captions support the objects they name.

Why: COCO's 80 categories miss most of what people mark hallucinated (tree, sky, shirt,
building, sign: issue #42), and the CHAIR ground truth names only those 80. An image's own
human captions (``references=``: a caption file in any layout ``sets add`` reads, joined by
image id, or a stored set; ``reference_col=``: a field of each record of the set's JSON or
JSONL source, a string or a list of strings) are read with the filter's vocabulary (object
mode ``visual``: ~1,500 categories, :mod:`capaudit.text.visual_objects`). An object of a
sentence is supported when a reference names it or a synonym (the same category), a
hypernym or hyponym (the vocabulary's hierarchy), or a category whose MiniLM cosine with it
is at least ``similarity`` (:mod:`capaudit.filters.vocab_similarity`, ALOHa's recipe; the
cosines are the vocabulary's pairs, computed once), and a part when they name its whole (a
building's windows). Their silence about the backdrop (sky, walls, floor, ceiling:
:data:`capaudit.text.visual_objects.BACKDROP`) leaves it undecided.

Combined with the other evidence (``chair-gt``, ``instances``, ``detector``): an object is
supported when any of them supports it. A 0 from the CHAIR ground truth counts only for
the categories it can name (COCO's 80); any other object of an image without references is
*undecided* (logged, never dropped). Each support carries the evidence that gave it
(:class:`Scored`), which the sentence's log shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path

from capaudit.errors import InputError
from capaudit.filters.evidence import evidence_files, evidence_names, resolve_evidence
from capaudit.filters.scored import Scored
from capaudit.text.objects import VISUAL_MODE, get_lexicon
from capaudit.text.visual_objects import BACKDROP, hierarchy, parts

__all__ = ["Scored", "Support", "WithReferences", "setup_evidence", "shard_references",
           "add_references", "has_references", "one_name_each", "wants_wrapper",
           "with_references"]


class Support(dict):
    """One image's ``{category: support}``; :meth:`get` of a category the evidence cannot
    judge is ``None`` (undecided) rather than the caller's default."""

    def __init__(self, scores: dict, judges, missing: float, attributes: dict | None = None,
                 unjudged: frozenset = frozenset(), base_check=None):
        super().__init__(scores)
        self.judges, self.missing = judges, missing   # judges None: every category ...
        self.unjudged = unjudged                      # ... but these (the backdrop)
        self.attributes = attributes or {}            # {category: [Attached]} of the references
        self.base_check = base_check                  # the base evidence's own (instance counts)

    def get(self, key, default=None):
        v = dict.get(self, key)
        if v is not None:
            return v
        if key in self.unjudged:
            return None
        return self.missing if self.judges is None or key in self.judges else None

    def contradicted(self, category: str, tokens: list[str], index: int, support):
        """``support``, or 0 when the references that state a number for the category all
        state another than the sentence's mention at ``index`` does, or the colours they
        give it share none with the sentence's; first, the base evidence's own check (a
        number the image's instance counts contradict, :mod:`.instance_counts`)."""
        if self.base_check is not None:
            support = self.base_check(category, tokens, index, support)
        refs = self.attributes.get(category)
        if not refs or support is None or not support:
            return support
        from capaudit.text.attributes import attached

        said = attached(tokens, index)
        if said.count is not None:
            counts = {a.count for a in refs if a.count is not None}
            if counts and said.count not in counts:
                return Scored(0.0, f"references: {said.count} against "
                                   f"{'/'.join(map(str, sorted(counts)))} (count)")
        if said.colours:
            colours = set().union(*(a.colours for a in refs))
            if colours and said.colours.isdisjoint(colours):
                return Scored(0.0, f"references: {'/'.join(sorted(said.colours))} against "
                                   f"{'/'.join(sorted(colours))} (colour)")
        return support


class WithReferences(Mapping):
    """The base evidence (or none) and the references, per image, as one support mapping."""

    def __init__(self, base, base_names: set[str], refs: dict, mode: str, threshold: float,
                 attributes: bool = True):
        self.attributes = attributes   # check counts and colours against the references
        self.base, self.base_names, self.refs, self.mode = base, frozenset(base_names), refs, mode
        self.threshold = threshold
        self._keys = set(refs) | (set(base.keys()) if base is not None else set())
        # the backdrop (sky, walls ...): references' silence does not count against it
        self.backdrop = (BACKDROP if mode == VISUAL_MODE else frozenset()) - self.base_names
        self._cache: dict = {}

    @cached_property
    def near(self) -> dict:
        """The vocabulary's similar categories, read at the first image's support: the
        coverage guard (keys only) refuses before the MiniLM cosines load (cold: minutes)."""
        from capaudit.filters.vocab_similarity import neighbours

        return neighbours(self.mode, self.threshold) if self.threshold <= 1.0 else {}

    def __getitem__(self, iid) -> Support:
        hit = self._cache.get(iid)
        if hit is not None:
            return hit
        base = self.base.get(iid) if self.base is not None else None
        texts = self.refs.get(iid)
        if base is None and texts is None:
            raise KeyError(iid)
        scores, attrs = {}, None
        if texts is not None:   # one reading of the references: what they name, and how
            from capaudit.text.attributes import text_attributes

            attrs = text_attributes(texts, self.mode)
            scores = self._from_references(set(attrs))
        for cat, v in (base or {}).items():
            if v > scores.get(cat, -1.0):
                scores[cat] = v
        missing = Scored(0.0, f"references: none of {len(texts)} names it") \
            if texts is not None else 0.0
        judges = None if texts is not None else self.base_names
        if len(self._cache) >= 4096:
            self._cache.clear()
        hit = self._cache[iid] = Support(scores, judges, missing,
                                         attrs if self.attributes else None,
                                         self.backdrop if texts is not None else frozenset(),
                                         getattr(base, "contradicted", None))
        return hit

    def use_references(self, refs) -> None:
        """Read ``refs`` from now on (a shard batch's: each record's own column,
        :mod:`capaudit.filters.shards.record_references`); supports are read again."""
        self.refs, self._cache = refs, {}

    def _from_references(self, named: set[str]) -> dict:
        named = sorted(named)   # a support names the first category that gives it: in
        scores: dict = {c: Scored(1.0, "references: named") for c in named}  # a fixed order
        tree, wholes = hierarchy(self.mode), parts(self.mode)
        for c in named:
            for r in tree.get(c, ()):
                scores.setdefault(r, Scored(1.0, f"references: {c} (hierarchy)"))
        for c in named:   # a building's windows, a laptop's screen
            for r in wholes.get(c, ()):
                scores.setdefault(r, Scored(1.0, f"references: {c} (part)"))
        for c in named:
            for r, cos in self.near.get(c, {}).items():
                if r not in scores:
                    scores[r] = Scored(1.0, f"references: {c} (similarity {cos:.2f})")
        return scores

    def __contains__(self, key) -> bool:   # (``get``: Mapping's, through __getitem__)
        return key in self._keys

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def names(self) -> set[str]:
        """The names the base evidence uses (its coverage line), and with references every
        COCO category (references can name any)."""
        refs = set(get_lexicon("corrected").categories) if self.refs else set()
        return refs | evidence_names(self.base)


def one_name_each(options: Mapping) -> None:
    """``references`` (a file or a set) and ``reference_col`` (a field) are each one name: a
    YAML list or mapping there is one line (it was a ``TypeError`` traceback), never read."""
    for key, what in (("references", "file or set"), ("reference_col", "field")):
        value = options.get(key)
        if value is not None and not isinstance(value, (str, Path)):
            raise InputError(f"filter option {key} is a {type(value).__name__} "
                             f"({str(value)[:60]}), not one name",
                             fix=f"give {key} one {what} name (in the YAML filter: section too)")


def has_references(options: Mapping) -> bool:
    """The options give reference texts (``references`` or ``reference_col``)."""
    return bool(options.get("references") or options.get("reference_col"))


def wants_wrapper(options: Mapping) -> bool:
    """The evidence is read through :class:`WithReferences`: references are given, or the
    visual vocabulary is read (COCO's 80 judged by the base evidence, other objects
    undecided, detector labels read as phrases)."""
    return has_references(options) or options.get("object_mode") == VISUAL_MODE


def with_references(base, kind: str, refs, options: Mapping) -> WithReferences:
    """``base`` (the kind's evidence, or None) and ``refs`` as one support mapping, as the
    options say: detector labels read as phrases in object mode visual, the similarity
    threshold 0.8 unless given. The one builder of the set run and the shard workers."""
    if kind == "detector" and options["object_mode"] == VISUAL_MODE:
        from capaudit.filters.phrase_detections import detections_as_categories

        base = detections_as_categories(base, VISUAL_MODE)
    thr = options.get("similarity")
    return WithReferences(base, judged_names(base), refs, options["object_mode"],
                          0.8 if thr is None else float(thr))


def setup_evidence(filt, context):
    """``(evidence, source)`` for a hallucination filter: its kind's evidence as before, and
    the references over it when ``references`` or ``reference_col`` is given."""
    o, kind = filt.options, filt.kind
    one_name_each(o)
    store = context.store if context else None
    base, source = None, None
    if kind != "references":
        base, source = resolve_evidence(kind, evidence_files(o).get(kind), store)
    elif not has_references(o):
        raise InputError("evidence 'references' needs reference texts",
                         fix="pass --references FILE|SET or --reference-col NAME")
    if not wants_wrapper(o):
        return base, source                      # COCO's modes: the evidence as it always was
    refs, where = {}, None
    if has_references(o):
        from capaudit.filters.reference_sources import load_references

        refs, where = load_references(o.get("references"), o.get("reference_col"), context)
    return with_references(base, kind, refs, o), ";".join(x for x in (source, where) if x)


def judged_names(base) -> set[str]:
    """The categories whose absence from an image's evidence counts against a mention:
    COCO's 80 (what the CHAIR ground truth, the instance categories and capaudit's own COCO
    detector name: absent means not there) and every label the evidence gives anywhere (an
    open-vocabulary detector's); every other object is undecided without references."""
    if base is None:
        return set()
    return evidence_names(base) | set(get_lexicon("corrected").categories)


def shard_references(opts: dict, kind: str) -> str | None:
    """``filter run --shards``: the references file as an absolute local path (each worker
    reads it), or None (``--reference-col`` is read by each shard task from its records);
    what shards cannot take yet is refused in one line."""
    one_name_each(opts)
    if kind == "references":
        raise InputError("filter run --shards takes reference texts beside another evidence",
                         fix="pass --references FILE or --reference-col NAME with "
                             "--chair-gt, --instances or --detections")
    ref = opts.get("references")
    if not ref:
        return None
    path = Path(str(ref))
    if not path.is_file():
        raise InputError("--shards reads references from a local caption file", path=path,
                         fix="export the stored set (sets export) and pass the file")
    return str(path.resolve())


def add_references(base, options: dict) -> WithReferences:
    """A shard worker's evidence as :func:`setup_evidence` makes it: the references file of
    its options (if any) over it, the objects it cannot judge undecided."""
    from capaudit.filters.reference_sources import references_from_file

    refs = references_from_file(Path(options["references"])) if options.get("references") \
        else {}
    return with_references(base, options["evidence"], refs, options)
