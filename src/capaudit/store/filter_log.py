"""The filter tables' SQL: writing a run's log and summary row, reading them back.

Why here: the store boundary keeps every statement against the database behind ``store/``
(the DDL is in :mod:`capaudit.store.schema`); :mod:`capaudit.filters.runner` decides what
to write and reads the results through these functions.
"""

from __future__ import annotations

import os

import pyarrow as pa

from capaudit.store.schema import FILTER_DDL
from capaudit.store.arrow_scan import ARROW, execute_on

__all__ = ["ensure_tables", "has_tables", "clear_log", "append_log",
           "insert_run", "run_row", "log_rows", "log_of_rows", "action_counts", "caption_counts",
           "caption_stream", "shard_log_dirs", "attach_shard_logs", "SHARD_LOG_VIEW"]

SHARD_LOG_VIEW = "filter_log_shards"   # the sharded runs' logs, for capaudit query


def ensure_tables(con) -> None:
    """The filter tables (older stores may lack them)."""
    for ddl in FILTER_DDL:
        con.execute(ddl)


def has_tables(store) -> bool:
    rows = store.sql("SELECT count(*) FROM information_schema.tables WHERE table_name IN "
                     "('filter_log', 'filter_runs')")
    return rows[0][0] == 2


def clear_log(con, set_name: str) -> None:
    """Inside the caller's transaction: drop any earlier log and run row of ``set_name``."""
    con.execute("DELETE FROM filter_log WHERE set_name = ?", [set_name])
    con.execute("DELETE FROM filter_runs WHERE set_name = ?", [set_name])


def append_log(con, log: pa.Table) -> None:
    """Inside the caller's transaction: append one batch of log rows (``filter_log``'s
    columns, in its order)."""
    if log.num_rows:
        execute_on(con, f"INSERT INTO filter_log SELECT * FROM {ARROW}", log)


def insert_run(con, set_name: str, run_row: list) -> None:
    """Inside the caller's transaction: the ``filter_runs`` row ``[parent, filter, version,
    run_id, config_json, summary_json]`` of ``set_name``."""
    con.execute("DELETE FROM filter_runs WHERE set_name = ?", [set_name])
    con.execute("INSERT INTO filter_runs (set_name, parent, filter, version, run_id, config, "
                "summary) VALUES (?, ?, ?, ?, ?, ?, ?)", [set_name, *run_row])


def run_row(store, set_name: str) -> tuple | None:
    """``(parent, filter, version, run_id, config, summary, created_at)`` or None."""
    return store.one("SELECT parent, filter, version, run_id, config, summary, created_at "
                     "FROM filter_runs WHERE set_name = ?", [set_name])


def log_rows(store, set_name: str, actions: tuple[str, ...] | None, limit: int | None) -> pa.Table:
    """Log rows of ``set_name`` with one of ``actions`` (all when empty), in caption order."""
    where, params = "set_name = $s", {"s": set_name}
    if actions:
        names = {f"a{i}": a for i, a in enumerate(actions)}
        where += " AND action IN (" + ", ".join(f"${k}" for k in names) + ")"
        params.update(names)
    q = f"SELECT * FROM filter_log WHERE {where} ORDER BY row_idx, sentence_idx"
    if limit:
        q += f" LIMIT {int(limit)}"
    return store.con.sql(q, params=params).to_arrow_table()


def log_of_rows(store, set_name: str, rows) -> list[tuple]:
    """``(row_idx, sentence_idx, original, action, reason)`` of the log of ``set_name`` whose
    input row is one of ``rows``, in caption order: a validation reads the few labelled
    captions of a large set, not its whole log. The rows go in as a list parameter (a
    Python table in a replacement scan makes DuckDB import pandas: ~1 CPU-second)."""
    return store.con.execute(
        "SELECT row_idx, sentence_idx, original, action, reason FROM filter_log WHERE "
        "set_name = ? AND row_idx IN (SELECT unnest(?::BIGINT[])) ORDER BY row_idx, "
        "sentence_idx", [set_name, sorted(set(rows))]).fetchall()


def action_counts(store, set_name: str) -> dict[str, int]:
    rows = store.sql("SELECT action, count(*) FROM filter_log WHERE set_name = ? GROUP BY action",
                     [set_name])
    return {a: int(n) for a, n in rows}


def caption_counts(store, set_name: str) -> tuple[int, int]:
    """Distinct parent rows judged and output rows written."""
    row = store.one("SELECT count(DISTINCT row_idx), count(DISTINCT new_row_idx) "
                    "FROM filter_log WHERE set_name = ?", [set_name])
    return int(row[0]), int(row[1])


def caption_stream(store, set_id: int, chunk_rows: int):
    """``(row_idx, image_key, image_id, caption, meta, namespace)`` of a set in row order, in
    chunks (:func:`capaudit.store.exports.row_chunks`)."""
    from capaudit.store.exports import row_chunks

    yield from row_chunks(store, set_id, "row_idx, image_key, image_id, caption, meta, "
                                         "namespace", chunk_rows)


def shard_log_dirs(con) -> list[str]:
    """The log folders of the sharded filter runs recorded in the store that still exist."""
    try:
        rows = con.execute("SELECT json_extract_string(config, '$.log_dir') FROM filter_runs "
                           "WHERE json_extract_string(config, '$.log_dir') IS NOT NULL "
                           "ORDER BY created_at").fetchall()
    except Exception:   # noqa: BLE001 - a store without the filter tables: no sharded run
        return []
    return [d for d, in rows if d and os.path.isdir(d)]


def attach_shard_logs(con) -> list[str]:
    """Before the query sandbox is sealed: make :data:`SHARD_LOG_VIEW` over the sharded runs'
    log files (one row per sentence, as ``filter_log``, with the shard's place columns and
    the file's name) and return them, each ``*.log.parquet`` file itself: the sandbox allows
    those files only, never their folders (a store's rows name the folders, and a store may
    come from anyone). No view when there are none."""
    files = sorted(os.path.realpath(os.path.join(root, f)) for d in shard_log_dirs(con)
                   for root, _, names in os.walk(d) for f in names
                   if f.endswith(".log.parquet"))
    if not files:
        return []
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {SHARD_LOG_VIEW} AS SELECT * FROM "
                f"read_parquet([{listed}], filename = true, union_by_name = true)")
    return files
