"""``--where``: which records of a caption file are read, as a DuckDB SQL expression.

Why DuckDB, and why here: the store already speaks DuckDB SQL, so a user writes the same
expression language for every file (``prompt = 'Describe this photo in detail.'``,
``type IN ('detail', 'complex')``, ``len(conversations) > 2``) and for ``capaudit query``;
there is no second language to learn or to keep safe. The expression is the one piece of
SQL capaudit does not write, so it is checked here before any file is read: parsed by
DuckDB into one ``SELECT * FROM records WHERE <expr>`` whose shape must be exactly that
(no second statement, no subquery, no set operation, no clause of its own): anything but
an expression is refused in one line. It is evaluated over the records by DuckDB itself,
on a connection that may read only the file being added (extensions neither installed nor
loaded).

Two ways in: the DuckDB readers (JSONL, CSV/TSV, parquet) put :func:`checked_where` in
their own SELECT; the readers that walk records in Python (JSON arrays, LLaVA, ShareGPT,
Karpathy) ask :func:`matching_records` once for the indices of the records that match,
a bit per record (1.2M records: 1.2 MB), and skip the others as they stream by.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np

from capaudit.errors import InputError
from capaudit.store.db import _first_line

__all__ = ["checked_where", "filtered_select", "matching_records", "where_error"]

_TABLE = "__capaudit_records"
_SHAPE_SQL = f"SELECT * FROM {_TABLE} WHERE "
_FIX = ("write one SQL expression over the record's fields, e.g. "
        "--where \"type = 'detail'\" (text values in single quotes)")
_LIMITS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def _parse(expr: str) -> dict:
    con = duckdb.connect(config={**_LIMITS, "enable_external_access": False})
    try:
        return json.loads(con.execute("SELECT json_serialize_sql(?)",
                                      [_SHAPE_SQL + "(" + expr + ")"]).fetchone()[0])
    finally:
        con.close()


def _bare(tree: dict) -> dict:
    """The statement's tree without the WHERE clause and source positions."""
    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items()
                    if k not in ("where_clause", "query_location", "query_location_length")}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node
    return strip(tree)


def _has_subquery(node) -> bool:
    if isinstance(node, dict):
        if node.get("class") == "SUBQUERY" or "subquery" in node:
            return True
        return any(_has_subquery(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_subquery(v) for v in node)
    return False


_TEMPLATE: dict | None = None


def checked_where(expr: str) -> str:
    """``(expr)`` once DuckDB has parsed it as one expression and nothing else; else one
    line naming what was refused."""
    global _TEMPLATE
    if not isinstance(expr, str) or not expr.strip():
        raise InputError("--where is empty", fix=_FIX)
    if "\x00" in expr:
        raise InputError("--where holds a NUL character", fix=_FIX)
    tree = _parse(expr)
    if tree.get("error"):
        msg = str(tree.get("error_message", "")).strip().splitlines()[0][:200]
        raise InputError(f"--where is not a SQL expression ({msg})", fix=_FIX)
    if _TEMPLATE is None:
        _TEMPLATE = _bare(_parse("TRUE")["statements"])
    statements = tree["statements"]
    if len(statements) != 1 or _bare(statements) != _TEMPLATE:
        raise InputError("--where must be one expression, not a statement or a query",
                         fix=_FIX)
    if _has_subquery(statements[0]["node"].get("where_clause")):
        raise InputError("--where may not hold a subquery: it filters the file's records "
                         "by their own fields", fix=_FIX)
    return "(" + expr + ")"


def where_error(exc: Exception, expr: str, path: Path | None = None) -> InputError:
    """DuckDB's failure to evaluate ``expr`` as one line (a field that is not there names
    the fields that are, and reminds that text values are quoted)."""
    first = _first_line(exc)
    if isinstance(exc, duckdb.BinderException) and "not found" in first:
        return InputError(f"--where {expr!r}: {first.split(': ', 1)[-1]}", path=path,
                          fix="name the record's fields; quote text values "
                              "(type = 'detail', not type = detail)")
    return InputError(f"--where {expr!r} cannot be evaluated ({first[:200]})", path=path,
                      fix=_FIX)


def _q(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _records_sql(path: Path, layout: str) -> str:
    """The file's records as a table: a JSON array or JSONL of records, or the ``images``
    list of a Karpathy document."""
    opts = "maximum_object_size=268435456, sample_size=-1"
    if layout == "images":
        return (f"(SELECT unnest(_img) FROM (SELECT unnest(images) AS _img FROM "
                f"read_json({_q(path)}, format='auto', maximum_object_size=4294967295)))")
    fmt = "array" if layout == "array" else "newline_delimited"
    return f"read_json({_q(path)}, format='{fmt}', {opts})"


def matching_records(path: Path, expr: str, layout: str) -> np.ndarray:
    """Bool per record of ``path`` (``layout``: ``array``, ``lines`` or ``images``): whether
    ``expr`` is true for it (NULL, a field missing, counts as false)."""
    cond = checked_where(expr)
    con = duckdb.connect(config=_LIMITS)
    con.execute("SET threads=1")      # one scan, in file order
    try:
        reader = con.sql(f"SELECT coalesce({cond}, false) AS keep FROM "
                         f"{_records_sql(path, layout)}").to_arrow_reader(1 << 16)
        parts = [np.asarray(b.column(0).to_numpy(zero_copy_only=False), bool) for b in reader]
    except duckdb.Error as exc:
        raise where_error(exc, expr, path) from None
    finally:
        con.close()
    return np.concatenate(parts) if parts else np.zeros(0, bool)


def filtered_select(con, key_sql: str | None, id_sql: str, cap_sql: str, extra: str, src: str,
                    full_src: str, expr: str, path: Path) -> str:
    """A DuckDB reader's SELECT (image_key, image_id, caption, meta) of the records ``expr``
    keeps: each keeps its record number in the file (``meta.src``, the key when the file
    has no id column), counted before the filter, so an export finds it back. ``src`` is
    the reader's typed source, ``full_src`` the file with every field, for ``expr``."""
    cond = checked_where(expr)
    keep = (f"SELECT _i FROM (SELECT row_number() OVER () - 1 AS _i, coalesce({cond}, false) "
            f"AS _k FROM {full_src}) WHERE _k")
    try:
        con.execute(f"DESCRIBE {keep}")          # a field that is not there: one line now
    except duckdb.Error as exc:
        raise where_error(exc, expr, path) from None
    key = key_sql or "CAST(_src AS VARCHAR)"
    return (f"SELECT {key} AS image_key, {id_sql} AS image_id, {cap_sql} AS caption, "
            f"json_object('src', _src)::VARCHAR AS meta FROM (SELECT *{extra}, "
            f"row_number() OVER () - 1 AS _src FROM {src}) WHERE _src IN ({keep}) "
            "ORDER BY _src")          # file order, whatever order the semi-join hands on
