"""The filter tables' SQL: writing a run's log and summary row, reading them back.

Why here: the store boundary keeps every statement against the database behind ``store/``
(the DDL is in :mod:`capaudit.store.schema`); :mod:`capaudit.filters.runner` decides what
to write and reads the results through these functions.
"""

from __future__ import annotations

import pyarrow as pa

from capaudit.store.schema import FILTER_DDL
from capaudit.store.arrow_scan import ARROW, execute_on

__all__ = ["ensure_tables", "has_tables", "replace_log", "clear_log", "append_log",
           "insert_run", "run_row", "log_rows", "action_counts", "caption_counts",
           "caption_stream"]


def ensure_tables(con) -> None:
    """The filter tables (older stores may lack them)."""
    for ddl in FILTER_DDL:
        con.execute(ddl)


def has_tables(store) -> bool:
    rows = store.sql("SELECT count(*) FROM information_schema.tables WHERE table_name IN "
                     "('filter_log', 'filter_runs')")
    return rows[0][0] == 2


def replace_log(con, set_name: str, log: pa.Table, run_row: list) -> None:
    """Inside the caller's transaction: drop any earlier log of ``set_name``, insert ``log``
    (columns of ``filter_log``) and its ``filter_runs`` row
    ``[parent, filter, version, run_id, config_json, summary_json]``."""
    clear_log(con, set_name)
    append_log(con, log)
    insert_run(con, set_name, run_row)


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


def caption_stream(store, set_id: int, chunk_rows: int):
    """``(row_idx, image_key, image_id, caption, meta, namespace)`` of a set in row order, as
    Arrow batches of at most ``chunk_rows`` rows: ranges of ``row_idx``, each sorted alone
    (one ``ORDER BY`` over a million long captions holds them all; a range is read through
    DuckDB's zone maps), on a cursor of its own (the caller may write the store meanwhile)."""
    top = store.one("SELECT max(row_idx) FROM captions WHERE set_id = ?", [int(set_id)])[0]
    if top is None:
        return
    cur = store.con.cursor()
    try:
        for start in range(0, int(top) + 1, chunk_rows):
            yield from cur.sql(
                "SELECT row_idx, image_key, image_id, caption, meta, namespace FROM captions "
                "WHERE set_id = $sid AND row_idx >= $a AND row_idx < $b ORDER BY row_idx",
                params={"sid": int(set_id), "a": start, "b": start + chunk_rows}
            ).to_arrow_table().to_batches()
    finally:
        cur.close()
