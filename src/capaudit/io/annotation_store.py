"""Annotations in the store: add them once, use them in every audit.

``capaudit annotations add KIND PATH`` loads a file with
:mod:`capaudit.io.annotation_files` and stores it under a name (default: the
kind). :func:`resolve_annotations` then builds the :class:`Annotations` an
audit needs: a file given on the command line wins, else the stored source
of that kind (the named one, or the most recent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa

from capaudit.core.arrays import from_numpy, strings
from capaudit.errors import InputError
from capaudit.io import annotation_files as ann
from capaudit.io.imageids import annotation_namespace
from capaudit.io.ingest import fingerprint
from capaudit.store import annotations as stored

KINDS = ("instances", "chair-gt", "demographics")


def add_annotations(store, kind: str, path: str | Path, name: str | None = None,
                    replace: bool = False, namespace: str | None = None) -> tuple[str, int]:
    """Load and store an annotation file; returns (source name, images).

    ``namespace``: the dataset its image ids belong to; by default what the file name says
    (``instances_val2014.json`` -> ``coco2014``), else unassigned (:mod:`capaudit.io.imageids`).
    """
    if kind not in KINDS:
        raise InputError(f"unknown annotation kind '{kind}'", fix=f"use one of {', '.join(KINDS)}")
    from capaudit.core.storage.paths import as_local

    # a URL: a private temporary copy of the same name, read like a local file; stored by
    # its URL
    with as_local(path) as (local, url):
        return _add_file(store, kind, local, name or kind, replace, namespace, url)


def _add_file(store, kind: str, path: Path, name: str, replace: bool, namespace: str | None,
              source: str | None) -> tuple[str, int]:
    if kind == "instances":
        cats, counts = ann.load_instances(path)
        n = len(cats)
        ids, values = _pairs(cats)
        if counts:  # COCO instances JSON: the number of instances of each category
            per = [(counts.get(i) or {}).get(v) for i, v in zip(ids.tolist(), values.to_pylist())]
        else:
            per = [None] * len(ids)
        arrow = pa.table({"source": pa.array([name] * len(ids), pa.string()),
                          "image_id": from_numpy(ids), "category": values,
                          "count": pa.array(per, pa.int32())})
    elif kind == "chair-gt":
        gt = ann.load_chair_gt(path)
        # images with an empty ground truth keep a row (object NULL): every
        # object mentioned for them is a hallucination, not an unknown image
        n = len(gt)
        ids, values = _pairs(gt)
        arrow = pa.table({"source": pa.array([name] * len(ids), pa.string()),
                          "image_id": from_numpy(ids), "object": values})
    else:
        gender, skin = ann.load_demographics(path)
        ids = sorted(set(gender) | set(skin))
        n = len(ids)
        arrow = pa.table({"source": [name] * len(ids), "image_id": ids,
                          "gender": [gender.get(i) for i in ids],
                          "skin_tone": [skin.get(i) for i in ids]})
    sha = fingerprint(path)
    existing = stored.source_record(store, name)
    given, namespace = namespace, namespace or annotation_namespace(path.name)
    if existing and not replace:
        if existing["sha256"] != sha or existing["kind"] != kind:
            raise InputError(f"annotations named '{name}' already exist with other content",
                             fix="pass --replace or --name")
        if given and existing["namespace"] != given:   # the same file, another --namespace
            raise InputError(f"annotations named '{name}' already exist from the same file "
                             f"with namespace {existing['namespace'] or 'none'}, not "
                             f"{namespace or 'none'}",
                             fix="pass --replace to store them again with --namespace "
                                 f"{namespace}" if namespace else "pass --replace")
        return name, n
    stored.put_source(store, name, kind, arrow, path=source or str(path.resolve()), sha256=sha,
                      n_images=n, namespace=namespace)
    return name, n


def _pairs(sets) -> tuple[np.ndarray, pa.Array]:
    """``(image ids, names)``: one row per (image, name) of a ``{image_id: names}`` mapping, and
    one with a null name for each image with none (recall skips those images, CHAIR needs
    them). A ColumnarSets (the columnar parse) goes from its arrays, without a Python object
    per row."""
    if not all(hasattr(sets, a) for a in ("ids", "offsets", "codes", "names")):
        rows = [(iid, v) for iid, names in sets.items() for v in (sorted(names) or [None])]
        return (np.array([r[0] for r in rows], np.int64),
                pa.array([r[1] for r in rows], pa.string()))
    lengths = np.diff(sets.offsets)
    empty = sets.ids[lengths == 0]
    codes = np.concatenate([sets.codes, np.zeros(len(empty), np.int64)]).astype(np.int32)
    valid = np.arange(len(codes)) < len(sets.codes)
    names = pa.DictionaryArray.from_arrays(from_numpy(codes, valid), strings(sets.names))
    return np.concatenate([np.repeat(sets.ids, lengths), empty]), names.cast(pa.string())


def annotation_provenance(store, sources: dict[str, str]) -> dict[str, dict]:
    """What provenance.json says of the annotations an output rests on: for a stored source
    its name, the path it was read from, its sha256, images and namespace; for a file given
    on the command line its path and sha256. (``store:chair-gt`` alone named nothing a
    reader could check.) Written through the provenance's redaction: a URL's credentials
    never reach the file."""
    out: dict[str, dict] = {}
    for kind, src in (sources or {}).items():
        if src.startswith("store:"):
            rec = stored.source_record(store, src[6:]) if store is not None else None
            out[kind] = {"stored_as": src[6:], **{k: v for k, v in (rec or {}).items()
                                                    if k != "kind"}}
        else:
            path = Path(src)
            out[kind] = {"path": src, "sha256": fingerprint(path) if path.exists() else None}
    return out


def _stored_source(store, kind: str, name: str | None, missing: str | None = None,
                   fix: str = "see capaudit annotations list") -> str | None:
    """The stored source ``name`` of ``kind`` (an error naming it when absent; ``missing``
    and ``fix`` replace its text), or without ``name`` the most recent one, or None."""
    if name:
        found = stored.find_source(store, kind, name)
        if not found:
            raise InputError(missing or f"no stored {kind} annotations named '{name}'", fix=fix)
        return found
    return stored.latest_source(store, kind)


def _load_sets(store, kind: str, path: Path) -> dict[int, frozenset[str]]:
    """A ``{image_id: names}`` file (instances JSONL, CHAIR ground truth), parsed once per
    content: later audits read the store's parse cache (:mod:`capaudit.store.annotations`)."""
    load = (lambda p: ann.load_instances(p)[0]) if kind == "instances" else ann.load_chair_gt
    if store is None or not path.is_file() or not stored.cache_usable(store):
        return load(path)
    sha = fingerprint(path)
    sets = stored.cached_sets(store, sha, kind)
    if sets is None:
        sets = load(path)
        if sets:
            stored.cache_sets(store, sha, kind, sets)
    return sets


