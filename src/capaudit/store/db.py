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
import weakref
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator, Mapping

import duckdb

from capaudit.errors import InputError
from capaudit.store.runs import RunLog, jsonable
from capaudit.store.schema import migrate
from capaudit.store.sets import SetInfo, SetQueries

# SetInfo is imported from here by callers of the Store (and named so in the API docs)
__all__ = ["DEFAULT_DB", "SANDBOX", "SetInfo", "Store"]

DEFAULT_DB = "capaudit.duckdb"

# DuckDB's buffer pool while a command writes many rows (:meth:`Store.bounded_cache`)
BULK_WRITE_MEMORY = "32MB"   # 64 MB held ~22 MB more at 810k captions; 16 MB spilled


_OPEN: "weakref.WeakSet[Store]" = weakref.WeakSet()


def interrupt_open_stores() -> None:
    """Stop the query each open store is running (from any thread): a long INSERT or
    SELECT runs in DuckDB's C++ code, where Python's Ctrl-C handler cannot run for
    seconds; DuckDB's own interrupt ends it at once, and the transaction rolls back."""
    for store in list(_OPEN):
        try:
            store.con.interrupt()
        except Exception:  # closed meanwhile  # noqa: BLE001
            pass


def _on_disk(con) -> bool:
    """DuckDB opens an existing JSON/CSV/parquet file given as the database as an in-memory
    database: everything "stored" there was lost at exit, with exit code 0."""
    return con.execute("SELECT file FROM pragma_database_list "
                       "WHERE name = current_database()").fetchone()[0] is not None


# A store opened for user SQL (``capaudit query``) or for reading only needs no file but
# its own and no network: DuckDB refuses read_csv/COPY TO/ATTACH/INSTALL, and the
# locked configuration cannot be switched back from inside the SQL.
SANDBOX = {"enable_external_access": False, "lock_configuration": True,
           "autoload_known_extensions": False, "autoinstall_known_extensions": False}


class Store(SetQueries, RunLog):
    """A capaudit database file.

    Only a command that adds data creates the file (``create=True``); a read
    command on a mistyped ``--db`` says it is not there instead of leaving an
    empty database behind. ``sandbox=True`` opens it without file-system,
    network or extension access (see :data:`SANDBOX`).
    """

    def __init__(self, path: str | Path = DEFAULT_DB, read_only: bool = False,
                 create: bool = True, sandbox: bool = False):
        self.path = Path(path)
        from capaudit.core.safe_write import protect

        protect(self.path, "the store")   # no output of this process may land on it
        if (read_only or not create) and not self.path.exists():
            raise InputError("database not found", path=self.path,
                             fix="add a caption set first (capaudit sets add) or pass --db")
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
            if sandbox:
                self._sandbox()
        except duckdb.Error as exc:
            raise _open_error(self.path, exc) from None
        if str(path) != ":memory:" and not _on_disk(self.con):
            self.con.close()
            raise InputError("it is not a DuckDB store (DuckDB would keep nothing of what "
                             "is stored)", path=self.path,
                             fix="pass the .duckdb store with --db, or a new file name")
        _OPEN.add(self)
        if not read_only:
            try:
                migrate(self.con)
            except duckdb.Error as exc:
                raise _open_error(self.path, exc) from None
        self._protect_sources()

    def _sandbox(self) -> None:
        """Lock the connection into :data:`SANDBOX`; first, the sharded filter runs' log
        folders are allowed and viewed (``filter_log_shards``), the only files it may read."""
        from capaudit.store.filter_log import attach_shard_logs

        attach_shard_logs(self.con)
        for key, value in sorted(SANDBOX.items(), key=lambda kv: kv[0] == "lock_configuration"):
            self.con.execute(f"SET {key} = {str(value).lower()}")   # the lock last

    def _protect_sources(self) -> None:
        """The registered sources are never an output of this process (``--out``, ``--json``,
        a review file): ``sets export --to original`` needs them unchanged."""
        from capaudit.core.safe_write import protect

        try:
            rows = self.con.execute("SELECT name, source_path FROM caption_sets "
                                    "WHERE source_path IS NOT NULL").fetchall()
        except duckdb.Error:   # a store from before the schema: nothing registered yet
            return
        for name, source in rows:
            if not str(source).startswith(("filter:", "hf:")) and Path(source).is_file():
                protect(source, f"the source file of set '{name}'")

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
        not the transaction's: it is reset afterwards (capaudit sets it nowhere else).
        """
        self.con.execute(f"SET memory_limit='{limit}'")
        try:
            yield
        finally:
            try:
                self.con.execute("RESET memory_limit")
            except duckdb.Error:  # a connection DuckDB invalidated (full disk): the error
                pass              # that invalidated it is the one to report

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
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
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
