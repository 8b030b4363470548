"""The user's own SQL over the store (``capaudit query``, :meth:`capaudit.api.AuditStore.query`).

Why in ``store``: it is the one statement capaudit does not write itself, so it runs
here, behind the same boundary as every other statement, and its failures become
one line naming the fix.

Why streamed: a result is read in batches of :data:`BATCH_ROWS` rows
(:func:`query_stream`), so printing or writing it holds one batch, never the result: 3M
rows of ``caption_details`` held every row before printing (4.9 GB, 403 s). A file output
is DuckDB's own ``COPY`` (:func:`copy_query`) into the one writer's temporary file, the
only path the sandboxed connection may touch.
"""

from __future__ import annotations

from typing import Iterator

import duckdb

from capaudit.errors import InputError
from capaudit.store.db import _first_line

__all__ = ["run_query", "query_stream", "copy_query", "COPY_FORMATS", "BATCH_ROWS"]

BATCH_ROWS = 10_000   # rows held at a time while a result is printed
COPY_FORMATS = {"csv": "FORMAT csv, HEADER", "json": "FORMAT json",
                "parquet": "FORMAT parquet"}
_TABLES = ("tables: caption_sets, captions, runs, metrics, caption_details, "
           "annotation_sources, instance_categories, chair_gt, demographics")


def _refusal(exc) -> InputError:
    first = _first_line(exc)
    if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in first:
        return InputError(f"query refused: it may read and change only the store, never "
                          f"files, other databases, extensions or settings ({first})",
                          fix="query the store's tables; write a result to a file with "
                              "capaudit query --out FILE")
    if "read-only mode" in first:   # DuckDB: 'Cannot execute statement of type "DELETE" ...'
        what = first.split('type "', 1)[1].split('"', 1)[0] if 'type "' in first else "it"
        return InputError(f"query refused: the store is opened read-only and this statement "
                          f"({what}) would change it",
                          fix="capaudit query --write \"...\" allows statements that modify "
                              "the store (copy the .duckdb file first: there is no undo)")
    return InputError(f"query failed: {first}", fix=f"check the SQL; {_TABLES}")


def query_stream(store, sql: str,
                 batch_rows: int = BATCH_ROWS) -> tuple[list[str], Iterator[list[tuple]]]:
    """``(columns, batches of rows)`` of the user's SQL on the store, read as they are
    consumed; a refused or failing statement (also one failing half-way) is one line (the
    sandboxed store refuses files, other databases and settings)."""
    if not isinstance(sql, str) or not sql.strip():
        raise InputError("the query is empty", fix="give a SQL statement, e.g. "
                         "\"SELECT * FROM caption_sets\"")
    try:
        cur = store.con.execute(sql)
        cols = [d[0] for d in cur.description] if cur.description else []
    except duckdb.Error as exc:
        raise _refusal(exc) from None

    def batches() -> Iterator[list[tuple]]:
        if not cols:
            return
        while True:
            try:
                rows = cur.fetchmany(batch_rows)
            except duckdb.Error as exc:
                raise _refusal(exc) from None
            if not rows:
                return
            yield rows

    return cols, batches()


def run_query(store, sql: str) -> tuple[list[str], list[tuple]]:
    """``(columns, rows)`` of the user's own SQL, every row (the API's small results)."""
    cols, batches = query_stream(store, sql)
    return cols, [row for batch in batches for row in batch]


def copy_query(store, sql: str, target: str, fmt: str) -> None:
    """DuckDB's ``COPY (sql) TO target`` in ``fmt`` (:data:`COPY_FORMATS`): written in
    DuckDB's own batches, never held. ``target`` is the one path the sandboxed store may
    write (the writer's temporary file, :func:`capaudit.core.safe_write.atomic_path`)."""
    body = sql.strip().rstrip(";").strip()
    if not body:
        raise InputError("the query is empty", fix="give a SQL statement")
    quoted = "'" + str(target).replace("'", "''") + "'"
    try:
        store.con.execute(f"COPY ({body}) TO {quoted} ({COPY_FORMATS[fmt]}, "
                          "USE_TMP_FILE false)")
    except duckdb.Error as exc:
        raise _refusal(exc) from None
