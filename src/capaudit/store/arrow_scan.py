"""Run one statement over a pyarrow table without keeping the table alive afterwards.

Why: ``con.register(name, table)`` makes a catalog view that holds the Python table, and
``unregister`` drops the view -- but DuckDB keeps a dropped catalog entry until the
transaction ends, so every chunk an audit, an ingest or a filter inserted inside its one
transaction stayed in memory until the commit: ~60 MB of per-caption details at 810k
captions (#24; 30 chunks of 8 MB: 525 MB held against 243 MB). A replacement scan, DuckDB
reading the Python variable the statement names, binds the table for that statement only.
"""

from __future__ import annotations

__all__ = ["ARROW", "execute_on"]

ARROW = "_capaudit_arrow"   # the name the statement gives the table


def execute_on(con, sql: str, table, params=None):
    """``con.execute(sql, params)`` where ``sql`` reads ``table`` as :data:`ARROW`; returns the
    connection's result (fetch it before the next statement)."""
    _capaudit_arrow = table  # noqa: F841  (read by DuckDB's replacement scan, by this name)
    return con.execute(sql, params or [])
