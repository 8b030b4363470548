"""One shard of ``filter run --shards``: read, filter, write back, log, mark done.

A task is a plain dict of strings and numbers (what a Ray task can carry: no open file, no
store, no filesystem object), built by :mod:`.plan`. The worker builds what the task needs
once per process (:func:`worker_filter`: the evidence read once from its columnar file,
cached by its sha256, and the filter set up on it) and returns its summary (counts, reasons,
coverage, the output's size and sha256, its log's name) as the task's result: the driver
reads nothing a task wrote but the outputs under DST.

Per shard: the source is read as a stream of records in bounded batches by its format's
writer (:mod:`capaudit.io.rewrite`), each batch's captions filtered (:mod:`capaudit.filters.
stream`), the batch written back with its changes to the output's temporary name and its
log rows to the log's; both renamed into place when the shard is whole, and only then the
completion marker is written, keyed by the configuration and the input's sha256 (hashed as
it is read: what was filtered is what the marker names). A rerun skips a shard whose marker
matches and whose output and log are there at the recorded sizes; a changed shard is redone.
"""

from __future__ import annotations

import time

from capaudit.errors import InputError
from capaudit.core.storage import paths
from capaudit.core.storage.urls import shown_url
from capaudit.io import shard_files as files

__all__ = ["filter_shard", "worker_filter", "shard_docs", "foreign_namespace", "failure"]

_WORKER: dict = {}          # this process's evidence and filters, by content / configuration


def worker_evidence(ev: dict):
    """The evidence of ``ev`` (``{"path", "sha256"}``: its columnar file), read once per
    process."""
    key = ("evidence", ev["sha256"])
    if key not in _WORKER:
        from capaudit.filters.shards.evidence_file import read_evidence

        _WORKER[key] = read_evidence(ev["path"], ev["sha256"])
    return _WORKER[key]


def worker_filter(task: dict):
    """The task's filter, built once per process and configuration by its step
    (:mod:`capaudit.filters.shards.steps`)."""
    key = ("filter", task["cfg_hash"])
    if key not in _WORKER:
        from capaudit.filters.shards.steps import shard_step

        _WORKER[key] = shard_step(task["filter"]).build(task)
    return _WORKER[key]


def foreign_namespace(key: str | None, ann_ns: str | None) -> bool:
    """A row whose key names a dataset other than the evidence's: its id never joins."""
    if ann_ns is None or key is None or key.isdigit():   # most rows: no import, no pattern
        return False
    from capaudit.io.imageids import compatible, infer_namespace

    ns = infer_namespace(key)
    return ns is not None and not compatible(ns, ann_ns)


def shard_docs(records, row0: int, ann_ns: str | None):
    """The captions of a batch of records as the filter's documents (in record order), and
    each document's place ``(record, turn)``."""
    from capaudit.filters.base import CaptionDoc

    docs, places = [], []
    for rec in records:
        for p in rec.places:
            iid = None if foreign_namespace(p.image_key, ann_ns) else p.image_id
            docs.append(CaptionDoc(row0 + len(docs), iid, p.text, p.image_key,
                                   {"src": rec.index, "turn": p.turn}))
            places.append((rec.index, p.turn))
    return docs, places


def failure(task: dict, exc: Exception) -> dict:
    """A failed shard's summary: its one-line error and the fix apart (the driver adds
    ``--skip-bad-shards`` to it)."""
    text, fix = shown_url(" ".join(str(exc).split())), getattr(exc, "fix", None)
    if fix:
        text = text.removesuffix(f" (fix: {' '.join(fix.split())})")
    return {"shard": task["rel"], "index": task["index"], "status": "failed", "error": text,
            "fix": fix}


def _done(task: dict, fp: dict, marker: dict | None) -> bool:
    from capaudit.io.markers import same_input

    if not marker or marker.get("config_hash") != task["cfg_hash"]:
        return False
    if not same_input(marker.get("input"), fp):
        return False
    summary = marker.get("summary") or {}
    return paths.file_size(task["out_path"]) == summary.get("output", {}).get("bytes") and \
        paths.file_size(task["log_path"]) == summary.get("log", {}).get("bytes")


def filter_shard(task: dict) -> dict:
    """Filter one shard (or find it done); its summary, never an exception for bad input:
    ``{"shard", "status": done|resumed|failed, ...}``."""
    t0 = time.perf_counter()
    marker = files.read_marker(task["work"], task["rel"])
    previous = (marker or {}).get("input") or (files.read_marker(task["ids_work"], task["rel"])
                                               or {}).get("input")
    try:
        fp = files.fingerprint(task["path"], previous, task.get("identity") or None)
        if _done(task, fp, marker):
            return {**marker["summary"], "status": "resumed", "seconds": 0.0}
        summary = _filter(task, fp)
        summary.update(shard=task["rel"], index=task["index"])
        files.write_marker(task["work"], task["rel"], task["cfg_hash"],
                           {"input": fp, "summary": summary})
    except (InputError, OSError) as exc:
        return failure(task, exc)
    return {**summary, "status": "done", "seconds": round(time.perf_counter() - t0, 3)}


