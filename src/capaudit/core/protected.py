"""The files this process must never write over or remove: the store in use (and its WAL),
every registered set's source (a file, or a folder and everything in it).

Why its own module: every writer asks it (:mod:`capaudit.core.safe_write`, the folder
writer, the store's opener), and it holds process state, nothing else; compared by real
path and by file identity, so no link, ``..`` or hard link reaches a protected file.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["protect", "protected_as"]

_PROTECTED: dict[str, str] = {}        # real path -> what it is, for this process
_PROTECTED_DIRS: dict[str, str] = {}   # real folder (a registered source folder) -> what


def _real(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def protect(path: str | Path, what: str) -> None:
    """Mark ``path`` as never to be written over or removed in this process: the store (and
    its DuckDB WAL) registers itself when it opens, and every registered set's source (a
    file, or a folder and everything in it); no ``--out``/``--json``/``--report`` may
    replace them, by any name (links and ``..`` resolved)."""
    real = _real(path)
    if os.path.isdir(real):
        _PROTECTED_DIRS[real] = what
        return
    _PROTECTED[real] = what
    _PROTECTED[real + ".wal"] = what


def protected_as(path: str | Path) -> str | None:
    """What ``path`` is when this process must never write over or remove it (the store in
    use, a registered source or a file in a source folder), else None. Compared by real
    path, and by file identity (a hard link of the store is the store)."""
    real = _real(path)
    if real in _PROTECTED:
        return _PROTECTED[real]
    for folder, what in _PROTECTED_DIRS.items():
        if real == folder or real.startswith(folder.rstrip(os.sep) + os.sep):
            return what
    try:
        st = os.stat(real)
    except OSError:
        return None
    for other, what in _PROTECTED.items():
        try:
            ost = os.stat(other)
        except OSError:
            continue
        if (ost.st_dev, ost.st_ino) == (st.st_dev, st.st_ino):
            return what
    return None
