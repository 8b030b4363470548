"""Work folders of the resumable commands: where they go, one run at a time, and removal.

Why in ``io`` beside the shard markers: ``enrich``, ``annotations detect`` and
``audit run --shards`` all keep temporary files and completion markers in a work
folder; two runs in one folder would redo (and pay for) each other's work and
delete each other's temporary files.

Where (:func:`default_work_dir`): beside the store, in ``<store>.work/`` (for
``capaudit.duckdb``: ``capaudit.duckdb.work/NAME.audit-work``), never in the working
directory, where a sharded audit used to leave ``NAME.audit-work/`` wherever it was run.
Removal (:func:`remove_work`): after a successful run, only what the run made.

A work folder may be a URL (``--work-dir s3://bucket/run``: the one a Ray cluster without a
shared disk needs). There is no ``flock`` on object storage: the lock is an object created
only if absent (:mod:`capaudit.io.remote_lock`), refreshed while the run lives; a lock whose
process is gone (same machine) or whose heartbeat stopped is taken over.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock
    fcntl = None

from capaudit.errors import InputError

__all__ = ["work_dir_lock", "LOCK_NAME", "default_work_dir", "remove_work"]

_LOCKS: dict[Path, int] = {}          # work directories this process holds (re-entrant)
LOCK_NAME = ".lock"


@contextmanager
def work_dir_lock(work: str | Path) -> Iterator[Path]:
    """Hold the work directory alone: a second ``enrich`` on it stops with one line.

    Two runs on one directory would both send every request (and pay twice)
    and delete each other's temporary files. An OS lock (``flock``) dies with
    its process, so a killed run never leaves a stale lock behind.
    """
    from capaudit.core.urls import local_path

    if local_path(work) is None:
        from capaudit.io.remote_lock import remote_lock

        with remote_lock(str(work)) as folder:
            yield folder
        return
    work = local_path(work).resolve()
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


def default_work_dir(store_path: str | Path, name: str, suffix: str) -> Path:
    """``<store>.work/NAME.SUFFIX``: the work folder of a run on the store at ``store_path``
    when no ``--work-dir`` is given (a store in memory: the user cache dir)."""
    if str(store_path) in ("", ":memory:"):
        from capaudit.core.config import user_cache_dir

        return user_cache_dir() / "work" / f"{name}.{suffix}"
    return Path(f"{store_path}.work") / f"{name}.{suffix}"


def remove_work(made: str | Path, *, up_to: str | Path | None = None) -> None:
    """Remove what a successful run made: its folder ``made`` (one configuration's markers
    and states, named by its hash), the lock beside it, then the folders above it up to
    ``up_to`` (None: none of them) while they are empty. Anything else in them (another
    configuration's folder, a user's file) stays, and so does the folder holding it; a link
    is never followed."""
    from capaudit.core.urls import local_path

    if local_path(made) is None:   # a URL: this configuration's objects, then nothing above
        from capaudit.core.folder import Folder

        Folder(str(made)).remove_tree()
        return
    made = local_path(made)
    if made.is_symlink() or not made.is_dir():
        return
    shutil.rmtree(made)
    lock = made.parent / LOCK_NAME
    if lock.is_file() and not lock.is_symlink():
        lock.unlink()
    if up_to is None:
        return
    stop, folder = Path(up_to).resolve(), made.parent.resolve()
    while folder == stop or stop in folder.parents:
        try:
            folder.rmdir()      # only an empty folder: never one holding something else
        except OSError:
            return
        folder = folder.parent