def _filter(task: dict, fp: dict) -> dict:
    """The shard filtered into its output and log (temporary names, renamed when whole)."""
    from capaudit.filters.base import FilterSummary
    from capaudit.filters.shards.steps import shard_step
    from capaudit.io.rewrite import ChangeLog, open_rewriter
    from capaudit.io.rewrite.formats import buffered

    filt = worker_filter(task)
    shard_step(task["filter"]).begin(filt)       # the shard's own counts
    _freeze_once()
    # claimed before anything is written: a killed run's output is known as ours on resume
    files.write_json(task["claim"], {"out": task["out_path"], "log": task["log_path"]})
    summary, changelog = FilterSummary(filt.name), ChangeLog(None)
    columnar = task["fmt"] == "parquet-shard"
    with paths.atomic_output(task["log_path"]) as log_raw, \
            paths.atomic_output(task["out_path"]) as out_raw, \
            files.open_input(task["path"]) as raw:
        log_fh, out = files.HashingWriter(log_raw), files.HashingWriter(out_raw)
        src = raw if columnar else files.HashingReader(raw)
        log, writer = ShardLog(log_fh), None
        try:
            writer = open_rewriter(task["fmt"], task["reader"],
                                   src if columnar else buffered(src), out,
                                   shown_url(task["path"]),
                                   changelog)
            _stream(task, filt, writer, log, summary)
            writer.finish()
        except BaseException:
            if writer is not None:   # the temporary files go; their writers end first
                writer.abort()
            log.close()
            raise
        log.close()
        _check_unchanged(task, fp, src, columnar)
    counts = changelog.counts
    return {**summary.as_dict(), "records": {k: counts[k] for k in
                                             ("records_in", "records_out", "records_dropped")},
            "output": {"name": task["rel"], "bytes": out.size, "sha256": out.sha.hexdigest()},
            "log": {"name": task["log_rel"], "bytes": log_fh.size,
                    "sha256": log_fh.sha.hexdigest()}}


def _freeze_once() -> None:
    """Once per process of capaudit's own (the command line and its workers, as
    :func:`capaudit.core.lean_import.enabled` tells; not a library caller's), the filter, its
    evidence and models set up: what exists now lives until the process ends, so the cyclic
    collector stops walking it (its collections walked the parser's objects again and again:
    GC 0.24 -> 0.14 CPU-s of a 10,980-caption run). Reference counting frees as before;
    only cycles already unreachable now are never collected, once."""
    from capaudit.core.lean_import import enabled

    if "frozen" not in _WORKER and enabled():
        import gc

        gc.freeze()
        _WORKER["frozen"] = True


class ShardLog:
    """A shard's log file: row groups of ~64k sentences, statistics on the short columns.

    Why: a row group per batch gave a million-caption shard a thousand row groups, and each
    kept min/max statistics of every column, the sentences' text too: the writer's footer
    grew with the shard. The short columns' statistics are the ones a query filters on."""

    ROWS = 1 << 16
    STATS = ["filter", "row_idx", "new_row_idx", "image_id", "sentence_idx", "action",
             "shard", "record", "turn"]

    def __init__(self, fh):
        import pyarrow.parquet as pq

        from capaudit.filters.stream import SHARD_LOG_SCHEMA

        self.writer = pq.ParquetWriter(fh, SHARD_LOG_SCHEMA, compression="zstd",
                                       write_statistics=self.STATS)
        self.parts: list = []
        self.rows = 0

    def write_table(self, table) -> None:
        self.parts.append(table)
        self.rows += table.num_rows
        if self.rows >= self.ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.parts:
            self.writer.write_table(pa.concat_tables(self.parts))
        self.parts, self.rows = [], 0

    def close(self) -> None:
        self._flush()
        self.writer.close()


def _stream(task: dict, filt, writer, log, summary) -> None:
    """Every batch of records: filtered, written back with its changes, logged."""
    from capaudit.filters.stream import filter_batches, finish

    row0 = new_row = 0
    ann_ns = task["evidence"].get("namespace")
    col = task["options"].get("reference_col")
    if col:   # each record's own references, batch by batch
        from capaudit.filters.shards.record_references import ReferenceColumn

        col = ReferenceColumn(filt.evidence, col)
    for records in writer.batches():
        if col:
            col.batch(records)
        docs, places = shard_docs(records, row0, ann_ns)
        row0 += len(docs)
        changes, cols = {}, {"shard": [], "record": [], "turn": []}
        for fb in filter_batches(filt, docs, summary, batch=len(docs) + 1,
                                 first_new_row=new_row, last=False):
            for res, place in zip(fb.results, places):
                text = res.text() if res.kept else None
                if text != res.doc.caption:
                    changes[place] = text
                n = len(res.decisions)
                cols["shard"] += [task["rel"]] * n
                cols["record"] += [place[0]] * n
                cols["turn"] += [place[1]] * n
            new_row += sum(r is not None for r in fb.new_rows)
            log.write_table(fb.log.table(None, None, cols))
        writer.write(records, changes)
    if col:
        col.check(shown_url(task["path"]))
    finish(filt, summary)   # once per shard: the report counts every image seen


def _check_unchanged(task: dict, fp: dict, src, columnar: bool) -> None:
    """The shard filtered is the one the marker will name: its sha256 as read (a parquet
    file, read by seeking, by its stat; an object by the identity its store reports)."""
    sha = None if columnar or paths.store_identifies(task["path"]) else src.finish()
    if files.changed(task["path"], fp, sha):
        raise InputError("the shard changed while it was filtered",
                         path=shown_url(task["path"]),
                         fix="rerun once the shard is no longer being written")
