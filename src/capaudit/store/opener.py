"""The one way a store file is opened: what is on disk is checked before DuckDB touches it.

Why: DuckDB opens whatever it is given. A symbolic link planted at the store's write-ahead
log (``STORE.wal``) had DuckDB's log written into the file it points to; a user's own
DuckDB file (``--db notes.duckdb``) got capaudit's 18 tables added beside theirs; a SQLite
file made DuckDB download its ``sqlite_scanner`` extension and would have had capaudit's
tables written into it; a store of a newer capaudit was written without a word; ``:memory:``
kept nothing. Every store is now opened by :func:`connect`:

1. the path: never ``:memory:``; its folder resolved (a store reached through a linked
   folder is opened at its real place), and the store, its ``.wal`` and its ``.tmp`` spill
   folder are each refused when they are a symbolic link or not a plain file (folder);
2. the first bytes: a file that is not a DuckDB database (SQLite, text, parquet) is named
   and refused before DuckDB opens it;
3. DuckDB itself with extension autoinstall and autoload off, and external access (files,
   replacement scans of Python tables) only where ``external`` says the command needs it;
4. what is inside (:func:`recognise`): a capaudit store has a ``meta`` table with its
   ``schema_version``; another DuckDB database with tables, a newer schema, or a damaged
   file is refused in one line with nothing written.

Left open: DuckDB creates ``.wal`` itself after these checks (it cannot be told to refuse
links), so a link planted in the same instant is not caught; the checks close the window
that stays open between runs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from capaudit.errors import DataError, InputError, UsageError

__all__ = ["MEMORY", "real_store_path", "check_side_files", "check_file_kind", "connect",
           "recognise", "damaged", "StoreState", "seal"]

MEMORY = ":memory:"
SIDE_FILES = (".wal", ".tmp")        # DuckDB's write-ahead log and its spill folder
_DUCKDB_MAGIC = b"DUCK"              # bytes 8..12 of every DuckDB database file
_HEADER = 3 * 4096                   # DuckDB's main header and its two database headers

# every connection: no extension is fetched over the network or loaded on its own (a SQLite
# or parquet "store" made DuckDB download sqlite_scanner at the first statement)
BASE_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def real_store_path(path: str | Path) -> Path:
    """``path`` with its folder resolved (links to folders followed), its own name kept: the
    name itself is checked by :func:`check_side_files`, never followed."""
    path = Path(path)
    if str(path) in ("", MEMORY):
        shown = str(path) or "''"
        raise UsageError(f"--db {shown} is not a file: a store in memory keeps "
                         "nothing of what is stored once the command ends",
                         fix="give the store a file name, e.g. --db capaudit.duckdb")
    if path.name in ("", ".", ".."):
        raise UsageError("the store path names a folder, not a file", path=path,
                         fix="give a file name, e.g. --db capaudit.duckdb")
    return Path(os.path.realpath(path.parent)) / path.name


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None: a plain file)."""
    for test, words in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return words
    return None


def _lstat(path: Path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"cannot read the store's folder ({exc.strerror})", path=path,
                         fix="use a store in a folder you may read and write") from None


def check_side_files(real: Path) -> bool:
    """Refuse a store (``real``, its folder resolved) or side file that is a symbolic link or
    not what DuckDB would make there; returns whether the store file exists."""
    st = _lstat(real)
    if st is not None and _kind(st.st_mode):
        raise InputError(f"the store is {_kind(st.st_mode)}, not a file; capaudit opens only "
                         "a plain file as its store", path=real,
                         fix="pass the real .duckdb file with --db, or a new file name")
    for suffix in SIDE_FILES:
        side = real.with_name(real.name + suffix)
        sst = _lstat(side)
        want_dir = suffix == ".tmp"
        if sst is None or (not _kind(sst.st_mode) and not want_dir) or \
                (want_dir and stat.S_ISDIR(sst.st_mode)):
            if want_dir and sst is not None:
                _check_spill_folder(side)
            continue
        raise InputError(f"the store's {suffix} file is {_kind(sst.st_mode) or 'a file'}; "
                         "DuckDB would write its " + ("log" if suffix == ".wal" else
                                                      "spill files") + " through it",
                         path=side, fix=f"remove {side.name} (capaudit never made it) and "
                         "run the command again")
    return st is not None


def _check_spill_folder(folder: Path) -> None:
    """DuckDB's spill files go into ``STORE.tmp/``: a link planted there is written through."""
    try:
        with os.scandir(folder) as entries:
            links = [e.name for e in entries if e.is_symlink()]
    except OSError:
        return
    if links:
        raise InputError(f"the store's spill folder holds a symbolic link ({links[0]})",
                         path=folder, fix=f"remove {folder.name} (it holds only DuckDB's "
                         "temporary files) and run the command again")


