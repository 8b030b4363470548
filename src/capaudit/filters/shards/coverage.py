"""The coverage guard of a sharded filter run: counted shard by shard, summed, held to the
single-set rule before any cleaned shard is written.

Why a first pass of its own: the sharded audit holds its coverage before its merge, when
nothing has been stored; a filter writes its outputs shard by shard, so the only point that
comes before every output is before the filter pass. This pass reads each shard once (the
same reader, no sentence analysis, no output) for its images and how many of them the
evidence covers, and hashes it on the way: its marker, keyed by the evidence and the reading
options and by the input's sha256, lets a resumed run skip it and lets the filter pass reuse
the hash while the file's stat is unchanged. Its cost is one read of each shard: a fraction
of the filter's (no parsing of sentences), and a guard that refuses a corpus the evidence
does not cover saves the whole filter pass.

Counts as the sharded audit's (:func:`capaudit.audit.shards.outputs.shard_coverage`): a
shard's images are its distinct image ids plus its captions without one; an image whose
captions lie in two shards counts once per shard (shards partition the images).
"""

from __future__ import annotations

import time
from functools import lru_cache

from capaudit.errors import InputError
from capaudit.core.storage import paths
from capaudit.core.storage.urls import shown_url
from capaudit.io import shard_files as files

__all__ = ["coverage_shard", "counted_shard", "read_shard", "check_coverage", "LABEL",
           "reference_ids"]

LABEL = {"chair-gt": "chair_gt", "instances": "instances", "detector": "detector"}


def read_shard(task: dict, visit) -> str | None:
    """Read the shard once, ``visit`` called on each batch of records; its sha256 as read
    (None for a parquet file, read by seeking). The same reader as the filter pass, no
    output."""
    from capaudit.io.rewrite import ChangeLog, open_rewriter
    from capaudit.io.rewrite.formats import buffered

    columnar = task["fmt"] == "parquet-shard"
    with files.open_input(task["path"]) as raw:
        src = raw if columnar else files.HashingReader(raw)
        reader = open_rewriter(task["fmt"], task["reader"], src if columnar else buffered(src),
                               None, shown_url(task["path"]), ChangeLog(None))
        for records in reader.batches():
            visit(records)
        return None if columnar else src.finish()


def _count(task: dict) -> tuple[dict, str | None]:
    """Read the shard once: its images, those the evidence covers, its sha256."""
    from capaudit.filters.reference_sources import caption_fields, refuse_self_reference
    from capaudit.filters.shards.record_references import record_value
    from capaudit.filters.shards.task import worker_evidence
    from capaudit.filters.stream import DistinctIds
    from capaudit.io.imageids import compatible, infer_namespace

    evidence = worker_evidence(task["evidence"])
    ann_ns = task["evidence"].get("namespace")
    ids, covered, namespaces, n = DistinctIds(), DistinctIds(), set(), {"no_id": 0, "hidden": 0}
    col = task["options"].get("reference_col")
    names = caption_fields(task["reader"].get("caption_col")) if col else ()
    refs, joined = reference_ids(task["options"].get("references"),
                                  task["evidence"].get("references_sha256")), DistinctIds()

    def visit(records) -> None:
        for rec in records:
            if col in names:   # a caption field: checked before any shard is written
                refuse_self_reference(col, names, lambda c: record_value(rec, c) is not None,
                                      shown_url(task["path"]))
            for p in rec.places:
                if p.image_id is None:
                    n["no_id"] += 1
                    continue
                ns = None if p.image_key is None or p.image_key.isdigit() \
                    else infer_namespace(p.image_key)
                namespaces.add(ns)
                ids.add(p.image_id)
                if p.image_id in refs:
                    joined.add(p.image_id)
                if not compatible(ns, ann_ns):   # task.foreign_namespace, ns read once
                    n["hidden"] += 1
                elif p.image_id in evidence:
                    covered.add(p.image_id)

    sha = read_shard(task, visit)
    n_ids = len(ids)
    return {"n_images": n_ids + n["no_id"], "n_with_ids": n_ids,
            "covered": {LABEL[task["evidence"]["kind"]]: len(covered)},
            "namespaces": sorted(namespaces, key=str), "hidden_captions": n["hidden"],
            "references_joined": len(joined)}, sha


@lru_cache(maxsize=1)
def reference_ids(path: str | None, sha256: str | None) -> frozenset:
    """The image ids of the ``--references`` file (none without one), read once a process
    per content (``sha256``): the driver holds the shards to naming at least one of them."""
    if not path:
        return frozenset()
    from pathlib import Path

    from capaudit.filters.reference_sources import references_from_file

    return frozenset(references_from_file(Path(path)))


def coverage_shard(task: dict) -> dict:
    """One shard's coverage counts (or its marker's); ``status`` failed with the one-line
    error for a shard that cannot be read."""
    return counted_shard(task, _count, "coverage")


def counted_shard(task: dict, count, field: str) -> dict:
    """A first pass's task: ``count(task) -> (counts, sha256 as read)`` on one shard, kept
    under ``field`` in its marker (keyed by ``ids_hash`` and the input: a resumed run reads
    the counts back, and the filter pass reuses the input's hash)."""
    from capaudit.io.markers import matches

    t0 = time.perf_counter()
    path = task["path"]
    marker = files.read_marker(task["ids_work"], task["rel"])
    try:
        fp = files.fingerprint(path, (marker or {}).get("input"), task.get("identity") or None) \
            if marker else None
        if matches(marker, task["ids_hash"], fp) and field in marker:
            return {**marker[field], "shard": task["rel"], "index": task["index"],
                    "status": "resumed"}
        before = paths.stat_of(path)
        counts, sha = count(task)
        if paths.stat_of(path) != before:
            raise InputError("the shard changed while it was read", path=shown_url(path),
                             fix="rerun once the shard is no longer being written")
        fp = before if paths.store_identifies(path) else \
            {**before, "sha256": sha or files.fingerprint(path)["sha256"]}
        files.write_marker(task["ids_work"], task["rel"], task["ids_hash"],
                           {"input": fp, field: counts})
    except (InputError, OSError) as exc:
        from capaudit.filters.shards.task import failure

        return failure(task, exc)
    return {**counts, "shard": task["rel"], "index": task["index"], "status": "done",
            "seconds": round(time.perf_counter() - t0, 3)}


def check_coverage(name: str, parts: list[dict], kind: str, ann_ns: str | None,
                   min_coverage: float, allow_partial: bool):
    """The shards' counts summed into one coverage, held to the filter's rule on a stored
    set (:func:`capaudit.audit.annotation_coverage.guard_evidence`): under ``min_coverage``
    of the images, or none at all, the run stops with the audit's one line unless
    ``allow_partial`` (:func:`capaudit.audit.coverage_refusal.hold`). Returns the coverage."""
    from capaudit.audit.coverage_refusal import hold
    from capaudit.audit.shards.outputs import merged_coverage

    label = LABEL[kind]
    cov = merged_coverage(name, parts, {label: ann_ns})
    hold(cov, label, min_coverage, allow_partial)
    return cov
