"""The user's own SQL over the store (``capaudit query``, :meth:`capaudit.api.AuditStore.query`).

Why in ``store``: it is the one statement capaudit does not write itself, so it runs
here, behind the same boundary as every other statement, and its failures become
one line naming the fix.
"""

from __future__ import annotations

from capaudit.errors import InputError

__all__ = ["run_query"]


def run_query(store, sql: str) -> tuple[list[str], list[tuple]]:
    """``(columns, rows)`` of the user's own SQL on the store; a refused or failing
    statement is one line (the sandboxed store refuses files, other databases and settings)."""
    import duckdb

    try:
        cur = store.con.execute(sql)
        cols = [d[0] for d in cur.description] if cur.description else []
        rows = cur.fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in first:
            raise InputError(f"query refused: it may read and change only the store, never "
                             f"files, other databases, extensions or settings ({first})",
                             fix="query the store's tables; write files with capaudit sets "
                                 "export") from None
        raise InputError(f"query failed: {first}", fix="check the SQL; "
                         "tables: caption_sets, captions, runs, metrics, caption_details, "
                         "annotation_sources, instance_categories, chair_gt, demographics") from None
    return cols, rows
