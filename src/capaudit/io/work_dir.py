"""One run at a time in a work folder: the OS lock every resumable command takes.

Why in ``io`` beside the shard markers: ``enrich``, ``annotations detect`` and
``audit run --shards`` all keep temporary files and completion markers in a work
folder; two runs in one folder would redo (and pay for) each other's work and
delete each other's temporary files.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock
    fcntl = None

from capaudit.errors import InputError

__all__ = ["work_dir_lock", "LOCK_NAME"]

_LOCKS: dict[Path, int] = {}          # work directories this process holds (re-entrant)
LOCK_NAME = ".lock"


@contextmanager
def work_dir_lock(work: str | Path) -> Iterator[Path]:
    """Hold the work directory alone: a second ``enrich`` on it stops with one line.

    Two runs on one directory would both send every request (and pay twice)
    and delete each other's temporary files. An OS lock (``flock``) dies with
    its process, so a killed run never leaves a stale lock behind.
    """
    work = Path(work).resolve()
    if work in _LOCKS or fcntl is None:
        _LOCKS[work] = _LOCKS.get(work, 0) + 1
        try:
            yield work
        finally:
            _LOCKS[work] -= 1
            if not _LOCKS[work]:
                del _LOCKS[work]
        return
    try:
        work.mkdir(parents=True, exist_ok=True)
        # never through a link planted at the lock's name (O_NOFOLLOW)
        fd = os.open(work / LOCK_NAME, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o666)
        fh = os.fdopen(fd, "r+", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot use this work directory ({exc.strerror or exc})", path=work,
                         fix="pass a writable folder with --work-dir") from None
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            raise InputError(f"another capaudit enrich (pid {holder}) is using this work "
                             "directory", path=work,
                             fix="wait for it to finish, or pass another --work-dir") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        _LOCKS[work] = 1
        try:
            yield work
        finally:
            del _LOCKS[work]
    finally:
        fh.close()  # releases the flock
