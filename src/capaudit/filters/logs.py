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
from capaudit.filters.stream import LOG_SCHEMA
from capaudit.store import filter_log as _log

__all__ = ["filter_run_info", "read_log", "log_counts"]

_has_tables = _log.has_tables


def filter_run_info(store, set_name: str) -> dict | None:
    """The ``filter_runs`` row of an output set (None when it is not a filtered set)."""
    if not _has_tables(store):
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
    if not _has_tables(store):
        return pa.Table.from_pylist([], schema=LOG_SCHEMA)
    return _log.log_rows(store, set_name, actions, limit)


def log_counts(store, set_name: str) -> dict:
    """Counts recomputed from the stored log; ``ok`` says whether in = kept + dropped."""
    if not _has_tables(store):
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
