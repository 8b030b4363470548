"""What a shard of ``audit run --shards`` keeps beside its metric state.

Why: the single-process audit also stores one row per caption in DuckDB
(``caption_details``) and checks, before any number, that the annotations
cover the set's images (:mod:`capaudit.audit.annotation_coverage`). A sharded audit does
both per shard and merges:

- :class:`DetailsFile`: each chunk's per-caption details table
  (:func:`capaudit.audit.engine.build_details`) is appended to
  a fresh ``.<shard>.details.parquet.tmp-PID-RANDOM``, renamed to ``<shard>.details.parquet``
  when the shard is whole, before its marker (so a killed shard leaves no
  details that a rerun could take for complete). The driver copies every
  shard's file into ``caption_details`` with the run (:func:`attach_details`),
  ``caption_index`` renumbered 0..N-1 in shard order: the rows of the
  single-file audit of the concatenated shards.
- :class:`JoinGuard`: the single-file join rule, row by row: an id whose row's
  namespace evidence (``COCO_val2014_...`` -> ``coco2014``, a ``flickr30k/``
  folder, ...) contradicts the annotations', or that no needed annotation kind
  has, is hidden (the caption becomes its own unit), as
  :func:`capaudit.audit.annotation_coverage.kept_ids` hides it (when every id is annotated
  nothing is hidden, as there).
- :func:`shard_coverage` / :func:`merged_coverage`: per shard, its images and
  how many each needed annotation kind covers; summed by the driver into one
  :class:`~capaudit.audit.annotation_coverage.Coverage`, held to the same rule
  (:func:`capaudit.audit.annotation_coverage.check`). An image whose captions lie in two
  shards counts once per shard (img2dataset shards partition the images).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from capaudit.audit import annotation_coverage as coverage
from capaudit.core.storage.urls import join, local_path, name_of, shown_url
from capaudit.io.imageids import compatible, infer_namespace, keyed_unit, set_namespace

__all__ = ["DETAILS_SUFFIX", "DetailsFile", "JoinGuard", "annotation_namespaces",
           "attach_details", "merged_coverage", "shard_coverage"]

DETAILS_SUFFIX = ".details.parquet"


def details_name(shard: str) -> str:
    return Path(name_of(shard)).stem + DETAILS_SUFFIX


def details_path(work, shard: str):
    """Where ``shard``'s details live in the work folder ``work`` (a URL when remote)."""
    local = local_path(work)
    return local / details_name(shard) if local is not None else join(str(work),
                                                                       details_name(shard))


class DetailsFile:
    """A details sink writing one shard's tables to a parquet file of the work folder that
    appears only when :meth:`commit` is called (a temporary file renamed, or an upload
    completed: :meth:`capaudit.core.storage.folder.Folder.open_write`)."""

    def __init__(self, folder, shard: str):
        self.folder, self.name = folder, details_name(shard)
        self._out = None
        self.writer, self.rows = None, 0

    def __call__(self, table) -> None:
        import pyarrow.parquet as pq

        if self.writer is None:   # our own file (never a planted link) or an upload
            self._out = self.folder.open_write(self.name)
            self._fh = self._out.__enter__()
            self.writer = pq.ParquetWriter(self._fh, table.schema)
        self.writer.write_table(table.cast(self.writer.schema))
        self.rows += table.num_rows

    def commit(self) -> dict:
        """Close and publish; ``{"rows", "bytes"}`` for the shard's marker."""
        if self.writer is None:  # an empty shard: no file, no rows
            return {"rows": 0, "bytes": 0}
        self.writer.close()
        size = self._fh.tell()
        self._out.__exit__(None, None, None)
        self._out = None
        return {"rows": self.rows, "bytes": size}

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self._out is not None:   # the temporary file removed, the upload discarded
            with contextlib.suppress(_Aborted):
                self._out.__exit__(_Aborted, _Aborted(), None)
            self._out = None


class _Aborted(Exception):
    """Thrown into an unfinished details file to discard it."""


def details_ok(folder, shard: str, recorded: dict | None) -> bool:
    """The shard's details file is there and the size its marker recorded."""
    if not recorded:
        return False
    if recorded.get("rows") == 0:
        return True
    return folder.size(details_name(shard)) == recorded.get("bytes")


def annotation_namespaces(store, annotations, metrics) -> dict[str, str | None]:
    """``{kind: namespace}`` of each annotation kind the metrics need and that is loaded."""
    out = {}
    for kind in coverage.needed_kinds(metrics):
        if coverage.kind_ids(annotations, kind) is not None:
            out[kind] = coverage.source_namespace(store, annotations.sources.get(kind))
    return out


