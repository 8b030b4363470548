"""What a shard of ``audit run --shards`` keeps beside its metric state.

Why: the single-process audit also stores one row per caption in DuckDB
(``caption_details``) and checks, before any number, that the annotations
cover the set's images (:mod:`capaudit.audit.coverage`). A sharded audit does
both per shard and merges:

- :class:`DetailsFile`: each chunk's per-caption details table
  (:func:`capaudit.audit.engine.build_details`) is appended to
  ``<shard>.details.parquet.tmp-PID``, renamed to ``<shard>.details.parquet``
  when the shard is whole, before its marker (so a killed shard leaves no
  details that a rerun could take for complete). The driver copies every
  shard's file into ``caption_details`` with the run (:func:`attach_details`),
  ``caption_index`` renumbered 0..N-1 in shard order: the rows of the
  single-file audit of the concatenated shards.
- :class:`NamespaceGuard`: the row namespace evidence of each image key
  (``COCO_val2014_...`` -> ``coco2014``, a ``flickr30k/`` folder, ...); an id
  whose evidence contradicts the annotations' namespace is hidden (the caption
  becomes its own unit), as :func:`capaudit.audit.coverage.kept_ids` hides it.
- :func:`shard_coverage` / :func:`merged_coverage`: per shard, its images and
  how many each needed annotation kind covers; summed by the driver into one
  :class:`~capaudit.audit.coverage.Coverage`, held to the same rule
  (:func:`capaudit.audit.coverage.check`). An image whose captions lie in two
  shards counts once per shard (img2dataset shards partition the images).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from capaudit.audit import coverage
from capaudit.io.imageids import compatible, infer_namespace, set_namespace

__all__ = ["DETAILS_SUFFIX", "DetailsFile", "NamespaceGuard", "shard_coverage",
           "merged_coverage", "attach_details", "annotation_namespaces"]

DETAILS_SUFFIX = ".details.parquet"


def details_path(work: Path, shard: str) -> Path:
    return Path(work) / (Path(shard).stem + DETAILS_SUFFIX)


class DetailsFile:
    """A details sink writing one shard's tables to a temporary parquet file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.tmp = self.path.with_name(f"{self.path.name}.tmp-{os.getpid()}")
        self.writer, self.rows = None, 0

    def __call__(self, table) -> None:
        import pyarrow.parquet as pq

        if self.writer is None:
            self.writer = pq.ParquetWriter(self.tmp, table.schema)
        self.writer.write_table(table.cast(self.writer.schema))
        self.rows += table.num_rows

    def commit(self) -> dict:
        """Close and rename; ``{"rows", "bytes"}`` for the shard's marker."""
        if self.writer is None:  # an empty shard: no file, no rows
            return {"rows": 0, "bytes": 0}
        self.writer.close()
        os.replace(self.tmp, self.path)
        return {"rows": self.rows, "bytes": self.path.stat().st_size}

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.tmp.unlink(missing_ok=True)


def details_ok(work: Path, shard: str, recorded: dict | None) -> bool:
    """The shard's details file is there and the size its marker recorded."""
    if not recorded:
        return False
    path = details_path(work, shard)
    if recorded.get("rows") == 0:
        return True
    return path.exists() and path.stat().st_size == recorded.get("bytes")


def annotation_namespaces(store, annotations, metrics) -> dict[str, str | None]:
    """``{kind: namespace}`` of each annotation kind the metrics need and that is loaded."""
    out = {}
    for kind in coverage.needed_kinds(metrics):
        if coverage.kind_ids(annotations, kind) is not None:
            out[kind] = coverage.source_namespace(store, annotations.sources.get(kind))
    return out


class NamespaceGuard:
    """``guard(raw key, parsed id)`` -> the id, or ``None`` when its row's namespace evidence
    contradicts one of the annotations' namespaces; records the namespaces seen."""

    def __init__(self, ann_namespaces: dict[str, str | None]):
        self.known = sorted({ns for ns in ann_namespaces.values() if ns})
        self.seen: set[str | None] = set()
        self.hidden = 0

    def __call__(self, raw, iid: int | None) -> int | None:
        if iid is None:
            return None
        ns = infer_namespace(raw) if isinstance(raw, str) and not raw.isdigit() else None
        self.seen.add(ns)
        if ns is not None and not all(compatible(ns, a) for a in self.known):
            self.hidden += 1
            return None
        return iid


def shard_coverage(unit_keys: np.ndarray | None, annotations, ann_namespaces: dict,
                   guard: NamespaceGuard) -> dict:
    """A shard's images (units: image ids and captions without one) and, per needed
    annotation kind, how many of its image ids that kind annotates."""
    keys = np.zeros(0, np.int64) if unit_keys is None else np.asarray(unit_keys, np.int64)
    ids = keys[keys >= 0]
    covered = {}
    for kind in ann_namespaces:
        have = np.fromiter(coverage.kind_ids(annotations, kind), np.int64)
        covered[kind] = int(np.isin(ids, have).sum())
    return {"n_images": int(len(keys)), "n_with_ids": int(len(ids)), "covered": covered,
            "namespaces": sorted(guard.seen, key=str), "hidden_ids": guard.hidden,
            "id_min": int(ids.min()) if len(ids) else None,
            "id_max": int(ids.max()) if len(ids) else None}


def merged_coverage(target: str, parts: list[dict], ann_namespaces: dict) -> coverage.Coverage:
    """The shards' coverage counts added into one :class:`~capaudit.audit.coverage.Coverage`."""
    seen = {ns for p in parts for ns in p["namespaces"]}
    cov = coverage.Coverage(target, sum(p["n_images"] for p in parts), set_namespace(seen),
                            n_with_ids=sum(p["n_with_ids"] for p in parts))
    for kind, ns in ann_namespaces.items():
        cov.namespaces[kind] = ns
        cov.covered[kind] = sum(p["covered"].get(kind, 0) for p in parts)
    return cov


def attach_details(store, run_id: int, set_name: str, files: list[tuple[Path, int, int]]) -> int:
    """Copy ``(parquet file, shard caption offset, first caption index)`` files into
    ``caption_details`` for ``run_id`` (the caller holds the transaction); returns rows."""
    import duckdb
    import pyarrow as pa

    from capaudit.errors import InputError
    from capaudit.store.details import write_details_file

    rows = 0
    for path, offset, first in files:
        try:
            rows += write_details_file(store, run_id, set_name, path, first - offset)
        except (duckdb.Error, pa.ArrowException, OSError) as exc:  # rolled back: nothing stored
            raise InputError(f"cannot read the shard's caption details "
                             f"({' '.join(str(exc).split())[:160]})", path=path,
                             fix="rerun: a shard whose details file is missing or cut is "
                                 "redone") from None
    return rows
