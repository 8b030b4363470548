"""The stores this process has open, for the two moments when something outside a command's
own code must reach them: a stop signal and the interpreter's exit.

Why apart from :mod:`capaudit.store.db`: the signal watcher (``capaudit.cli.main``) and the
exit hook act on every open store, whoever opened it, and need nothing else of the store.
"""

from __future__ import annotations

import atexit
import weakref

__all__ = ["OPEN_STORES", "interrupt_open_stores", "close_open_stores"]

#: every :class:`~capaudit.store.db.Store` opened in this process and not yet collected
OPEN_STORES: weakref.WeakSet = weakref.WeakSet()


def interrupt_open_stores() -> None:
    """Stop the query each open store is running (from any thread): a long INSERT or
    SELECT runs in DuckDB's C++ code, where Python's Ctrl-C handler cannot run for
    seconds; DuckDB's own interrupt ends it at once, and the transaction rolls back."""
    for store in list(OPEN_STORES):
        try:
            store.con.interrupt()
        except Exception:  # closed meanwhile  # noqa: BLE001
            pass


def close_open_stores() -> None:
    """At exit, close the stores a program left open (a script or notebook using the API
    without ``close``): DuckDB then checkpoints their write-ahead log into the file. Left
    unclosed, 100k added captions stayed as a 112 MB ``.wal`` beside the store, and the next
    command replayed it in memory when it opened the store (1.1 GB for 1.2M captions)."""
    for store in list(OPEN_STORES):
        try:
            store.close()
        except Exception:  # closed or invalidated already  # noqa: BLE001
            pass


atexit.register(close_open_stores)