class JoinGuard:
    """``guard(raw key, parsed id, captions)`` -> the id, or a unit that joins nothing
    (:func:`~capaudit.io.imageids.keyed_unit`) where the single-file audit would not join it (:func:`capaudit.audit.annotation_coverage.kept_ids`): its row's namespace
    evidence contradicts an annotation's, or no needed annotation kind has the id. (An id
    hidden from one row only: the single-file check also hides it from rows of a compatible
    namespace.) Counts, before hiding, what :func:`shard_coverage` reports."""

    def __init__(self, annotations, ann_namespaces: dict[str, str | None]):
        self.known = sorted({ns for ns in ann_namespaces.values() if ns})
        self.kinds = {k: (coverage.kind_ids(annotations, k), ns)
                      for k, ns in ann_namespaces.items()}
        self.keep = set().union(*(ids for ids, _ in self.kinds.values())) if self.kinds \
            else None
        self.pairs: set[tuple[int, str | None]] = set()   # distinct (id, row namespace)
        self.no_id = 0                                     # captions without an image id
        self.hidden = 0                                    # captions whose id was hidden

    def __call__(self, raw, iid: int | None, n: int = 1) -> int | None:
        if iid is None:
            self.no_id += n
            return None
        ns = infer_namespace(raw) if isinstance(raw, str) and not raw.isdigit() else None
        self.pairs.add((iid, ns))
        if (ns is not None and not all(compatible(ns, a) for a in self.known)
                or self.keep is not None and iid not in self.keep):
            self.hidden += n   # still one image, under a unit that joins nothing (as the
            return keyed_unit(f"#{iid}")   # single-file guard: annotation_coverage)
        return iid


def shard_coverage(guard: JoinGuard, unit_keys: np.ndarray | None) -> dict:
    """A shard's images (image ids, plus each caption without one) and, per needed annotation
    kind, how many of its ids that kind annotates from rows of a compatible namespace; the
    range of the ids its state holds (:func:`capaudit.audit.shards.sums.sums_plan`)."""
    ids = {iid for iid, _ in guard.pairs}
    covered = {k: len({iid for iid, ns in guard.pairs if iid in have and compatible(ns, kns)})
               for k, (have, kns) in guard.kinds.items()}
    keys = np.zeros(0, np.int64) if unit_keys is None else np.asarray(unit_keys, np.int64)
    kept = keys[keys >= 0]
    return {"n_images": len(ids) + guard.no_id, "n_with_ids": len(ids), "covered": covered,
            "namespaces": sorted({ns for _, ns in guard.pairs}, key=str),
            "hidden_captions": guard.hidden,
            "units": len(keys), "unit_images": len(kept),
            "id_min": int(kept.min()) if len(kept) else None,
            "id_max": int(kept.max()) if len(kept) else None}


def merged_coverage(target: str, parts: list[dict], ann_namespaces: dict) -> coverage.Coverage:
    """The shards' coverage counts added into one :class:`~capaudit.audit.annotation_coverage.Coverage`."""
    seen = {ns for p in parts for ns in p["namespaces"]}
    cov = coverage.Coverage(target, sum(p["n_images"] for p in parts), set_namespace(seen),
                            n_with_ids=sum(p["n_with_ids"] for p in parts))
    for kind, ns in ann_namespaces.items():
        cov.namespaces[kind] = ns
        cov.covered[kind] = sum(p["covered"].get(kind, 0) for p in parts)
    return cov


def attach_details(store, run_id: int, set_name: str, files: list[tuple], *,
                   storage_options: dict | None = None) -> int:
    """Copy ``(parquet file, shard caption offset, first caption index)`` files (local paths
    or URLs: a remote one is streamed to a temporary copy first) into ``caption_details``
    for ``run_id`` (the caller holds the transaction); returns rows."""
    import duckdb
    import pyarrow as pa

    from capaudit.core.storage.local_copy import local_copy
    from capaudit.errors import InputError
    from capaudit.store.details import write_details_file

    rows = 0
    for path, offset, first in files:
        try:
            with local_copy(path, storage_options) as local:
                rows += write_details_file(store, run_id, set_name, local, first - offset)
        except (duckdb.Error, pa.ArrowException, OSError) as exc:  # rolled back: nothing stored
            raise InputError(f"cannot read the shard's caption details "
                             f"({' '.join(str(exc).split())[:160]})", path=shown_url(path),
                             fix="rerun: a shard whose details file is missing or cut is "
                                 "redone") from None
    return rows
