"""Response cache: (backend, model, prompt, image hash, parameters) -> response.

Why SQLite: several worker processes (or Ray tasks on one machine) share one
cache file safely, and a write is durable once committed, so a run killed
with SIGKILL keeps every answer it already paid for; the rerun costs nothing
for those. Keys are sha256 hex digests computed by the backend.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Iterator

from capaudit.errors import InputError


@contextlib.contextmanager
def _setup_lock(path: Path) -> Iterator[None]:
    """Held while a process switches the cache to WAL and creates its table.

    Why: SQLite does not call its busy handler for ``PRAGMA journal_mode=WAL`` (the switch
    needs the file's exclusive lock while the connection already reads it, and waiting
    there could deadlock), so two workers opening a new cache at the same moment failed at
    once with "database is locked" instead of waiting out ``timeout`` (#37: the flaky
    ``test_sigint_during_enrich_against_a_dripping_server[2]``; 18 of 1,200 opens by four
    processes at once). The openers now take turns on an ``flock`` of the cache's folder:
    not of the file, since closing any descriptor of the file would drop the POSIX locks
    SQLite holds on it in this process. The switch happens once per file; later openers
    find it in WAL mode and pass straight through."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no flock; SQLite's own locks only
        yield
        return
    fd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # closing the descriptor releases the flock


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._con: sqlite3.Connection | None = None

    @property
    def con(self) -> sqlite3.Connection:
        # opened lazily so that the object pickles to workers before first use
        if self._con is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                con = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
                with _setup_lock(self.path):
                    con.execute("PRAGMA journal_mode=WAL")
                    con.execute("CREATE TABLE IF NOT EXISTS responses "
                                "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                # WAL + NORMAL: a committed answer survives SIGKILL of the process (only an OS
                # crash may lose the last ones); FULL would fsync every answer (~8 ms each)
                con.execute("PRAGMA synchronous=NORMAL")
            except (sqlite3.Error, OSError) as exc:
                raise InputError(f"not a usable response cache ({exc})", path=self.path,
                                 fix="pass another --cache file (SQLite), or delete this one")
            self._con = con
        return self._con

    def get(self, key: str) -> dict | None:
        rows = self.con.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchall()
        return json.loads(rows[0][0]) if rows else None

    def put(self, key: str, value: dict) -> None:
        self.con.execute("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)",
                         (key, json.dumps(value)))

    def size(self) -> int:
        return self.con.execute("SELECT count(*) FROM responses").fetchall()[0][0]

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __getstate__(self):
        return {"path": self.path, "_con": None}
