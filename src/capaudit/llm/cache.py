"""Response cache: (backend, model, prompt, image hash, parameters) -> response.

Why SQLite: several worker processes (or Ray tasks on one machine) share one
cache file safely, and a write is durable once committed, so a run killed
with SIGKILL keeps every answer it already paid for; the rerun costs nothing
for those. Keys are sha256 hex digests computed by the backend.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from capaudit.errors import InputError


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
                con.execute("PRAGMA journal_mode=WAL")
                # WAL + NORMAL: a committed answer survives SIGKILL of the process (only an OS
                # crash may lose the last ones); FULL would fsync every answer (~8 ms each)
                con.execute("PRAGMA synchronous=NORMAL")
                con.execute("CREATE TABLE IF NOT EXISTS responses "
                            "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
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