def resolve_annotations(store=None, instances: str | Path | None = None,
                        chair_gt: str | Path | None = None,
                        demographics: str | Path | None = None,
                        kinds: Iterable[str] | None = None) -> ann.Annotations:
    """Files given win; otherwise the most recent stored source of each kind.

    ``kinds`` (``instances``, ``chair_gt``, ``demographics``; ``None``: all) are the kinds
    read: an audit of CHAIR alone reads no instances or labels (#24: they cost a warm
    40k-caption CHAIR audit ~0.04 s). A kind left out is empty and out of ``sources``; one
    given by name must still exist (a typo is said, not ignored)."""
    wanted = None if kinds is None else set(kinds)
    result = ann.Annotations()
    grouped = {"instances": ("instance_categories", "category", instances),
               "chair_gt": ("chair_gt", "object", chair_gt)}
    for attr, (table, col, given) in grouped.items():
        kind = attr.replace("_", "-")
        missing = f"no {kind} file or stored source named '{given}'"
        if wanted is not None and attr not in wanted:
            if given and store is not None and not Path(given).exists():
                _stored_source(store, kind, str(given), missing=missing)
            continue
        if given and attr == "instances" and Path(given).suffix.lower() == ".json":
            value, result.instance_counts = ann.load_instances(given)  # COCO JSON: with counts
            source = str(given)
        elif given and (store is None or Path(given).exists()):
            value, source = _load_sets(store, kind, Path(given)), str(given)
        elif store is not None and (src := _stored_source(
                store, kind, str(given) if given else None, missing=missing)):
            value = stored.source_sets(store, table, col, src) or {}
            source = f"store:{src}"
        else:
            continue
        setattr(result, attr, value)
        result.sources[attr] = source
    if wanted is not None and "demographics" not in wanted:
        if demographics and store is not None and not Path(demographics).exists():
            _demographics_source(store, demographics)
        return result
    gender, skin_tone, source = demographic_labels(store, demographics)
    if source is not None:
        result.gender, result.skin_tone = gender, skin_tone
        result.sources["demographics"] = source
    return result


def demographic_labels(store=None, ref: str | Path | None = None
                       ) -> tuple[dict[int, str], dict[int, str], str | None]:
    """``(gender, skin_tone, source)`` image labels, looked up the way every command does.

    ``ref`` is a file (JSONL/CSV), else the name of a stored demographics
    source; without ``ref``, the most recent stored source. Nothing found
    without ``ref`` gives empty labels and source ``None``; a ``ref`` that is
    neither a file nor a stored source is an input error naming both.
    """
    if ref is not None and (Path(ref).exists() or store is None):
        gender, skin = ann.load_demographics(ref)  # a missing file: one clear line
        return gender, skin, str(ref)
    if store is None:
        return {}, {}, None
    src = _demographics_source(store, ref)
    if src is None:
        return {}, {}, None
    rows = stored.demographic_rows(store, src)
    return ({r[0]: r[1] for r in rows if r[1]}, {r[0]: r[2] for r in rows if r[2]},
            f"store:{src}")


def _demographics_source(store, ref: str | Path | None) -> str | None:
    """The stored demographics source ``ref`` names (the most recent without ``ref``); a name
    that is neither a file nor a stored source is an input error naming both."""
    return _stored_source(store, "demographics", None if ref is None else str(ref),
                          missing=f"'{ref}' is neither a demographics file nor a stored source",
                          fix="pass an existing JSONL/CSV, or see capaudit annotations list")


def source_sha256(store, source: str | None) -> str | None:
    """The identity of an annotation source as a filter or an audit names it (``file:PATH``,
    a path, or ``store:NAME``): the sha256 of the file, or the one ``annotations add``
    recorded for the stored source; None when it cannot be known (an evidence map given in
    Python, a file since removed). Why: "was this set scored with the evidence it was
    filtered with?" is a question about content, not about names or paths."""
    if not source or source == "given":
        return None
    if source.startswith("store:"):
        entry = stored.source_entry(store, source[len("store:"):]) if store is not None else None
        return entry[1] if entry else None
    path = Path(source.removeprefix("file:"))
    return fingerprint(path) if path.is_file() else None
