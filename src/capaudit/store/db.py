"""Store: the one DuckDB file every command reads and writes.

Every write happens inside :meth:`Store.transaction`, so a command that is
interrupted (Ctrl-C, a crash, bad input found half-way) leaves the database as
it was: DuckDB rolls back the open transaction, also on recovery after a kill.

The class holds the connection and its plumbing; the caption sets' methods come
from :class:`~capaudit.store.sets.SetQueries`, the runs' and metric rows' from
:class:`~capaudit.store.runs.RunLog`.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator, Mapping

import duckdb

from capaudit.errors import DataError, InputError
from capaudit.store.opener import (BASE_CONFIG, MEMORY, check_file_kind, check_side_files,
                                   connect, damaged, damaged_error, real_store_path, recognise,
                                   seal)
from capaudit.store.open_stores import OPEN_STORES
from capaudit.store.runs import RunLog, jsonable
from capaudit.store.schema import SCHEMA_VERSION, migrate, needs_migration
from capaudit.store.sets import SetInfo, SetQueries

# SetInfo is imported from here by callers of the Store (and named so in the API docs)
__all__ = ["DEFAULT_DB", "SetInfo", "Store"]

DEFAULT_DB = "capaudit.duckdb"

# DuckDB's buffer pool while a command writes many rows (:meth:`Store.bounded_cache`)
BULK_WRITE_MEMORY = "32MB"   # 64 MB held ~22 MB more at 810k captions; 16 MB spilled
STATEMENT_MEMORY = "128MB"   # a set-level UPDATE of 1.2M rows ran (spilling) in this


_IN_MEMORY = object()   # Store.in_memory()


class Store(SetQueries, RunLog):
    """A capaudit database file.

    Only a command that adds data creates the file (``create=True``); a read
    command on a mistyped ``--db`` says it is not there instead of leaving an
    empty database behind. ``sandbox=True`` opens it for user SQL (``capaudit query``):
    no file but its own (and the sharded runs' logs) and no network, so DuckDB refuses
    read_csv/COPY TO/ATTACH/INSTALL, and the locked configuration cannot be switched back
    from inside the SQL (:func:`capaudit.store.opener.seal`).
    """

    _bounded = 0   # how many bounded_cache blocks are open on this connection

    def __init__(self, path: str | Path = DEFAULT_DB, read_only: bool = False,
                 create: bool = True, sandbox: bool = False, external: bool | None = None,
                 allow_paths: tuple = ()):
        """``external``: DuckDB may read and write files and scan Python tables (the
        writers' Arrow inserts, ``read_parquet``, ``COPY``); default: unless ``sandbox``.
        ``allow_paths``: the files a store without external access may still write."""
        if path is _IN_MEMORY:
            self.path, self.con = Path(MEMORY), duckdb.connect(MEMORY, config=dict(BASE_CONFIG))
            migrate(self.con)
            OPEN_STORES.add(self)
            return
        self.path = Path(path)
        real = real_store_path(self.path)
        self.real_path = real
        from capaudit.core.safe_write import protect

        protect(real, "the store")   # no output of this process may land on it
        exists = check_side_files(real) and check_file_kind(real)
        if (read_only or not create) and not exists:
            raise InputError("database not found" if not real.exists() else
                             "the store is empty", path=self.path,
                             fix="add a caption set first (capaudit sets add) or pass --db")
        external = not sandbox if external is None else external
        self._allow = tuple(allow_paths)
        self.con = self._connect(real, read_only, external, sandbox)
        OPEN_STORES.add(self)
        self._protect_sources()

    def _connect(self, real: Path, read_only: bool, external: bool, sandbox: bool):
        """The checked connection: a capaudit store (or a new one), undamaged, migrated."""
        try:   # a sandbox is sealed after the checks (_seal): its log files allowed first
            con = connect(real, read_only=read_only, sandbox=False,
                          external=external or sandbox or bool(read_only and self._allow))
        except duckdb.Error as exc:
            raise _open_error(real, exc) from None
        try:
            state = recognise(con, real, SCHEMA_VERSION)
            why = None if state.new else damaged(con, real)
            if why:
                raise damaged_error(real, why)
            if state.new and read_only:
                raise DataError("not a capaudit store: an empty DuckDB database", path=real,
                                fix="add a caption set first (capaudit sets add) or pass --db")
            if not needs_migration(state) or not read_only:
                if needs_migration(state):
                    migrate(con, state)
                return self._seal(con, external, sandbox, read_only)
        except duckdb.Error as exc:
            con.close()
            raise damaged_error(real, _first_line(exc)) from None
        except BaseException:
            con.close()
            raise
        con.close()   # read-only and older: migrated by a short writer, then read
        self._connect(real, False, False, False).close()
        return self._connect(real, read_only, external, sandbox)

    def _seal(self, con, external: bool, sandbox: bool, read_only: bool):
        """External access as the command needs it, then (a sandbox) the settings locked
        (:func:`~capaudit.store.opener.seal`). A sandbox may still read the sharded filter
        runs' ``*.log.parquet`` files (the view ``filter_log_shards``) and write the one
        writer's file of ``query --out`` (``allow_paths``)."""
        allow = [str(p) for p in self._allow] if read_only else []
        logs = []
        if sandbox:
            from capaudit.store.filter_log import attach_shard_logs

            logs = attach_shard_logs(con)
        seal(con, external=external, sandbox=sandbox, allowed=logs + allow,
             one_thread=bool(allow))
        return con

    @classmethod
    def in_memory(cls) -> "Store":
        """A throwaway store in memory, for programs and tests that want one: everything in
        it is lost when it closes (``--db :memory:`` is refused for that reason)."""
        return cls(_IN_MEMORY)

    def _protect_sources(self) -> None:
        """The registered sources are never an output of this process (``--out``, ``--json``,
        a review file, a folder export's ``--overwrite``): ``sets export --to original``
        needs them unchanged, and a changed source can never be exported again."""
        from capaudit.core.safe_write import protect

        try:
            # sources registered with their checksum (sets add): the files whose identity
            # capaudit holds; an enrich/filter set's inputs are recorded, not registered
            rows = self.con.execute("SELECT name, source_path FROM caption_sets WHERE "
                                    "source_path IS NOT NULL AND sha256 IS NOT NULL").fetchall()
        except duckdb.Error:   # a store from before the schema: nothing registered yet
            return
        for name, source in rows:
            if str(source).startswith(("filter:", "hf:")):
                continue
            if os.path.isfile(source):
                protect(source, f"the source file of set '{name}'")
            elif os.path.isdir(source):   # webdataset shards, a parquet folder: every file
                protect(source, f"the source folder of set '{name}'")

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
            try:
                self.con.execute("COMMIT")
            except duckdb.Error as exc:   # a full disk or read-only mount: nothing stored
                try:
                    self.con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                raise _commit_error(self.path, exc) from None

    @contextmanager
    def bounded_cache(self, limit: str = BULK_WRITE_MEMORY) -> Iterator[None]:
        """DuckDB's ``memory_limit`` at ``limit`` while a command writes rows by the million.

        Why: the rows an insert writes (``caption_details``, one per caption) go to the
        file in row groups as they come, but DuckDB keeps the written blocks in its buffer
        pool, by default up to 80% of the machine's memory: the audit's peak memory grew by
        about 150 bytes per caption (#24). Under a limit they are evicted (they are on
        disk: nothing is spilled, nothing is read back); only a single operation larger
        than the limit spills to DuckDB's temporary folder. The setting is the database's,
        not the transaction's: it is reset afterwards (capaudit sets it nowhere else), or,
        inside another bound, given back to that bound's value.
        """
        outer = self.one("SELECT current_setting('memory_limit')")[0] if self._bounded else None
        self._bounded += 1
        self.con.execute(f"SET memory_limit='{limit}'")
        try:
            yield
        finally:
            self._bounded -= 1
            try:
                self.con.execute("RESET memory_limit" if outer is None
                                 else f"SET memory_limit='{outer}'")
            except duckdb.Error:  # a connection DuckDB invalidated (full disk): the error
                pass              # that invalidated it is the one to report

    def statement_room(self):
        """Room for one set-level statement inside a bulk write (:data:`STATEMENT_MEMORY`;
        nothing changes outside one): an UPDATE joining 1.2M rows to their parent's could
        not run in the writes' 32 MB at all (DuckDB's out-of-memory error), and spills in
        this much."""
        return self.bounded_cache(STATEMENT_MEMORY) if self._bounded else nullcontext()

    @contextmanager
    def bulk_transaction(self, bounded: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """:meth:`transaction` for rows by the million, under :meth:`bounded_cache` when
        ``bounded``. The limit is taken first and given back last: inside the transaction,
        its reset ran before the COMMIT, and the COMMIT of 810k details rows, unbounded,
        was the audit's peak in some runs (+20 MB, #24)."""
        with (self.bounded_cache() if bounded else nullcontext()), self.transaction() as con:
            yield con

    def sql(self, query: str, params=None):
        """Run a query and return all rows (DuckDB 2 wants results fully consumed)."""
        return self.con.execute(query, params or []).fetchall()

    def one(self, query: str, params=None):
        """First row of a query or None, consuming the whole result."""
        rows = self.con.execute(query, params or []).fetchall()
        return rows[0] if rows else None

    # -- LIC cache ------------------------------------------------------------
    def cache_get(self, key: str) -> dict | None:
        row = self.one("SELECT value FROM lic_cache WHERE key = ?", [key])
        return json.loads(row[0]) if row else None

    def cache_put(self, key: str, value: Mapping) -> None:
        self.con.execute("INSERT OR REPLACE INTO lic_cache (key, value) VALUES (?, ?)",
                         [key, json.dumps(dict(value), default=jsonable)])


def _commit_error(path: Path, exc: Exception) -> InputError:
    """One line for a write the file system refused at commit; the store is as it was."""
    first = _first_line(exc)
    for words, why, fix in (("No space left", "the disk is full", "free some space, or "
                             "put the store on another disk (--db)"),
                            ("Read-only", "the file system is read-only", "put the store on "
                             "a writable disk (--db)"),
                            ("Permission denied", "permission denied", "use a store you may "
                             "write to (--db)")):
        if words in first:
            return InputError(f"cannot store: {why}; nothing was stored", path=path, fix=fix)
    return InputError(f"cannot store ({first[:200]}); nothing was stored", path=path,
                      fix="check free disk space and that the store's folder is writable")


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _open_error(path: Path, exc: Exception) -> InputError:
    """One line for a store that cannot be opened: locked by another process, or damaged."""
    first = _first_line(exc)
    if "Conflicting lock" in first:
        import re

        found = re.search(r"PID (\d+)", first)
        pid = found.group(1) if found else "?"
        return InputError(f"another capaudit process (pid {pid}) holds the store", path=path,
                          fix="wait for it to finish, or pass another --db")
    for words, why, fix in (("Permission denied", "permission denied", "use a store you may "
                             "read and write (--db)"),
                            ("Read-only file system", "the file system is read-only",
                             "put the store on a writable disk (--db)")):
        if words in first:
            return InputError(f"cannot open the store: {why}", path=path, fix=fix)
    return damaged_error(path, first)