def check_file_kind(real: Path) -> bool:
    """Refuse an existing file that is not a DuckDB database, before DuckDB opens it (it
    would fetch an extension for a SQLite file, or open a text file as an empty database).
    Returns False for an empty file (a new store), True for a DuckDB file."""
    try:
        with open(real, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise InputError(f"cannot read the store ({exc.strerror})", path=real,
                         fix="use a store you may read and write (--db)") from None
    if not head:
        return False
    if head[8:12] == _DUCKDB_MAGIC:
        return True
    what = ("a SQLite database" if head.startswith(b"SQLite format 3") else
            "a parquet file" if head.startswith(b"PAR1") else
            "a compressed file" if head[:2] in (b"\x1f\x8b", b"PK", b"BZ") else
            "text" if head.isascii() else None)
    kind = f" ({what})" if what else ""
    raise DataError(f"not a capaudit store: it is not a DuckDB store{kind}; nothing was "
                    "written to it",
                    path=real, fix="pass a capaudit .duckdb store with --db, or a new file name")


def connect(real: Path, *, read_only: bool, external: bool, sandbox: bool):
    """DuckDB's connection to the checked file ``real`` (see the module's steps 1-3), with
    external access off unless ``external`` and the settings locked when ``sandbox``. A
    connection that must first allow some files is opened with access on and then
    :func:`seal`-ed."""
    import duckdb

    config = dict(BASE_CONFIG)
    if not external:
        config["enable_external_access"] = False
    if sandbox:
        config["lock_configuration"] = True
    return duckdb.connect(str(real), read_only=read_only, config=config)


def seal(con, *, external: bool, sandbox: bool, allowed: list[str] = (),
         one_thread: bool = False) -> None:
    """Close a connection opened with external access on down to what the command needs:
    ``allowed``, the only files it may still read or write (DuckDB takes ``allowed_paths``
    only while access is on), then access off unless ``external``, then (``sandbox``) the
    settings locked. ``one_thread``: a COPY of the user's query writes in order and in
    bounded memory (4 threads kept out-of-order chunks: 397 MB at 3M rows, 89 MB on one)."""
    if allowed:
        con.execute("SET allowed_paths = ?", [list(allowed)])
    if one_thread:
        con.execute("SET threads = 1")
    if not external or allowed:
        con.execute("SET enable_external_access = false")
    if sandbox:
        con.execute("SET lock_configuration = true")


class StoreState:
    """What :func:`recognise` found: a new (empty) database, or a capaudit store and its
    schema version."""

    def __init__(self, new: bool, version: int | None = None, ddl: str | None = None):
        self.new, self.version, self.ddl = new, version, ddl


def recognise(con, real: Path, supported: int) -> StoreState:
    """A capaudit store (``meta`` holds ``schema_version``), or a new empty database; any
    other database is refused in one line, a newer schema too (nothing is written)."""
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "ORDER BY table_name").fetchall()]
    if "meta" not in tables:
        if not tables:
            return StoreState(new=True)
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5
                                         else "")
        raise DataError(f"not a capaudit store: a DuckDB database with other tables "
                        f"({shown}); nothing was written to it", path=real,
                        fix="pass a capaudit store with --db, or a new file name")
    rows = dict(con.execute("SELECT key, value FROM meta WHERE key IN "
                            "('schema_version', 'schema_ddl')").fetchall())
    try:
        version = int(rows.get("schema_version"))
    except (TypeError, ValueError):
        raise DataError("not a capaudit store: its meta table has no schema version", path=real,
                        fix="pass a capaudit store with --db, or a new file name") from None
    if version > supported:
        raise DataError(f"the store was written by a newer capaudit (schema {version}; this "
                        f"one reads up to {supported}); nothing was written to it", path=real,
                        fix="upgrade capaudit (pip install -U capaudit)")
    return StoreState(new=False, version=version, ddl=rows.get("schema_ddl"))


def damaged(con, real: Path) -> str | None:
    """Why the store file is damaged, or None: it is shorter than the blocks DuckDB's header
    says are in use (a copy or a download cut short; DuckDB opens it and fails, or worse
    reads on, only when a missing block is needed)."""
    block_size, used = con.execute("SELECT block_size, used_blocks "
                                   "FROM pragma_database_size()").fetchone()
    need = _HEADER + int(used) * int(block_size)
    size = real.stat().st_size
    if size < need:
        return f"the file is {size:,} bytes, its blocks in use need at least {need:,}"
    return None


def damaged_error(real: Path, why: str) -> DataError:
    """One line for a damaged store: the file and the two ways back."""
    return DataError(f"the store is damaged ({why[:200]}); nothing was written to it",
                     path=real, fix=f"restore the last good copy of {real.name}, or run "
                     f"capaudit store check --db {real} to see what can still be read")
