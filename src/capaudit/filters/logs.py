"""Reading a filter's log back: the run's row, its sentences, its counts.

A registered set's log lives in the store (``filter_log``, ``filter_runs``); a sharded
corpus's log is one parquet file per shard beside the cleaned shards (a 100M-caption
corpus's log cannot live in the store's tables), found through the run's ``filter_runs``
row. Both read back as the same table (:data:`capaudit.filters.stream.LOG_SCHEMA`).
"""

from __future__ import annotations

import json

import pyarrow as pa

from capaudit.filters.base import KEPT_ACTIONS
from capaudit.filters.stream import LOG_SCHEMA, SHARD_LOG_SCHEMA
from capaudit.store import filter_log as _log

__all__ = ["filter_run_info", "read_log", "log_counts", "sharded_run", "shard_log_files",
           "read_shard_log", "shard_log_counts", "shard_review_rows", "log_captions"]

def filter_run_info(store, set_name: str) -> dict | None:
    """The ``filter_runs`` row of an output set (None when it is not a filtered set)."""
    if not _log.has_tables(store):
        return None
    row = _log.run_row(store, set_name)
    if row is None:
        return None
    p, f, v, r, c, s, t = row
    return {"set_name": set_name, "parent": p, "filter": f, "version": v, "run_id": r,
            "config": json.loads(c) if c else {}, "summary": json.loads(s) if s else {},
            "created_at": t}


def read_log(store, set_name: str, actions: tuple[str, ...] | None = ("flag", "revise", "drop"),
             limit: int | None = None) -> pa.Table:
    """Log rows of ``set_name`` (default: everything but plain keeps)."""
    if not _log.has_tables(store):
        return pa.Table.from_pylist([], schema=LOG_SCHEMA)
    return _log.log_rows(store, set_name, actions, limit)


def log_counts(store, set_name: str) -> dict:
    """Counts recomputed from the stored log; ``ok`` says whether in = kept + dropped."""
    if not _log.has_tables(store):
        return {}
    by = _log.action_counts(store, set_name)
    n_in = sum(by.values())
    kept = sum(by.get(a, 0) for a in KEPT_ACTIONS)
    dropped = by.get("drop", 0)
    caps = _log.caption_counts(store, set_name)
    out = {"sentences_in": n_in, "kept": kept, "dropped": dropped, "actions": by,
           "captions_in": int(caps[0]), "captions_out": int(caps[1])}
    ok = n_in == kept + dropped and set(by) <= set(KEPT_ACTIONS) | {"drop"}
    info = store.find_set(set_name)
    if info is not None:  # the log must also agree with the stored sets
        ok = ok and info.n_captions == out["captions_out"]
        parent = store.find_set(info.parent) if info.parent else None
        if parent is not None:
            ok = ok and parent.n_captions == out["captions_in"]
    out["ok"] = ok
    return out


# -- a sharded run's logs (one parquet file per shard, beside the cleaned shards) ----------
def sharded_run(store, target: str) -> dict | None:
    """The run row of ``filter run --shards ... --out target`` (None: no such run)."""
    import os

    for key in (str(target), os.path.abspath(str(target))):
        info = filter_run_info(store, key)
        if info is not None and info["config"].get("log_dir"):
            return info
    return None


def shard_log_files(info: dict) -> list[str]:
    """The run's per-shard log files, in shard order (those of the shards it filtered)."""
    import os

    folder = info["config"]["log_dir"]
    shards = (info["summary"].get("shards") or {})
    failed = {f["shard"] for f in shards.get("failed", [])}
    names = sorted(os.path.relpath(os.path.join(root, f), folder)
                   for root, _, files in os.walk(folder) for f in files
                   if f.endswith(".log.parquet"))
    return [os.path.join(folder, n) for n in names
            if n[:-len(".log.parquet")] not in failed]


def log_batches(info: dict, columns: list[str] | None = None):
    """The record batches of a sharded run's logs, shard by shard (``filter validate`` reads
    them too)."""
    import pyarrow.parquet as pq

    for path in shard_log_files(info):
        yield from pq.ParquetFile(path).iter_batches(batch_size=8192, columns=columns)


def read_shard_log(info: dict, actions: tuple[str, ...] | None = ("flag", "revise", "drop"),
                   limit: int | None = None) -> pa.Table:
    """Log rows of a sharded run (default: everything but plain keeps), in shard order,
    read batch by batch up to ``limit`` rows."""
    out, n = [], 0
    for batch in log_batches(info):
        keep = [a in actions for a in batch.column("action").to_pylist()] if actions \
            else [True] * batch.num_rows
        part = batch.filter(pa.array(keep))
        if limit:
            part = part.slice(0, limit - n)
        out.append(part)
        n += part.num_rows
        if limit and n >= limit:
            break
    return pa.Table.from_batches(out, schema=SHARD_LOG_SCHEMA) if out else \
        SHARD_LOG_SCHEMA.empty_table()


def log_captions(info: dict, columns: list[str]):
    """A sharded run's log rows (``columns``, led by ``shard`` and ``row_idx``) in shard
    order, one list per caption: its sentences, the consecutive rows of one shard and row."""
    from itertools import groupby

    rows = (row for batch in log_batches(info, columns)
            for row in zip(*(batch.column(c).to_pylist() for c in columns)))
    for _, sentences in groupby(rows, key=lambda r: (r[0], r[1])):
        yield list(sentences)


def shard_log_counts(info: dict) -> dict:
    """Counts recomputed from a sharded run's log files (as :func:`log_counts`); ``ok``: in
    = kept + dropped, and the log agrees with the run's summary."""
    from collections import Counter

    by: Counter = Counter()
    captions, kept_captions = 0, 0
    for sentences in log_captions(info, ["shard", "row_idx", "new_row_idx", "action"]):
        by.update(r[3] for r in sentences)
        captions += 1
        kept_captions += sentences[0][2] is not None
    n_in = sum(by.values())
    kept = sum(by.get(a, 0) for a in KEPT_ACTIONS)
    summary = info["summary"]
    ok = n_in == kept + by.get("drop", 0) and n_in == summary.get("sentences_in") and \
        captions == summary.get("captions_in") and kept_captions == summary.get("captions_out")
    return {"sentences_in": n_in, "kept": kept, "dropped": by.get("drop", 0),
            "actions": dict(by), "captions_in": captions, "captions_out": kept_captions,
            "ok": ok}


def shard_review_rows(info: dict, all_rows: bool):
    """The captions of a sharded run up for review (a flagged or revised sentence; every
    caption with ``all_rows``), one dict per caption: the review file's columns, the caption
    as judged (its kept sentences, revised where revised, joined by a space: the cleaned
    shard holds its exact text at ``record``), and where it is (shard, record, turn)."""
    import hashlib

    cols = ["shard", "row_idx", "record", "turn", "image_id", "action", "reason", "original",
            "revised"]
    for group in log_captions(info, cols):
        if not all_rows and not any(r[5] in ("flag", "revise") for r in group):
            continue
        text = " ".join(r[8] if r[5] == "revise" and r[8] is not None else r[7]
                        for r in group if r[5] != "drop")
        yield {"set": info["set_name"], "shard": group[0][0], "row_idx": group[0][1],
               "record": group[0][2], "turn": group[0][3], "image_id": group[0][4],
               "image_key": None, "caption": text,
               "source_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
               "reasons": " | ".join(r[6] or "" for r in group if r[5] in ("flag", "revise")),
               "decision": "", "edited_caption": text}
