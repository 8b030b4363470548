"""Store: the one DuckDB file every command reads and writes.

Every write happens inside :meth:`Store.transaction`, so a command that is
interrupted (Ctrl-C, a crash, bad input found half-way) leaves the database as
it was: DuckDB rolls back the open transaction, also on recovery after a kill.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import duckdb
import pyarrow as pa

from capaudit.errors import InputError
from capaudit.store.schema import migrate

DEFAULT_DB = "capaudit.duckdb"


@dataclass
class SetInfo:
    set_id: int
    name: str
    source_path: str | None
    format: str | None
    sha256: str | None
    n_captions: int
    n_images: int
    parent: str | None
    options: dict
    meta: dict
    created_at: object = None
    namespace: str | None = None   # image-id namespace (capaudit.io.imageids); None = unassigned


_SET_COLS = ("set_id, name, source_path, format, sha256, n_captions, n_images, parent, "
             "options, meta, created_at, namespace")


def _set_from_row(row) -> SetInfo:
    vals = list(row)
    vals[8] = json.loads(vals[8]) if vals[8] else {}
    vals[9] = json.loads(vals[9]) if vals[9] else {}
    return SetInfo(*vals)


# A store opened for user SQL (``capaudit query``) or for reading only needs no file but
# its own and no network: DuckDB refuses read_csv/COPY TO/ATTACH/INSTALL, and the
# locked configuration cannot be switched back from inside the SQL.
SANDBOX = {"enable_external_access": False, "lock_configuration": True,
           "autoload_known_extensions": False, "autoinstall_known_extensions": False}


class Store:
    """A capaudit database file.

    Only a command that adds data creates the file (``create=True``); a read
    command on a mistyped ``--db`` says it is not there instead of leaving an
    empty database behind. ``sandbox=True`` opens it without file-system,
    network or extension access (see :data:`SANDBOX`).
    """

    def __init__(self, path: str | Path = DEFAULT_DB, read_only: bool = False,
                 create: bool = True, sandbox: bool = False):
        self.path = Path(path)
        if (read_only or not create) and not self.path.exists():
            raise InputError("database not found", path=self.path,
                             fix="add a caption set first (capaudit sets add) or pass --db")
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only,
                                      config=dict(SANDBOX) if sandbox else {})
        except duckdb.Error as exc:
            raise _open_error(self.path, exc) from None
        if not read_only:
            try:
                migrate(self.con)
            except duckdb.Error as exc:
                raise _open_error(self.path, exc) from None

    # -- plumbing -------------------------------------------------------------
    def close(self) -> None:
        self.con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """All-or-nothing writes."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")

    def sql(self, query: str, params=None):
        """Run a query and return all rows (DuckDB 2 wants results fully consumed)."""
        return self.con.execute(query, params or []).fetchall()

    def one(self, query: str, params=None):
        """First row of a query or None, consuming the whole result."""
        rows = self.con.execute(query, params or []).fetchall()
        return rows[0] if rows else None

    # -- caption sets ---------------------------------------------------------
    def find_set(self, name: str) -> SetInfo | None:
        row = self.one(f"SELECT {_SET_COLS} FROM caption_sets WHERE name = ?",
                               [name])
        return _set_from_row(row) if row else None

    def get_set(self, name: str) -> SetInfo:
        info = self.find_set(name)
        if info is None:
            names = [r[0] for r in self.con.execute("SELECT name FROM caption_sets").fetchall()]
            import difflib
            close = difflib.get_close_matches(name, names, n=1)
            fix = f"did you mean '{close[0]}'?" if close else "see capaudit sets list"
            raise InputError(f"no caption set named '{name}' in {self.path}", fix=fix)
        return info

    def list_sets(self) -> list[SetInfo]:
        rows = self.con.execute(f"SELECT {_SET_COLS} FROM caption_sets ORDER BY name").fetchall()
        return [_set_from_row(r) for r in rows]

    def create_set(self, name: str, *, source_path: str | None, format: str | None,
                   sha256: str | None, parent: str | None = None,
                   options: Mapping | None = None, meta: Mapping | None = None) -> int:
        """Insert the set row (inside the caller's transaction); returns set_id."""
        set_id = self.one("SELECT nextval('set_id_seq')")[0]
        self.con.execute(
            "INSERT INTO caption_sets (set_id, name, source_path, format, sha256, n_captions, "
            "n_images, parent, options, meta) VALUES (?, ?, ?, ?, ?, 0, 0, ?, ?, ?)",
            [set_id, name, source_path, format, sha256, parent,
             json.dumps(dict(options or {}), default=str), json.dumps(dict(meta or {}), default=str)])
        return set_id

    def append_captions(self, set_id: int, batch: pa.RecordBatch | pa.Table, start_row: int) -> int:
        """Append a batch with columns image_key, image_id, caption[, meta]."""
        n = batch.num_rows
        if n == 0:
            return 0
        tbl = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        self.con.register("_capaudit_batch", tbl)
        try:
            meta = "meta" if "meta" in tbl.column_names else "NULL"
            ns = "namespace" if "namespace" in tbl.column_names else "NULL"
            self.con.execute(
                f"INSERT INTO captions (set_id, row_idx, image_key, image_id, caption, meta, "
                f"namespace) SELECT ?, ? + row_number() OVER () - 1, image_key, "
                f"image_id, caption, {meta}, {ns} FROM _capaudit_batch", [set_id, start_row])
        finally:
            self.con.unregister("_capaudit_batch")
        return n

    def finalize_set(self, set_id: int) -> None:
        self.set_namespaces(set_id)
        self.con.execute(
            "UPDATE caption_sets SET n_captions = s.n, n_images = s.m FROM ("
            "SELECT count(*) AS n, count(DISTINCT coalesce(CAST(image_id AS VARCHAR), image_key))"
            " AS m FROM captions WHERE set_id = ?) s WHERE set_id = ?", [set_id, set_id])

    def update_set_meta(self, set_id: int, extra: Mapping) -> None:
        """Merge ``extra`` into a set's ``meta`` JSON (e.g. records skipped at ingestion)."""
        row = self.one("SELECT meta FROM caption_sets WHERE set_id = ?", [set_id])
        meta = {**(json.loads(row[0]) if row and row[0] else {}), **dict(extra)}
        self.con.execute("UPDATE caption_sets SET meta = ? WHERE set_id = ?",
                         [json.dumps(meta, default=str), set_id])

    def set_namespaces(self, set_id: int) -> None:
        """Rows of a derived set take the namespace of their parent's rows (same image key);
        the set's own namespace is its rows' common one, ``mixed`` when they disagree, NULL
        when no row has one (see :mod:`capaudit.io.imageids`)."""
        self.con.execute(
            "UPDATE captions c SET namespace = p.namespace FROM ("
            "SELECT DISTINCT image_key, first(namespace) AS namespace FROM captions "
            "WHERE set_id = (SELECT s.set_id FROM caption_sets s JOIN caption_sets d "
            "ON s.name = d.parent WHERE d.set_id = ?) GROUP BY image_key) p "
            "WHERE c.set_id = ? AND c.namespace IS NULL AND c.image_key = p.image_key",
            [set_id, set_id])
        self.con.execute(
            "UPDATE caption_sets SET namespace = coalesce(caption_sets.namespace, s.ns) FROM ("
            "SELECT CASE WHEN count(namespace) = 0 THEN NULL WHEN count(DISTINCT namespace) = 1 "
            "AND count(*) FILTER (WHERE image_id IS NOT NULL AND namespace IS NULL) = 0 "
            "THEN any_value(namespace) ELSE 'mixed' END "
            "AS ns FROM captions WHERE set_id = ?) s WHERE set_id = ?", [set_id, set_id])

    def delete_set(self, name: str) -> None:
        info = self.get_set(name)
        self.con.execute("DELETE FROM captions WHERE set_id = ?", [info.set_id])
        self.con.execute("DELETE FROM caption_sets WHERE set_id = ?", [info.set_id])

    def add_set_from_table(self, name: str, table: pa.Table, *, source: str, format: str,
                           parent: str | None = None, meta: Mapping | None = None,
                           replace: bool = False, sha256: str | None = None) -> SetInfo:
        """Register captions produced by capaudit itself (enrich, filter, caption)."""
        with self.transaction():
            if self.find_set(name) is not None:
                if not replace:
                    raise InputError(f"a caption set named '{name}' already exists",
                                     fix="choose another name or pass --replace")
                self.delete_set(name)
            set_id = self.create_set(name, source_path=source, format=format, sha256=sha256,
                                     parent=parent, meta=meta)
            self.append_captions(set_id, table, 0)
            self.finalize_set(set_id)
        return self.get_set(name)

    def captions(self, name: str, columns: str = "row_idx, image_key, image_id, caption") -> pa.Table:
        info = self.get_set(name)
        return self.con.sql(
            f"SELECT {columns} FROM captions WHERE set_id = $sid ORDER BY row_idx",
            params={"sid": info.set_id}).to_arrow_table()

    def set_images(self, name: str) -> list[tuple]:
        """Distinct ``(image_key, image_id, namespace)`` of a set (for the coverage check)."""
        info = self.get_set(name)
        return self.sql("SELECT DISTINCT image_key, image_id, namespace FROM captions "
                        "WHERE set_id = ?", [info.set_id])

    def iter_captions(self, name: str, batch_size: int = 100_000) -> Iterator[pa.RecordBatch]:
        info = self.get_set(name)
        cur = self.con.cursor()
        try:
            reader = cur.sql(
                "SELECT row_idx, image_key, image_id, caption FROM captions WHERE set_id = $sid "
                "ORDER BY row_idx", params={"sid": info.set_id}).to_arrow_reader(batch_size)
            yield from reader
        finally:
            cur.close()

    # -- runs and metrics -----------------------------------------------------
    def start_run(self, command: str, config: Mapping, seed: int | None, versions: Mapping) -> int:
        """Record a 'running' run (with this pid and host); earlier orphans become 'killed'."""
        self.mark_orphaned_runs()
        run_id = self.one("SELECT nextval('run_id_seq')")[0]
        self.con.execute(
            "INSERT INTO runs (run_id, command, config, seed, versions, started_at, ended_at, "
            "status, pid, host) VALUES (?, ?, ?, ?, ?, ?, NULL, 'running', ?, ?)",
            [run_id, command, json.dumps(dict(config), default=str), seed,
             json.dumps(dict(versions)), _dt.datetime.now(), os.getpid(), socket.gethostname()])
        return run_id

    def finish_run(self, run_id: int, status: str = "ok") -> None:
        self.con.execute("UPDATE runs SET ended_at = ?, status = ? WHERE run_id = ?",
                         [_dt.datetime.now(), status, run_id])

    def discard_run(self, run_id: int) -> None:
        """Forget a run the command rejected (bad input, nothing written): no 'failed' row."""
        self.con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])

    def mark_orphaned_runs(self) -> int:
        """Mark 'running' runs of this host whose process is gone as 'killed'; returns how many.

        A run killed with SIGKILL (or a lost machine) cannot record its own end;
        the next process that records a run does, for the runs it can check
        (same host, pid no longer alive). ``ended_at`` stays empty.
        """
        rows = self.sql("SELECT run_id, pid FROM runs WHERE status = 'running' AND pid IS NOT "
                        "NULL AND host = ?", [socket.gethostname()])
        dead = [run_id for run_id, pid in rows if not _pid_alive(pid)]
        for run_id in dead:
            self.con.execute("UPDATE runs SET status = 'killed' WHERE run_id = ?", [run_id])
        return len(dead)

    def write_metric(self, run_id: int, set_name: str, metric: str, value, n, ci_low=None,
                     ci_high=None, grp: str = "all", extra: Mapping | None = None) -> None:
        self.con.execute("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [run_id, set_name, metric, grp, value, n, ci_low, ci_high,
                          json.dumps(dict(extra or {}), default=_jsonable)])

    # -- LIC cache ------------------------------------------------------------
    def cache_get(self, key: str) -> dict | None:
        row = self.one("SELECT value FROM lic_cache WHERE key = ?", [key])
        return json.loads(row[0]) if row else None

    def cache_put(self, key: str, value: Mapping) -> None:
        self.con.execute("INSERT OR REPLACE INTO lic_cache (key, value) VALUES (?, ?)",
                         [key, json.dumps(dict(value), default=_jsonable)])


def _open_error(path: Path, exc: Exception) -> InputError:
    """One line for a store that cannot be opened: locked by another process, or not a
    (whole) capaudit database."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "Conflicting lock" in first:
        import re

        found = re.search(r"PID (\d+)", first)
        pid = found.group(1) if found else "?"
        return InputError(f"another capaudit process (pid {pid}) holds the store", path=path,
                          fix="wait for it to finish, or pass another --db")
    return InputError(f"cannot open the database ({first[:200]})", path=path,
                      fix="pass a capaudit .duckdb file with --db; a truncated or damaged "
                          "store must be restored from a copy or rebuilt")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # a reused pid: this process has not started that run
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True   # exists under another user (or cannot tell): leave it alone
    return True


def _jsonable(obj):
    try:
        import numpy as np
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    return str(obj)
