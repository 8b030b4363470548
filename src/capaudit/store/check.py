"""``capaudit store check``: what of a store can still be read.

Why: a store the opener refuses as damaged (a copy or a download cut short, a disk that
filled up mid-checkpoint) is not opened for work, so that nothing is computed on half the
data; this reads it anyway, read-only, table by table, every column of every row, and says
which tables are whole. It writes nothing. The way back is the last good copy; the tables
it lists as readable are what such a copy must at least hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from capaudit.errors import InputError
from capaudit.store.db import _first_line
from capaudit.store.opener import damaged

__all__ = ["StoreCheck", "check_store"]


@dataclass
class StoreCheck:
    path: Path
    size: int
    schema_version: int | None = None
    problem: str | None = None                      # the file as a whole (None: none found)
    tables: dict[str, int | str] = field(default_factory=dict)  # rows read, or the error

    @property
    def ok(self) -> bool:
        return self.problem is None and all(isinstance(v, int) for v in self.tables.values())


def check_store(path: str | Path) -> StoreCheck:
    """Open ``path`` read-only (the opener's path and file-kind checks, not its refusal of
    damage) and read every table in full."""
    from capaudit.store.opener import (check_file_kind, check_side_files, connect,
                                       real_store_path)

    real = real_store_path(path)
    if not check_side_files(real) or not check_file_kind(real):
        raise InputError("no store there (missing or empty)", path=path,
                         fix="pass the store with --db")
    report = StoreCheck(real, real.stat().st_size)
    try:
        con = connect(real, read_only=True, external=False, sandbox=True)
    except duckdb.Error as exc:
        report.problem = f"DuckDB cannot open it: {_first_line(exc)[:200]}"
        return report
    try:
        _read_all(con, real, report)
    finally:
        con.close()
    return report


def _read_all(con, real: Path, report: StoreCheck) -> None:
    try:
        report.problem = damaged(con, real)
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "ORDER BY table_name").fetchall()]
    except duckdb.Error as exc:
        report.problem = f"its catalog cannot be read: {_first_line(exc)[:200]}"
        return
    for name in names:
        quoted = '"' + name.replace('"', '""') + '"'
        try:   # hashing every row reads every column of every row group
            report.tables[name] = con.execute(
                f"SELECT count(*), bit_xor(hash(t)) FROM {quoted} t").fetchone()[0]
        except duckdb.Error as exc:
            report.tables[name] = f"unreadable: {_first_line(exc)[:200]}"
    if "meta" not in names:
        report.problem = report.problem or ("not a capaudit store: it has no meta table"
                                            if names else "an empty DuckDB database")
    if "meta" in names and isinstance(report.tables.get("meta"), int):
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            report.schema_version = int(row[0]) if row else None
        except (duckdb.Error, ValueError):
            pass
