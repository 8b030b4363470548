"""Evidence for the hallucination filter: per image, a support score for each COCO category.

Three kinds (``EVIDENCE_KINDS``), read from a file or a stored annotation
source (``capaudit annotations add``):

* ``chair-gt``: the CHAIR ground truth, 1.0 for a listed object. It is the
  instance categories *plus* objects parsed from the image's human captions,
  so it is the evidence the CHAIR metric uses, and the most lenient: an object
  a human captioner named counts as present even without an instance box;
* ``instances``: COCO instance categories, 1.0 for a present category. Only
  annotated boxes count, so a caption naming an object the annotators left
  unboxed (a person in a photo on the wall, a tiny car) is unsupported: the
  strictest of the three on COCO. From a COCO instances JSON, a number stated
  for a category is also held to its instance count (:mod:`.instance_counts`);
* ``detector``: detector output, as ``capaudit detect --json`` writes it
  (``{"image_id", "detections": [{"category", "score", "box"}]}`` per line;
  ``label`` is accepted for ``category``, and flat ``{"image_id", "label",
  "score"}`` rows too); the support of a category is its highest score. The
  only kind that needs no human annotation, and the one to measure a filter
  that used ``chair-gt`` or ``instances`` independently.

:func:`resolve_evidence` also says where the evidence came from (``file:PATH``
or ``store:NAME``), which the filter logs with the evidence's coverage of the
set's images.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from capaudit.errors import InputError

__all__ = ["EVIDENCE_KINDS", "EVIDENCE_OPTIONS", "evidence_files", "given_kind", "load_evidence",
           "resolve_evidence", "load_detections", "SupportSets", "evidence_names"]

EVIDENCE_KINDS = ("chair-gt", "instances", "detector")
#: the filter option that names each kind's file or stored source
EVIDENCE_OPTIONS = {"chair-gt": "chair_gt", "instances": "instances", "detector": "detections"}
_LABEL_ALIASES = {"tvmonitor": "tv", "tv monitor": "tv", "motorbike": "motorcycle",
                  "aeroplane": "airplane", "sofa": "couch", "diningtable": "dining table",
                  "pottedplant": "potted plant", "hair dryer": "hair drier", "doughnut": "donut",
                  "cellphone": "cell phone", "laptop computer": "laptop"}


def _norm_label(label) -> str:
    lab = str(label).strip().lower().replace("_", " ")
    return _LABEL_ALIASES.get(lab, lab)


def load_detections(path: str | Path) -> dict[int, dict[str, float]]:
    """Detector output: per image, the highest score of each category."""
    from capaudit.io.annotation_files import _check_exists, _image_id, iter_jsonl

    path = Path(path)
    _check_exists(path)
    out: dict[int, dict[str, float]] = {}
    for row, rec in iter_jsonl(path):
        if "image_id" in rec and rec["image_id"] is None:
            continue  # `capaudit detect` output for an image without a COCO id
        iid = _image_id(rec, path, row)
        dets = rec.get("detections", rec.get("objects"))
        if dets is None:
            dets = [rec] if any(k in rec for k in ("label", "category", "class", "name")) else []
        best = out.setdefault(iid, {})
        for d in dets:
            if isinstance(d, str):
                label, score = d, 1.0
            else:
                label = d.get("label", d.get("category", d.get("class", d.get("name"))))
                score = d.get("score", d.get("confidence", 1.0))
            if label is None:
                raise InputError("a detection has no 'label'", path=path, row=row,
                                 fix='use {"image_id", "detections": [{"label", "score"}]}')
            try:
                score = float(score)
            except (TypeError, ValueError):
                raise InputError(f"detection score {score!r} is not a number", path=path,
                                 row=row) from None
            lab = _norm_label(label)
            if score > best.get(lab, -1.0):
                best[lab] = score
    return out


def _stored(store, kind: str, name: str):
    """A source stored with ``capaudit annotations add`` (None when there is none), read in
    its columnar form (:func:`capaudit.store.annotations.source_sets`)."""
    if store is None:
        return None
    table, col = {"chair-gt": ("chair_gt", "object"),
                  "instances": ("instance_categories", "category")}.get(kind, (None, None))
    if table is None:
        return None
    import duckdb

    from capaudit.store.annotations import source_sets

    try:
        sets = source_sets(store, table, col, name)
    except duckdb.CatalogException:  # table missing in an old store
        return None
    return None if sets is None else SupportSets(sets)


class SupportSets(Mapping):
    """``{image_id: {name: 1.0}}`` over a ``{image_id: names}`` mapping, made per lookup.

    Why not the dict itself: a pretraining corpus has an image per caption, and a dict of
    dicts holds ~400 bytes per image (1.2M images: ~0.5 GB); over the loaders' columnar sets
    (:class:`~capaudit.core.columnar.ColumnarSets`) the evidence costs ~30 bytes per image,
    and a lookup builds the one small dict the filter reads."""

    def __init__(self, sets, counts: dict | None = None):
        self.sets = sets
        self.counts = counts   # a COCO instances JSON's exact counts (:mod:`.instance_counts`)

    def __getitem__(self, key) -> dict[str, float]:
        support = dict.fromkeys(self.sets[key], 1.0)
        if self.counts is None:
            return support
        from capaudit.filters.instance_counts import Counted

        return Counted(support, self.counts.get(key) or {})

    def __contains__(self, key) -> bool:
        return key in self.sets

    def __iter__(self):
        return iter(self.sets)

    def __len__(self) -> int:
        return len(self.sets)

    def names(self) -> set[str]:
        """Every name the evidence uses (without building a dict per image)."""
        names = getattr(self.sets, "names", None)
        if names is not None:
            return set(names)
        return set().union(*self.sets.values())


def evidence_names(evidence) -> set[str]:
    """The category names an evidence mapping uses (columnar: its name table)."""
    if evidence is None:
        return set()
    if hasattr(evidence, "names"):
        return evidence.names()
    return set().union(*(d.keys() for d in evidence.values()))


def evidence_files(options: Mapping) -> dict[str, str | None]:
    """Each kind's file (or stored source) as a filter's ``options`` give it. An empty value
    counts as not given, as if the option were left out: ``--chair-gt ""`` (a script's unset
    variable) falls back to the stored source or gets the one-line refusal, instead of
    reading the working folder as the file."""
    return {kind: options.get(key) or None for kind, key in EVIDENCE_OPTIONS.items()}


def given_kind(options: Mapping) -> str | None:
    """``evidence`` when set, else the first kind whose file is given; None: neither."""
    return options.get("evidence") or next(
        (kind for kind, ref in evidence_files(options).items() if ref), None)


def load_evidence(kind: str, ref: str | Path | None, store=None) -> dict[int, dict[str, float]]:
    """Evidence of ``kind`` from a file path (or a stored annotation source name)."""
    return resolve_evidence(kind, ref, store)[0]


def resolve_evidence(kind: str, ref: str | Path | None, store=None
                     ) -> tuple[dict[int, dict[str, float]], str]:
    """``(evidence, where it came from)``: ``file:PATH`` or ``store:NAME``, for the log."""
    if kind not in EVIDENCE_KINDS:
        raise InputError(f"unknown evidence '{kind}'", fix=f"use one of {', '.join(EVIDENCE_KINDS)}")
    option = "--" + EVIDENCE_OPTIONS[kind].replace("_", "-")
    ref = ref or None   # "": not given (see evidence_files)
    if ref is None and store is not None and kind in ("chair-gt", "instances"):
        # like audit run: fall back to the most recent stored source of that kind
        from capaudit.io.annotation_store import _stored_source

        ref = _stored_source(store, kind, None)
    if ref is None:
        raise InputError(f"evidence '{kind}' needs a file", fix=f"pass {option} FILE, or "
                         f"store one with capaudit annotations add {kind} FILE")
    path = Path(ref)
    if not path.exists():
        stored = _stored(store, kind, str(ref))
        if stored is not None:
            return stored, f"store:{ref}"
        raise InputError("file not found", path=path,
                         fix=f"pass an existing file (or a stored annotation source) to {option}")
    if kind == "detector":
        return load_detections(path), f"file:{path}"
    from capaudit.io.annotation_columns import stream_name_sets
    from capaudit.io.annotation_files import load_chair_gt, load_instances

    # the plain JSONL shape read block by block (a corpus's evidence may name an image per
    # caption); any other file by its loader, which names a bad row
    sets = stream_name_sets(path, "objects" if kind == "chair-gt" else "categories") \
        if path.is_file() and path.suffix.lower() != ".json" else None
    counts = None   # a COCO instances JSON: each category's exact number, for stated counts
    if sets is None:
        sets, counts = (load_chair_gt(path), None) if kind == "chair-gt" else \
            load_instances(path, exact=True)
    return SupportSets(sets, counts), f"file:{path}"
