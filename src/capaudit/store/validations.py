"""The filter validations' SQL (``capaudit filter validate``): writing one, reading them back.

Why here: every statement against the database lives under ``store/`` (the DDL is
:data:`capaudit.store.schema.VALIDATION_DDL`); :mod:`capaudit.filters.validate.runner`
decides what to write, the set's card and the report read the rows through
:func:`validations_of`.
"""

from __future__ import annotations

import json

__all__ = ["UNIT_COLUMNS", "replace_validation", "validations_of", "has_table"]

# filter_validation_units' columns and their types, in the table's order
UNIT_COLUMNS = [("set_name", "VARCHAR"), ("labels_sha256", "VARCHAR"), ("layout", "VARCHAR"),
                ("level", "VARCHAR"), ("row_idx", "BIGINT"), ("image_id", "BIGINT"),
                ("sentence_idx", "INTEGER"), ("label", "INTEGER"), ("grade", "DOUBLE"),
                ("flagged", "BOOLEAN"), ("action", "VARCHAR"), ("reason", "VARCHAR"),
                ("evidence", "VARCHAR"), ("label_row", "BIGINT")]


def replace_validation(con, row: dict, units: dict[str, list]) -> None:
    """Inside the caller's transaction: the validation of (set, labels, layout) and its units
    (``{column: values}`` of :data:`UNIT_COLUMNS`), replacing an earlier one of the same three.
    The units go in as list parameters, not a Python table (DuckDB's scan of one imports
    pandas: ~1 CPU-second of a command that takes ~1)."""
    key = [row["set_name"], row["labels_sha256"], row["layout"]]
    con.execute("DELETE FROM filter_validations WHERE set_name = ? AND labels_sha256 = ? "
                "AND layout = ?", key)
    con.execute("DELETE FROM filter_validation_units WHERE set_name = ? AND labels_sha256 = ? "
                "AND layout = ?", key)
    con.execute("INSERT INTO filter_validations (set_name, labels, labels_sha256, layout, "
                "status, run_id, matching, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [*key[:1], row["labels"], *key[1:], row["status"], row.get("run_id"),
                 json.dumps(row["matching"]), json.dumps(row["result"])])
    if units and units[UNIT_COLUMNS[0][0]]:
        select = ", ".join(f"unnest(?::{t}[])" for _, t in UNIT_COLUMNS)
        con.execute(f"INSERT INTO filter_validation_units SELECT {select}",
                    [units[name] for name, _ in UNIT_COLUMNS])


def has_table(store) -> bool:
    rows = store.sql("SELECT count(*) FROM information_schema.tables WHERE table_name = "
                     "'filter_validations'")
    return bool(rows[0][0])


def validations_of(store, set_name: str) -> list[dict]:
    """The set's validations, newest first: labels, layout, status, matching, result."""
    if store is None or not has_table(store):
        return []
    rows = store.sql("SELECT labels, labels_sha256, layout, status, run_id, matching, result, "
                     "created_at FROM filter_validations WHERE set_name = ? "
                     "ORDER BY created_at DESC", [set_name])
    return [{"labels": r[0], "labels_sha256": r[1], "layout": r[2], "status": r[3],
             "run_id": r[4], "matching": json.loads(r[5]) if r[5] else {},
             "result": json.loads(r[6]) if r[6] else {}, "created_at": r[7]} for r in rows]
